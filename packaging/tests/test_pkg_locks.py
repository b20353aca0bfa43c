"""The locks: well-formed, and pinning what the pyprojects and requirements.txt pin."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from sgwpkg.locks import (BUILD_TOOLS, REQUIREMENTS, lock_path, normalise, project_name, project_pins, read_lock,
                          requirement_pins)
from sgwpkg.run import BuildError
from sgwpkg.spec import REPO, load_spec

ROLES = {pkg.venv.role: pkg.venv.projects for pkg in load_spec().packages.values() if pkg.venv}


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_role_lock_pins_every_direct_dependency_at_its_pinned_version(role: str) -> None:
    lock = read_lock(lock_path(role))
    own = {project_name(p) for p in ROLES[role]}
    assert not own & set(lock), f"{role}.txt pins supergw's own projects {own & set(lock)}"
    for project in ROLES[role]:
        for name, version in project_pins(project).items():
            assert name in lock, f"{project} pins {name}=={version}, the {role} lock lacks it: make package-lock"
            assert lock[name].version == version, (f"{project} pins {name}=={version}, the {role} lock has "
                                                   f"{lock[name].version}: make package-lock")


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_role_lock_agrees_with_requirements_txt(role: str) -> None:
    """The packages carry the versions `make test` tested (requirements.txt constrains the locks)."""
    pins = requirement_pins(REQUIREMENTS.read_text())
    for pin in read_lock(lock_path(role)).values():
        if pin.name in pins:
            assert pin.version == pins[pin.name], f"{role}.txt: {pin.name} {pin.version}, requirements.txt {pins[pin.name]}"


def test_the_build_tools_lock_covers_the_build_systems() -> None:
    lock = read_lock(lock_path(BUILD_TOOLS))
    for project in {p for projects in ROLES.values() for p in projects}:
        for req in tomllib.loads((REPO / project / "pyproject.toml").read_text())["build-system"]["requires"]:
            name = normalise(req.split(">")[0].split("=")[0].split("<")[0])
            assert name in lock, f"{project} builds with {req}, {BUILD_TOOLS}.txt lacks it"


def test_bad_lock_lines_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("pydantic==2.0\n")
    with pytest.raises(BuildError, match="want 'name==version --hash=sha256:HEX'"):
        read_lock(f)
    f.write_text(f"a==1 --hash=sha256:{'0' * 64}\nA==2 --hash=sha256:{'1' * 64}\n")
    with pytest.raises(BuildError, match="a pinned twice"):
        read_lock(f)
    with pytest.raises(BuildError, match="make package-lock"):
        read_lock(tmp_path / "missing.txt")


def test_requirement_pins_reads_pins_and_skips_the_rest() -> None:
    text = "# c\nfoo_bar==1.0  # why\nbaz>=2\n\"qux==3\",\n"
    assert requirement_pins(text) == {"foo-bar": "1.0", "qux": "3"}

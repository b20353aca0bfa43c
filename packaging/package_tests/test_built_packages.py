"""`make package-check`: the .debs and wheels `make package` wrote, read back with dpkg-deb.

What the build trees were meant to hold is packages.toml; these tests read the built
archives as apt would get them: control fields, every promised path with its mode, no
build path or byte code inside, the venvs importable and the switch binary runnable from
the extracted files. Run after `make package` (the Makefile target does both); no root.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from sgwpkg import checks
from sgwpkg.build import OUT
from sgwpkg.spec import REPO, Package, load_spec

SPEC = load_spec()
ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
NAMES = sorted(SPEC.packages)


def deb_of(pkg: Package) -> Path:
    deb = OUT / f"{pkg.name}_{SPEC.version}_{pkg.architecture or ARCH}.deb"
    assert deb.is_file(), f"{deb} is missing: run `make package` first"
    return deb


def field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "--field", str(deb), name], capture_output=True, text=True,
                          check=True).stdout.strip()


def contents(deb: Path) -> dict[str, str]:
    """path inside the package -> its mode string (`drwxr-x---`, `-rwxr-xr-x`, `lrwxrwxrwx`)."""
    out = subprocess.run(["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True).stdout
    entries = {}
    for line in out.splitlines():
        parts = line.split(None, 5)
        path = parts[5].split(" -> ")[0]
        entries[path.removeprefix(".").rstrip("/") or "/"] = parts[0]
    return entries


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("debs")
    out = {}
    for name in NAMES:
        dest = root / name
        subprocess.run(["dpkg-deb", "-x", str(deb_of(SPEC.packages[name])), str(dest)], check=True)
        out[name] = dest
    return out


def octal(mode: str) -> int:
    bits = 0
    for ch in mode[1:10]:
        bits = bits << 1 | (ch != "-")
    return bits


@pytest.mark.parametrize("name", NAMES)
def test_control_fields_are_the_spec(name: str) -> None:
    pkg = SPEC.packages[name]
    deb = deb_of(pkg)
    assert field(deb, "Package") == name
    assert field(deb, "Version") == SPEC.version == (REPO / "VERSION").read_text().strip()
    assert field(deb, "Architecture") == (pkg.architecture or ARCH)
    for key, rel in (("Depends", pkg.depends), ("Recommends", pkg.recommends), ("Suggests", pkg.suggests)):
        assert [r.strip() for r in field(deb, key).split(",") if r.strip()] == list(rel), key
    depends = checks.relation_names(pkg.depends)
    if name != "supergw-controller":
        assert not [d for d in depends if checks.CONTROLLER_SIDE_DEBS.match(d)], depends


@pytest.mark.parametrize("name", NAMES)
def test_every_promised_path_is_in_the_archive_with_its_mode(name: str) -> None:
    pkg = SPEC.packages[name]
    have = contents(deb_of(pkg))
    for f in (*pkg.files, *pkg.conffiles):
        assert str(f.dest) in have, f"{name} lacks {f.dest}"
        assert octal(have[str(f.dest)]) == f.mode, f"{f.dest}: {have[str(f.dest)]}, spec {f.mode:04o}"
    for unit in pkg.units:
        assert f"/lib/systemd/system/{unit}" in have, f"{name} lacks its unit {unit}"
    for path, mode in pkg.dirs:
        assert str(path) in have and octal(have[str(path)]) == mode, f"{path}: {have.get(str(path))}, spec {mode:04o}"
    for command in pkg.commands:
        assert have.get(f"/usr/bin/{command}", "").startswith("l"), f"/usr/bin/{command} is no link into the venv"
    if pkg.venv is not None:
        assert f"{pkg.venv.prefix}/bin/python3.11" in have
    leaks = [p for p in have if "__pycache__" in p or p.endswith(".pyc") or "/build/" in p or p.startswith("/work")]
    assert not leaks, f"{name} ships build leftovers: {leaks[:5]}"


@pytest.mark.parametrize("name", [n for n in NAMES if SPEC.packages[n].venv is not None])
def test_the_venv_is_relocated_and_imports_its_projects(name: str, extracted: dict[str, Path]) -> None:
    pkg = SPEC.packages[name]
    assert pkg.venv is not None
    venv = extracted[name] / str(pkg.venv.prefix).lstrip("/")
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "home = /usr/bin" in cfg, cfg
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            head = script.read_bytes()[:200]
            assert str(REPO).encode() not in head and b"/build/" not in head, f"{script.name}: {head[:80]!r}"
            if head.startswith(b"#!"):
                assert head.split(b"\n")[0] == f"#!{pkg.venv.prefix}/bin/python3.11".encode() or \
                    head.split(b"\n")[0] == f"#!{pkg.venv.prefix}/bin/python".encode(), head.split(b"\n")[0]
    modules = [tomllib.loads((REPO / p / "pyproject.toml").read_text())["project"]["name"].replace("-", "_")
               for p in pkg.venv.projects]
    # ... and the module behind every command: its whole import chain must resolve in the venv.
    for entry in venv.glob("lib/python3.11/site-packages/supergw_*.dist-info/entry_points.txt"):
        modules += re.findall(r"^[\w-]+\s*=\s*([\w.]+):", entry.read_text(), re.M)
    assert len(modules) > len(pkg.venv.projects) or not pkg.commands, f"no console script found in {venv}"
    # Run from the extracted tree: the venv python finds its site-packages next to itself.
    code = "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]; print(sys.prefix)"
    done = subprocess.run([str(venv / "bin/python3.11"), "-I", "-c", code, *modules], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(venv), done.stdout


def test_the_switch_binary_runs_static(extracted: dict[str, Path]) -> None:
    binary = extracted["supergw-switch"] / "usr/sbin/supergw-switch"
    assert checks.elf_interpreter(binary) is None, "the packaged switch is dynamically linked"
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "cpu-port" in done.stdout + done.stderr, done.stderr[-500:]


def test_the_wheels_carry_the_version() -> None:
    wheels = sorted((OUT / "wheels").glob("*.whl"))
    names = {re.sub(r"-.*", "", w.name) for w in wheels}
    assert names == {"supergw_proto", "supergw_gateway", "supergw_controller"}, names
    assert all(f"-{SPEC.version}-" in w.name for w in wheels), [w.name for w in wheels]

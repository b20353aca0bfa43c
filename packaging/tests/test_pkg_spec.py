"""packages.toml: the real one loads; every malformed entry is refused naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgwpkg.spec import SpecError, load_spec, read_version

GOOD = """
maintainer = "m <m@x>"
homepage = "https://x"
[packages.supergw-x]
section = "net"
description = "x\\n more"
depends = ["python3.11", "iproute2 (>= 6.1)"]
"""


def write(tmp_path: Path, text: str, version: str = "1.2.3") -> tuple[Path, Path]:
    spec, ver = tmp_path / "packages.toml", tmp_path / "VERSION"
    spec.write_text(text)
    ver.write_text(version + "\n")
    return spec, ver


def test_the_repository_spec_loads() -> None:
    spec = load_spec()
    assert {"supergw-switch", "supergw-gateway", "supergw-controller", "supergw-proto"} <= set(spec.packages)
    gw = spec.packages["supergw-gateway"]
    assert gw.venv is not None and gw.venv.projects == ("proto", "backends")
    assert str(gw.venv.prefix) == "/usr/lib/supergw/gateway"
    assert "supergw-gateway" in gw.commands
    assert spec.version == read_version()


def test_a_minimal_spec_loads(tmp_path: Path) -> None:
    spec = load_spec(*write(tmp_path, GOOD))
    assert spec.version == "1.2.3"
    assert spec.packages["supergw-x"].depends == ("python3.11", "iproute2 (>= 6.1)")


@pytest.mark.parametrize(("addition", "message"), [
    ('colour = "red"', "unknown keys ['colour']"),
    ('recommends = ["Not A Package"]', "is not a Debian relation"),
    ('files = [["a", "relative/dest", "0644"]]', "must be an absolute path"),
    ('files = [["a", "/usr/x", "644"]]', "is not octal"),
    ('units = ["nope.service"]', "packaging/systemd/nope.service does not exist"),
    ('scripts = ["postinstall"]', "is not a maintainer script name"),
    ('commands = ["x"]', "console scripts need a venv"),
    ('venv = { role = "x", projects = ["no-such-folder"] }', "no-such-folder/pyproject.toml does not exist"),
    ('conffiles = [["a", "/usr/share/x", "0644"]]', "is not under /etc"),
    ('architecture = "amd64"', 'only "all" may be given'),
])
def test_bad_entries_are_refused_with_their_key(tmp_path: Path, addition: str, message: str) -> None:
    with pytest.raises(SpecError, match="packages.supergw-x") as err:
        load_spec(*write(tmp_path, GOOD + addition + "\n"))
    assert message in str(err.value)


def test_bad_version_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is not a Debian upstream version"):
        load_spec(*write(tmp_path, GOOD, version="v1.0"))
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(*write(tmp_path, GOOD + "[[["))
    with pytest.raises(SpecError, match="no \\[packages.NAME\\] tables"):
        load_spec(*write(tmp_path, 'maintainer = "m"\nhomepage = "h"\n'))
    with pytest.raises(SpecError, match="cannot read the version"):
        read_version(tmp_path / "missing")

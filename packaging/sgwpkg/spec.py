"""packaging/packages.toml as typed data, with clear errors for a malformed entry."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

PACKAGING = Path(__file__).resolve().parent.parent
REPO = PACKAGING.parent
SPEC_FILE = PACKAGING / "packages.toml"
VERSION_FILE = REPO / "VERSION"
# Where a package's private virtualenv lives on the target.
VENV_ROOT = PurePosixPath("/usr/lib/supergw")
_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_VERSION = re.compile(r"^[0-9][A-Za-z0-9.+~]*$")
_RELATION = re.compile(r"^[a-z0-9][a-z0-9+.-]+( \((<<|<=|=|>=|>>) [A-Za-z0-9.+~:-]+\))?$")


class SpecError(Exception):
    """packages.toml or VERSION says something the build cannot use."""


@dataclass(frozen=True)
class Venv:
    role: str  # /usr/lib/supergw/<role>, packaging/locks/<role>.txt
    projects: tuple[str, ...]  # repo folders with a pyproject.toml, installed in this order

    @property
    def prefix(self) -> PurePosixPath:
        return VENV_ROOT / self.role


@dataclass(frozen=True)
class Install:
    source: str  # relative to the repo
    dest: PurePosixPath
    mode: int


@dataclass(frozen=True)
class Package:
    name: str
    section: str
    description: str
    depends: tuple[str, ...] = ()
    recommends: tuple[str, ...] = ()
    suggests: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    architecture: str | None = None  # None: the build machine's
    venv: Venv | None = None
    commands: tuple[str, ...] = ()
    files: tuple[Install, ...] = ()
    conffiles: tuple[Install, ...] = ()
    units: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    dirs: tuple[tuple[PurePosixPath, int], ...] = ()


@dataclass(frozen=True)
class Spec:
    version: str
    maintainer: str
    homepage: str
    packages: dict[str, Package] = field(default_factory=dict)


def read_version(path: Path = VERSION_FILE) -> str:
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the version: {exc.strerror}") from None
    if not _VERSION.match(text):
        raise SpecError(f"{path}: {text!r} is not a Debian upstream version (digits first, then [A-Za-z0-9.+~])")
    return text


def _strings(where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: want a list of strings, got {value!r}")
    return tuple(value)


def _relations(where: str, value: object) -> tuple[str, ...]:
    rels = _strings(where, value)
    for r in rels:
        if not _RELATION.match(r):
            raise SpecError(f"{where}: {r!r} is not a Debian relation like 'pkg' or 'pkg (>= 1.0)'")
    return rels


def _installs(where: str, value: object) -> tuple[Install, ...]:
    out = []
    if not isinstance(value, list):
        raise SpecError(f"{where}: want a list of [source, destination, mode]")
    for i, item in enumerate(value):
        if not (isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)):
            raise SpecError(f"{where}[{i}]: want [source, destination, mode], got {item!r}")
        source, dest, mode = item
        if not dest.startswith("/") or ".." in PurePosixPath(dest).parts:
            raise SpecError(f"{where}[{i}]: destination {dest!r} must be an absolute path without '..'")
        out.append(Install(source, PurePosixPath(dest), _mode(f"{where}[{i}]", mode)))
    return tuple(out)


def _mode(where: str, text: str) -> int:
    if not re.fullmatch(r"0[0-7]{3}", text):
        raise SpecError(f"{where}: mode {text!r} is not octal like '0644'")
    return int(text, 8)


def _package(name: str, raw: dict[str, Any]) -> Package:
    where = f"packages.{name}"
    known = {"section", "description", "depends", "recommends", "suggests", "conflicts", "architecture", "venv",
             "commands", "files", "conffiles", "units", "scripts", "dirs"}
    unknown = set(raw) - known
    if unknown:
        raise SpecError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    if not _NAME.match(name):
        raise SpecError(f"{where}: {name!r} is not a Debian package name")
    for key in ("section", "description"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise SpecError(f"{where}.{key}: required, a non-empty string")
    venv = None
    if "venv" in raw:
        v = raw["venv"]
        if not (isinstance(v, dict) and set(v) == {"role", "projects"} and isinstance(v["role"], str)):
            raise SpecError(f"{where}.venv: want {{ role = \"...\", projects = [...] }}, got {v!r}")
        venv = Venv(v["role"], _strings(f"{where}.venv.projects", v["projects"]))
        for project in venv.projects:
            if not (REPO / project / "pyproject.toml").is_file():
                raise SpecError(f"{where}.venv.projects: {project}/pyproject.toml does not exist")
    commands = _strings(f"{where}.commands", raw.get("commands", []))
    if commands and venv is None:
        raise SpecError(f"{where}.commands: console scripts need a venv")
    dirs = []
    for i, d in enumerate(raw.get("dirs", [])):
        if not (isinstance(d, list) and len(d) == 2 and all(isinstance(x, str) for x in d) and d[0].startswith("/")):
            raise SpecError(f"{where}.dirs[{i}]: want [absolute path, mode], got {d!r}")
        dirs.append((PurePosixPath(d[0]), _mode(f"{where}.dirs[{i}]", d[1])))
    units = _strings(f"{where}.units", raw.get("units", []))
    for unit in units:
        if not (PACKAGING / "systemd" / unit).is_file():
            raise SpecError(f"{where}.units: packaging/systemd/{unit} does not exist")
    scripts = _strings(f"{where}.scripts", raw.get("scripts", []))
    for script in scripts:
        if script not in ("preinst", "postinst", "prerm", "postrm"):
            raise SpecError(f"{where}.scripts: {script!r} is not a maintainer script name")
        if not (PACKAGING / "debian" / name / script).is_file():
            raise SpecError(f"{where}.scripts: packaging/debian/{name}/{script} does not exist")
    conffiles = _installs(f"{where}.conffiles", raw.get("conffiles", []))
    for c in conffiles:
        if not str(c.dest).startswith("/etc/"):
            raise SpecError(f"{where}.conffiles: {c.dest} is not under /etc")
    arch = raw.get("architecture")
    if arch is not None and arch != "all":
        raise SpecError(f"{where}.architecture: only \"all\" may be given (default: the build machine's)")
    return Package(
        name=name,
        section=raw["section"],
        description=raw["description"].strip(),
        depends=_relations(f"{where}.depends", raw.get("depends", [])),
        recommends=_relations(f"{where}.recommends", raw.get("recommends", [])),
        suggests=_relations(f"{where}.suggests", raw.get("suggests", [])),
        conflicts=_relations(f"{where}.conflicts", raw.get("conflicts", [])),
        architecture=arch,
        venv=venv,
        commands=commands,
        files=_installs(f"{where}.files", raw.get("files", [])),
        conffiles=conffiles,
        units=units,
        scripts=scripts,
        dirs=tuple(dirs),
    )


def load_spec(path: Path = SPEC_FILE, version_file: Path = VERSION_FILE) -> Spec:
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    for key in ("maintainer", "homepage"):
        if not isinstance(raw.get(key), str):
            raise SpecError(f"{path}: `{key}` is required (a string)")
    packages = raw.get("packages")
    if not isinstance(packages, dict) or not packages:
        raise SpecError(f"{path}: no [packages.NAME] tables")
    spec = Spec(read_version(version_file), raw["maintainer"], raw["homepage"],
                {name: _package(name, body) for name, body in packages.items()})
    roles = [p.venv.role for p in spec.packages.values() if p.venv]
    if len(set(roles)) != len(roles):
        raise SpecError(f"{path}: two packages share a venv role: {roles}")
    return spec

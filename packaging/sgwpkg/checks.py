"""What every build is checked for before it counts as done (and what the tests feed it).

- A role's venv holds none of another role's own dependencies: the gateway none of the
  controller's (fastapi, finsy, aetcd, ...), the controller none of the gateway's (vici,
  pyroute2). "Own" = the role's direct pins minus the shared contracts' (proto) pins.
- No package depends on another role's package or on etcd unless it is the controller.
- A package whose binary needs a dynamic loader declares libc6 (the switch is static).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

from sgwpkg.locks import normalise, project_name, project_pins
from sgwpkg.spec import Package, Spec

# Debian packages only the controller side needs.
CONTROLLER_SIDE_DEBS = re.compile(r"^(supergw-controller|etcd(-.*)?)$")


def own_dependencies(spec: Spec) -> dict[str, set[str]]:
    """role -> the distributions only that role's projects pin (plus the projects themselves)."""
    shared = set(project_pins("proto")) | {project_name("proto")}
    out = {}
    for pkg in spec.packages.values():
        if pkg.venv is None:
            continue
        own: set[str] = set()
        for project in pkg.venv.projects:
            if project != "proto":
                own |= set(project_pins(project)) | {project_name(project)}
        out[pkg.venv.role] = own - shared
    return out


def venv_distributions(venv: Path) -> set[str]:
    names = set()
    for info in venv.glob("lib/python3*/site-packages/*.dist-info"):
        meta = info / "METADATA"
        for line in meta.read_text(errors="replace").splitlines():
            if line.startswith("Name:"):
                names.add(normalise(line.split(":", 1)[1].strip()))
                break
    return names


def foreign_distributions(role: str, installed: Iterable[str], own: Mapping[str, set[str]]) -> list[str]:
    """Problems: distributions in `role`'s venv that belong to another role only."""
    problems = []
    have = set(installed)
    for other, deps in own.items():
        if other == role:
            continue
        leaked = sorted(have & (deps - own.get(role, set())))
        if leaked:
            problems.append(f"the {role} venv holds the {other} side's {', '.join(leaked)}")
    return problems


def relation_names(relations: Iterable[str]) -> list[str]:
    return [r.split(" ", 1)[0] for rel in relations for r in (alt.strip() for alt in rel.split("|"))]


def foreign_relations(pkg: Package) -> list[str]:
    if pkg.name == "supergw-controller":
        return []
    bad = [n for n in relation_names((*pkg.depends, *pkg.recommends)) if CONTROLLER_SIDE_DEBS.match(n)]
    return [f"{pkg.name} depends on or recommends controller-side {n}" for n in bad]


def elf_interpreter(path: Path) -> str | None:
    """The ELF program interpreter (PT_INTERP) of a 64-bit little-endian binary, None if static."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path} is not a 64-bit little-endian ELF file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, = struct.unpack_from("<I", data, phoff + i * phentsize)
        if p_type == 3:  # PT_INTERP
            off, = struct.unpack_from("<Q", data, phoff + i * phentsize + 8)
            size, = struct.unpack_from("<Q", data, phoff + i * phentsize + 32)
            return data[off:off + size].rstrip(b"\0").decode()
    return None


def undeclared_loader(pkg: Package, binaries: Iterable[Path]) -> list[str]:
    if "libc6" in relation_names(pkg.depends):
        return []
    return [f"{pkg.name}: {b.name} needs {interp} but the package does not depend on libc6"
            for b in binaries if (interp := elf_interpreter(b)) is not None]

"""A role's private virtualenv, built in the package tree and relocated to its place on the target.

Debian 12 has no pydantic 2, finsy or fastapi at the pinned versions, so each Python role
ships its own venv under /usr/lib/supergw/<role>, made from Debian's python3.11 (the
target's interpreter: bin/python3.11 links to /usr/bin/python3.11) and filled offline from
the lock's wheels (--require-hashes) and supergw's own wheels. It is built at
<tree>/usr/lib/supergw/<role>; what records that path is rewritten to the final one:
console-script shebangs (and their RECORD hashes) and pyvenv.cfg. No pip and no byte code
are shipped: the postinst compiles, the prerm removes what it compiled.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import shutil
from pathlib import Path, PurePosixPath

from sgwpkg.locks import read_lock
from sgwpkg.run import BuildError, run

DEBIAN_PYTHON = Path("/usr/bin/python3.11")


def tree_path(tree: Path, target: PurePosixPath) -> Path:
    return tree / target.relative_to("/")


def create(tree: Path, prefix: PurePosixPath) -> Path:
    if not DEBIAN_PYTHON.exists():
        raise BuildError(f"{DEBIAN_PYTHON} is missing: the venvs are built from Debian 12's python3.11 "
                         "(apt-get install python3.11-venv)")
    path = tree_path(tree, prefix)
    if path.exists():
        shutil.rmtree(path)
    run([DEBIAN_PYTHON, "-m", "venv", "--without-pip", path], hint="apt-get install python3.11-venv")
    return path


def install(pip: Path, venv: Path, lock: Path, wheelhouse: Path, own_wheels: list[Path], env: dict[str, str]) -> None:
    common: list[str | Path] = ["--disable-pip-version-check", "--quiet", "--python", venv / "bin/python", "install", "--no-index",
              "--no-compile", "--no-deps", "--no-warn-script-location"]
    if read_lock(lock):
        run([pip, *common, "--find-links", wheelhouse, "--require-hashes", "-r", lock], env=env,
            hint=f"a wheel in {wheelhouse} does not match {lock}: `make package-lock` after changing pins")
    run([pip, *common, *own_wheels], env=env)
    # Every requirement of every installed distribution is satisfied, from the lock alone.
    run([pip, "--disable-pip-version-check", "--python", venv / "bin/python", "check"],
        hint=f"{lock} lacks a dependency: `make package-lock`")


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def relocate(venv: Path, prefix: PurePosixPath) -> list[str]:
    """Rewrite what names the build path; returns the console scripts found in bin/."""
    built, final = str(venv), str(prefix)
    for activate in venv.glob("bin/[Aa]ctivate*"):
        activate.unlink()  # shell activation scripts: not used by units or wrappers
    cfg = venv / "pyvenv.cfg"
    lines = [ln for ln in cfg.read_text().splitlines() if not ln.startswith("command")]
    cfg.write_text("\n".join(lines) + "\n")
    if built in cfg.read_text():
        raise BuildError(f"{cfg} still names the build path {built}")
    rewritten: dict[str, bytes] = {}
    scripts = []
    for f in sorted((venv / "bin").iterdir()):
        if f.is_symlink() or not f.is_file():
            continue
        data = f.read_bytes()
        first, _, rest = data.partition(b"\n")
        if first.startswith(b"#!") and built.encode() in first:
            new = first.replace(built.encode(), final.encode()) + b"\n" + rest
            f.write_bytes(new)
            rewritten[f"../../../bin/{f.name}"] = new
            scripts.append(f.name)
    for record in venv.glob("lib/python3.11/site-packages/*.dist-info/RECORD"):
        _rewrite_record(record, rewritten)
    leftovers = [str(p) for p in venv.rglob("*") if p.is_file() and not p.is_symlink()
                 and built.encode() in p.read_bytes()]
    if leftovers:
        raise BuildError(f"files still name the build path {built}: {leftovers[:5]}")
    return scripts


def _rewrite_record(record: Path, rewritten: dict[str, bytes]) -> None:
    rows = list(csv.reader(io.StringIO(record.read_text())))
    changed = False
    for row in rows:
        if row and row[0] in rewritten:
            data = rewritten[row[0]]
            row[1], row[2] = _record_hash(data), str(len(data))
            changed = True
    if changed:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        record.write_text(out.getvalue())

"""`make package-lock`: resolve packaging/locks/*.txt with pip (needs PyPI), or --check them."""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path

from sgwpkg import locks, sources
from sgwpkg.build import WORK, tools_venv
from sgwpkg.run import say, step
from sgwpkg.spec import REPO, load_spec


def build_requirements(projects: list[str]) -> list[str]:
    reqs: set[str] = set()
    for project in projects:
        reqs |= set(tomllib.loads((REPO / project / "pyproject.toml").read_text())["build-system"]["requires"])
    return sorted(reqs)


def resolved(pip: Path) -> dict[Path, str]:
    """lock file -> the text it should have now."""
    spec = load_spec()
    out: dict[Path, str] = {}
    scratch = WORK / "lock"
    scratch.mkdir(parents=True, exist_ok=True)
    all_projects: set[str] = set()
    for pkg in spec.packages.values():
        if pkg.venv is None:
            continue
        all_projects |= set(pkg.venv.projects)
        staged = [sources.stage_project(p, scratch / "src") for p in pkg.venv.projects]
        with step(f"resolving the {pkg.venv.role} venv ({', '.join(pkg.venv.projects)})"):
            pins = locks.resolve(pip, staged, [], scratch / f"{pkg.venv.role}.json")
        path = locks.lock_path(pkg.venv.role)
        locks.write_lock(scratch / path.name, " + ".join(f"{p}/pyproject.toml" for p in pkg.venv.projects), pins)
        out[path] = (scratch / path.name).read_text()
    reqs = build_requirements(sorted(all_projects))
    with step(f"resolving the build tools ({', '.join(reqs)})"):
        pins = locks.resolve(pip, [], reqs, scratch / "build-tools.json")
    path = locks.lock_path(locks.BUILD_TOOLS)
    locks.write_lock(scratch / path.name, "the projects' [build-system] requires", pins)
    out[path] = (scratch / path.name).read_text()
    return out


def main(check: bool) -> int:
    pip = tools_venv(WORK, {})
    wanted = resolved(pip)
    stale = []
    for path, text in wanted.items():
        old = path.read_text() if path.is_file() else ""
        if old == text:
            continue
        stale.append(path)
        if check:
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), str(path), "resolved now", lineterm="")
            print("\n".join(diff))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            say(f"wrote {path.relative_to(REPO)}")
    if check and stale:
        say(f"{len(stale)} locks differ from what pip resolves now: run `make package-lock`")
        return 1
    say("locks are current" if not stale else f"{len(stale)} locks rewritten")
    return 0


"""supergw's Python projects, copied out of the tree and built into wheels.

pip builds a project in its source folder (build/, *.egg-info): the copy keeps the
repository clean, holds only files git knows of (tracked, or new and not ignored), and
turns the VERSION link into a file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sgwpkg.run import BuildError, run
from sgwpkg.spec import REPO


def project_files(project: str) -> list[Path]:
    out = run(["git", "-C", REPO, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", project],
              capture=True, hint="make package builds from a git checkout of supergw")
    files = [Path(p) for p in out.split("\0") if p]
    # Tests stay in the repository: the wheels hold the importable package and its data.
    return [f for f in files if "tests" not in f.parts and (REPO / f).exists()]


def stage_project(project: str, dest_root: Path) -> Path:
    dest = dest_root / project
    if dest.exists():
        shutil.rmtree(dest)
    files = project_files(project)
    if not any(f.name == "pyproject.toml" for f in files):
        raise BuildError(f"{project}/pyproject.toml is not known to git")
    for f in files:
        target = dest_root / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / f, target)  # follows links: VERSION -> ../VERSION
    return dest


def build_wheel(pip: Path, source: Path, out: Path, env: dict[str, str]) -> Path:
    """One wheel with the pinned build tools already in pip's environment (no index access)."""
    before = set(out.glob("*.whl"))
    run([pip, "wheel", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", out, source], env=env,
        hint=f"building the wheel of {source.name} failed: check its pyproject.toml")
    new = set(out.glob("*.whl")) - before
    name = source.name
    if len(new) != 1:
        raise BuildError(f"pip wheel {name} wrote {sorted(p.name for p in new)}, expected one wheel")
    return new.pop()

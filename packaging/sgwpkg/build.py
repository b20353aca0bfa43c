"""`make package`: wheels and Debian packages from this repository, into build/packages/.

Steps: the build tools venv (Debian's python3.11, pinned setuptools from
packaging/locks/build-tools.txt); supergw's wheels; the locked wheels of every role
(downloaded once into build/package/wheelhouse, checked by hash); the switch binary; one
tree per package (venv, files, units, maintainer scripts); dpkg-deb; the checks of
sgwpkg.checks. Network access is needed only to fill the wheelhouse.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from sgwpkg import checks, deb, locks, sources, switch, venv
from sgwpkg.run import BuildError, run, say, step
from sgwpkg.spec import REPO, Spec

WORK = REPO / "build/package"
OUT = REPO / "build/packages"
SWITCH_BIN = WORK / "switch/supergw-switch"  # packages.toml installs it from here


@dataclass(frozen=True)
class Built:
    debs: list[Path]
    wheels: list[Path]


def source_date_epoch() -> int:
    """The last commit's time: the same tree builds the same bytes."""
    if "SOURCE_DATE_EPOCH" in os.environ:
        return int(os.environ["SOURCE_DATE_EPOCH"])
    return int(run(["git", "-C", REPO, "log", "-1", "--format=%ct"], capture=True,
                   hint="set SOURCE_DATE_EPOCH when building outside a git checkout").strip())


def tools_venv(work: Path, env: dict[str, str]) -> Path:
    """Debian's python3.11 with its bundled pip and the pinned build tools; returns its pip."""
    tools = work / "tools"
    pip = tools / "bin/pip"
    stamp = tools / ".lock"
    lock = locks.lock_path(locks.BUILD_TOOLS)
    want = lock.read_text() if lock.is_file() else ""
    if not (pip.exists() and stamp.is_file() and stamp.read_text() == want):
        shutil.rmtree(tools, ignore_errors=True)
        run([venv.DEBIAN_PYTHON, "-m", "venv", tools], hint="apt-get install python3.11-venv (make deps)")
        if want:
            run([pip, "install", "--quiet", "--disable-pip-version-check", "--require-hashes", "-r", lock], env=env)
        stamp.write_text(want)
    return pip


def wheelhouse(pip: Path, work: Path, roles: list[str], env: dict[str, str]) -> Path:
    house = work / "wheelhouse"
    house.mkdir(parents=True, exist_ok=True)
    for role in roles:
        lock = locks.lock_path(role)
        pins = locks.read_lock(lock)
        missing = [p for p in pins.values()
                   if not any(locks.normalise(w.name.split("-")[0]) == p.name and f"-{p.version}-" in w.name
                              for w in house.glob("*.whl"))]
        if missing:
            say(f"downloading {len(missing)} pinned wheels for {role}: {', '.join(p.name for p in missing)}")
            run([pip, "download", "--quiet", "--disable-pip-version-check", "--no-deps", "--only-binary", ":all:",
                 "--require-hashes", "-r", lock, "--dest", house], env=env,
                hint="the wheels come from PyPI: check network access, or the lock's hashes (`make package-lock`)")
    return house


def build_all(spec: Spec, out: Path = OUT, work: Path = WORK) -> Built:
    epoch = source_date_epoch()
    env = {"SOURCE_DATE_EPOCH": str(epoch), "PYTHONDONTWRITEBYTECODE": "1", "PIP_NO_INPUT": "1"}
    arch = run(["dpkg", "--print-architecture"], capture=True).strip()
    shutil.rmtree(out, ignore_errors=True)
    (out / "wheels").mkdir(parents=True)
    with step("build tools (python3.11 venv, pinned setuptools)"):
        pip = tools_venv(work, env)
    projects = sorted({p for pkg in spec.packages.values() if pkg.venv for p in pkg.venv.projects})
    wheels: dict[str, Path] = {}
    with step(f"wheels of {', '.join(projects)}"):
        for project in projects:
            wheels[project] = sources.build_wheel(pip, sources.stage_project(project, work / "src"), out / "wheels",
                                                  env)
    roles = [pkg.venv.role for pkg in spec.packages.values() if pkg.venv]
    with step("pinned wheels (build/package/wheelhouse)"):
        house = wheelhouse(pip, work, roles, env)
    if any(str(f.dest) == "/usr/sbin/supergw-switch" for pkg in spec.packages.values() for f in pkg.files):
        with step("supergw-switch (static, eBPF objects embedded)"):
            switch.build_switch(SWITCH_BIN)
    own = checks.own_dependencies(spec)
    problems: list[str] = []
    debs = []
    for pkg in spec.packages.values():
        with step(f"{pkg.name} {spec.version}"):
            tree = work / "trees" / pkg.name
            shutil.rmtree(tree, ignore_errors=True)
            tree.mkdir(parents=True)
            if pkg.venv is not None:
                path = venv.create(tree, pkg.venv.prefix)
                venv.install(pip, path, locks.lock_path(pkg.venv.role), house,
                             [wheels[p] for p in pkg.venv.projects], env)
                scripts = venv.relocate(path, pkg.venv.prefix)
                absent = sorted(set(pkg.commands) - set(scripts))
                if absent:
                    problems.append(f"{pkg.name}: commands {absent} are no console scripts of its venv ({scripts})")
                problems += checks.foreign_distributions(pkg.venv.role, checks.venv_distributions(path), own)
            deb.lay_out(tree, pkg)
            problems += checks.foreign_relations(pkg)
            problems += checks.undeclared_loader(pkg, [REPO / f.source for f in pkg.files
                                                       if f.dest.parent.name in ("bin", "sbin")])
            debs.append(deb.build(spec, pkg, tree, out, arch, epoch))
    if problems:
        raise BuildError("the packages fail their checks:\n  " + "\n  ".join(problems))
    return Built(debs, sorted(wheels.values()))


def main(out: Path = OUT) -> int:
    t0 = time.monotonic()
    from sgwpkg.spec import load_spec

    built = build_all(load_spec(), out)
    for f in (*built.debs, *built.wheels):
        say(f"  {f.relative_to(REPO)}  ({f.stat().st_size / 1e6:.1f} MB)")
    say(f"built {len(built.debs)} Debian packages and {len(built.wheels)} wheels in {time.monotonic() - t0:.0f} s")
    return 0

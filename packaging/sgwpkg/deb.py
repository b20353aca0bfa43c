"""A package tree (files, DEBIAN/control, md5sums, conffiles, maintainer scripts) and dpkg-deb.

Plain dpkg-deb on a tree we lay out ourselves: the packages are native binary packages of
this repository (no Debian source package, no orig tarball), their venvs and switch binary
are built by sgwpkg anyway, and dh-virtualenv is not in Debian 12. Reproducible: every
mtime is SOURCE_DATE_EPOCH, owners are root (--root-owner-group), modes are set here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path, PurePosixPath

from sgwpkg.run import BuildError, run
from sgwpkg.spec import PACKAGING, REPO, Package, Spec


def tree_path(tree: Path, target: PurePosixPath) -> Path:
    return tree / target.relative_to("/")


def install_file(tree: Path, source: Path, dest: PurePosixPath, mode: int) -> None:
    if not source.is_file():
        raise BuildError(f"{source} is missing (needed at {dest})")
    out = tree_path(tree, dest)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, out)
    out.chmod(mode)


def lay_out(tree: Path, pkg: Package) -> None:
    """Everything but the venv: files, conffiles, units, dirs, /usr/bin links, maintainer scripts."""
    for item in (*pkg.files, *pkg.conffiles):
        install_file(tree, REPO / item.source, item.dest, item.mode)
    for unit in pkg.units:
        install_file(tree, PACKAGING / "systemd" / unit, PurePosixPath("/lib/systemd/system") / unit, 0o644)
    for path, mode in pkg.dirs:
        d = tree_path(tree, path)
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(mode)
    if pkg.venv is not None:
        bindir = tree / "usr/bin"
        bindir.mkdir(parents=True, exist_ok=True)
        for command in pkg.commands:
            link = bindir / command
            link.unlink(missing_ok=True)
            link.symlink_to(f"../lib/supergw/{pkg.venv.role}/bin/{command}")
    debian = tree / "DEBIAN"
    debian.mkdir(parents=True, exist_ok=True)
    for script in pkg.scripts:
        out = debian / script
        out.write_text(maintainer_script(pkg, script))
        out.chmod(0o755)
    if pkg.conffiles:
        (debian / "conffiles").write_text("".join(f"{c.dest}\n" for c in pkg.conffiles))


def maintainer_script(pkg: Package, script: str) -> str:
    """packaging/debian/<package>/<script> with #SUPERGW_VENV# replaced by the venv snippet of
    that script (packaging/debian/snippets/<script>-venv for the package's role), as
    debhelper fills #DEBHELPER#."""
    text = (PACKAGING / "debian" / pkg.name / script).read_text()
    if "#SUPERGW_VENV#" not in text:
        return text
    snippet = PACKAGING / "debian" / "snippets" / f"{script}-venv"
    if pkg.venv is None or not snippet.is_file():
        raise BuildError(f"packaging/debian/{pkg.name}/{script}: #SUPERGW_VENV# needs a venv and {snippet}")
    return text.replace("#SUPERGW_VENV#", snippet.read_text().replace("@ROLE@", pkg.venv.role).rstrip("\n"))


def _installed_size_kib(tree: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(tree):
        if Path(root) == tree:
            dirs[:] = [d for d in dirs if d != "DEBIAN"]
        total += 1  # the directory itself, as dpkg-gencontrol counts it
        for f in files:
            p = Path(root, f)
            total += (p.lstat().st_size + 1023) // 1024 if not p.is_symlink() else 1
    return total


def control(spec: Spec, pkg: Package, arch: str, tree: Path) -> str:
    fields = [
        ("Package", pkg.name),
        ("Version", spec.version),
        ("Architecture", pkg.architecture or arch),
        ("Maintainer", spec.maintainer),
        ("Installed-Size", str(_installed_size_kib(tree))),
        ("Depends", ", ".join(pkg.depends)),
        ("Recommends", ", ".join(pkg.recommends)),
        ("Suggests", ", ".join(pkg.suggests)),
        ("Conflicts", ", ".join(pkg.conflicts)),
        ("Section", pkg.section),
        ("Priority", "optional"),
        ("Homepage", spec.homepage),
        ("Description", pkg.description),
    ]
    return "".join(f"{k}: {v}\n" for k, v in fields if v)


def write_md5sums(tree: Path) -> None:
    lines = []
    for root, dirs, files in os.walk(tree):
        dirs.sort()
        if Path(root) == tree:
            dirs[:] = [d for d in dirs if d != "DEBIAN"]
        for f in sorted(files):
            p = Path(root, f)
            if p.is_symlink():
                continue
            lines.append(f"{hashlib.md5(p.read_bytes()).hexdigest()}  {p.relative_to(tree)}\n")
    (tree / "DEBIAN/md5sums").write_text("".join(sorted(lines, key=lambda ln: ln.split("  ", 1)[1])))


def normalise_tree(tree: Path, epoch: int) -> None:
    """Modes dpkg expects (no group/other write), and every mtime = epoch."""
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            p = Path(root, name)
            if not p.is_symlink():
                p.chmod(p.stat().st_mode & 0o7755)
            os.utime(p, (epoch, epoch), follow_symlinks=False)
    os.utime(tree, (epoch, epoch))


def build(spec: Spec, pkg: Package, tree: Path, out_dir: Path, arch: str, epoch: int) -> Path:
    (tree / "DEBIAN/control").write_text(control(spec, pkg, arch, tree))
    write_md5sums(tree)
    normalise_tree(tree, epoch)
    out = out_dir / f"{pkg.name}_{spec.version}_{pkg.architecture or arch}.deb"
    out.unlink(missing_ok=True)
    run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", tree, out],
        env={"SOURCE_DATE_EPOCH": str(epoch)}, hint="dpkg-deb comes with dpkg (every Debian system)")
    return out

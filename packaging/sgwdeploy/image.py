"""The machines' Debian 12: a debootstrapped base image and an offline subset of the archive.

- Base image (cached in build/deploy-test/base-<key>, key = suite, mirror, package list):
  `debootstrap --variant=minbase` (Priority: required only) plus what boots systemd in a
  container (systemd, systemd-sysv, dbus). Nothing of supergw's dependencies: apt must
  pull every one of them from the packages' own Depends.
- The machines have no route to the Internet, so apt inside them installs from a local
  repository (build/deploy-test/debian-<key>: `apt-get install --download-only` of our
  .debs in a throwaway copy of the base image with this machine's network, then
  dpkg-scanpackages). apt in the machine still resolves every dependency itself; the
  repository only holds the files, as a mirror would.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sgwdeploy.host import DeployError, say, sh, stage

SUITE = "bookworm"
BOOT_PACKAGES = ("systemd", "systemd-sysv", "dbus")
IMAGE_FORMAT = 1  # bump when the way the image is made changes


def debian_mirror(roots: tuple[Path, ...] = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))) -> str:
    """The Debian archive this machine installs from (one-line or deb822 sources)."""
    files: list[Path] = []
    for root in roots:
        if root.is_dir():
            files += sorted(p for p in root.iterdir() if p.suffix in (".list", ".sources"))
        elif root.is_file():
            files.append(root)
    for f in files:
        text = f.read_text(errors="replace")
        if f.suffix == ".sources":
            for block in re.split(r"\n\s*\n", text):
                suites = re.search(r"^Suites:\s*(.+)$", block, re.M)
                uris = re.search(r"^URIs:\s*(\S+)", block, re.M)
                if suites and uris and SUITE in suites[1].split() and "/debian" in uris[1] \
                        and "security" not in uris[1]:
                    return uris[1].rstrip("/")
        else:
            for line in text.splitlines():
                m = re.match(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line.strip())
                if m and m[2] == SUITE and "/debian" in m[1] and "security" not in m[1]:
                    return m[1].rstrip("/")
    raise DeployError(f"no Debian {SUITE} mirror in /etc/apt/sources.list*: the base image is debootstrapped from it")


def _key(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def base_image(cache: Path) -> Path:
    mirror = debian_mirror()
    base = cache / f"base-{_key(SUITE, mirror, BOOT_PACKAGES, IMAGE_FORMAT)}"
    if (base / ".complete").is_file():
        say(f"base image: {base} (cached)")
        return base
    shutil.rmtree(base, ignore_errors=True)
    with stage(f"debootstrap {SUITE} (minbase + {', '.join(BOOT_PACKAGES)}) from {mirror}"):
        sh(["debootstrap", "--variant=minbase", f"--include={','.join(BOOT_PACKAGES)}", SUITE, base, mirror],
           timeout=1200)
    # A machine's identity is made at its first boot (systemd-machine-id-setup).
    (base / "etc/machine-id").write_text("")
    (base / "etc/hostname").write_text("debian\n")
    (base / ".complete").write_text(mirror + "\n")
    return base


@contextmanager
def overlay(lower: Path, work: Path) -> Iterator[Path]:
    """A writable copy of `lower` (overlayfs) at work/root, removed afterwards."""
    shutil.rmtree(work, ignore_errors=True)
    for d in ("upper", "work", "root"):
        (work / d).mkdir(parents=True)
    root = work / "root"
    sh(["mount", "-t", "overlay", "overlay", "-o",
        f"lowerdir={lower},upperdir={work / 'upper'},workdir={work / 'work'}", root])
    try:
        yield root
    finally:
        sh(["umount", "-R", root], check=False)
        shutil.rmtree(work, ignore_errors=True)


def local_repository(base: Path, debs: list[Path], extra: list[str], cache: Path) -> Path:
    """Every Debian package that installing `debs` and `extra` into `base` needs, as a flat repository."""
    mirror = debian_mirror()
    control = "".join(sh(["dpkg-deb", "-f", d, "Package", "Depends", "Recommends"]).stdout for d in debs)
    repo = cache / f"debian-{_key(base.name, mirror, control, sorted(extra))}"
    if (repo / "Packages").is_file():
        say(f"local Debian repository: {repo} (cached)")
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    with stage(f"downloading what {', '.join(d.name for d in debs)} and {', '.join(extra)} need from {mirror}"), \
            overlay(base, cache / "download") as root:
        shutil.copyfile("/etc/resolv.conf", root / "etc/resolv.conf")
        (root / "etc/apt/sources.list").write_text(f"deb {mirror} {SUITE} main\n")
        inbox = root / "tmp/supergw-debs"
        inbox.mkdir()
        for d in debs:
            shutil.copyfile(d, inbox / d.name)
        (root / "tmp/archives/partial").mkdir(parents=True)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive", "LANG": "C.UTF-8"}
        sh(["chroot", root, "apt-get", "update", "-qq"], env=env)
        sh(["chroot", root, "apt-get", "install", "-y", "-qq", "--download-only", "-o",
            "Dir::Cache::archives=/tmp/archives", *[f"/tmp/supergw-debs/{d.name}" for d in debs], *extra], env=env)
        for f in (root / "tmp/archives").glob("*.deb"):
            shutil.copyfile(f, repo / f.name)
    count = len(list(repo.glob("*.deb")))
    if count == 0:
        raise DeployError(f"apt downloaded nothing into {repo}")
    index = sh(["dpkg-scanpackages", "--multiversion", "."], cwd=repo, env={**os.environ, "LC_ALL": "C"})
    (repo / "Packages").write_text(index.stdout)
    say(f"local Debian repository: {count} packages in {repo}")
    return repo

"""The .debs under test: what `make package` wrote, and a higher version of one for the upgrade."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sgwdeploy.host import DeployError, sh

PACKAGING = Path(__file__).resolve().parent.parent
REPO = PACKAGING.parent
BUILT = REPO / "build/packages"


def built_packages(names: set[str], where: Path = BUILT) -> dict[str, Path]:
    """package name -> its .deb of the repository's VERSION, or an error saying to build them."""
    version = (REPO / "VERSION").read_text().strip()
    found = {}
    for name in sorted(names):
        debs = sorted(where.glob(f"{name}_{version}_*.deb"))
        if len(debs) != 1:
            raise DeployError(f"want one {name}_{version}_*.deb in {where}, found {[d.name for d in debs]}: "
                              "run `make package` first (make deploy-test does)")
        found[name] = debs[0]
    return found


def field(deb: Path, name: str) -> str:
    return sh(["dpkg-deb", "-f", deb, name]).stdout.strip()


def with_version(deb: Path, version: str, out_dir: Path) -> Path:
    """The same package with a higher Version (the upgrade's new release): only control changes."""
    work = out_dir / f"repack-{deb.stem}"
    shutil.rmtree(work, ignore_errors=True)
    sh(["dpkg-deb", "-R", deb, work])
    control = work / "DEBIAN/control"
    text, n = re.subn(r"^Version: .*$", f"Version: {version}", control.read_text(), count=1, flags=re.M)
    if n != 1:
        raise DeployError(f"{deb}: no Version field")
    control.write_text(text)
    arch = field(deb, "Architecture")
    out = out_dir / f"{field(deb, 'Package')}_{version}_{arch}.deb"
    sh(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", work, out])
    shutil.rmtree(work)
    return out

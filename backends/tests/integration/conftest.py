from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from supergw_gateway.config import Backend
from supergw_gateway.lab import Lab
from supergw_gateway.runtime import Gateway

pytestmark = pytest.mark.integration


def require_root_strongswan() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (namespaces, veths, charon)")
    for tool in ("/usr/sbin/charon-systemd", shutil.which("ip"), shutil.which("tcpdump")):
        if not tool or not Path(tool).exists():
            pytest.skip(f"missing {tool}: run `make deps`")


def require_uml() -> None:
    require_root_strongswan()
    if not Path("/usr/bin/linux.uml").exists():
        pytest.skip("user-mode-linux is not installed")


class Running:
    def __init__(self, lab: Lab, tmp: Path, **extra: Any) -> None:
        self.lab = lab
        self.paths: dict[str, Path] = {}
        self.gws: dict[str, Gateway] = {}
        for k in ("a", "b"):
            d = lab.config_dict(k, **extra.get(k, {}))
            self.paths[k] = tmp / f"{lab.tag}-{k}.yaml"
            self.paths[k].write_text(yaml.safe_dump(d))
            self.gws[k] = Gateway(lab.config(k, **extra.get(k, {})), lambda m: print(m, flush=True))

    def up(self) -> None:
        self.gws["b"].up()  # responder first
        self.gws["a"].up()

    def down(self) -> None:
        for g in self.gws.values():
            try:
                g.down()
            except Exception as exc:  # keep cleaning
                print(f"cleanup {g.cfg.name}: {exc}")
        self.lab.destroy()


@pytest.fixture(scope="module")
def lab_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    made: list[Running] = []

    def make(tag: str, backend: Backend, **extra: Any) -> Running:
        lab = Lab(tag, backend)
        lab.create()
        r = Running(lab, tmp_path_factory.mktemp(tag), **extra)
        made.append(r)
        r.up()
        return r

    yield make
    for r in made:
        r.down()

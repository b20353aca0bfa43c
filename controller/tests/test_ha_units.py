"""The `ha:` config section and what a backup's REST layer says (no etcd, no switch)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from supergw_controller.config import Config
from supergw_controller.errors import NotPrimary
from supergw_controller.ha.gate import LeaderGate, NotLeader
from supergw_controller.ha.view import HaView
from test_config import bad, base, cfgdir, load  # noqa: F401 - cfgdir is a fixture

ETCD = {"backend": "etcd", "etcd": {"endpoints": ["127.0.0.1:2379"]}}


def test_ha_defaults_and_needs_the_etcd_store(cfgdir: Path) -> None:
    c: Config = load(cfgdir, {**base(), "store": ETCD, "ha": {"replica": "r1"}})
    assert c.ha is not None and (c.ha.replica, c.ha.lease_ttl_s, c.ha.fence_margin_s) == ("r1", 2, 0.5)
    assert load(cfgdir, base()).ha is None, "no ha: section = one controller, as before"
    msg = bad(cfgdir, {**base(), "ha": {"replica": "r1"}})
    assert "ha: replicas need the shared etcd store: set store.backend: etcd" in msg, msg
    msg = bad(cfgdir, {**base(), "store": ETCD, "ha": {"replica": "r1", "lease_ttl_s": 1, "fence_margin_s": 1}})
    assert "fence_margin_s 1.0 must be below lease_ttl_s 1" in msg, msg
    assert "replica" in bad(cfgdir, {**base(), "store": ETCD, "ha": {"replica": "has space"}})
    assert "lease_ttl_s" in bad(cfgdir, {**base(), "store": ETCD, "ha": {"replica": "r", "lease_ttl_s": 0}})


class _Replica:
    name = "r2"

    def __init__(self, leading: bool) -> None:
        self._leading = leading

    @property
    def leading(self) -> bool:
        return self._leading

    def view(self) -> HaView:
        return HaView("r2", "backup", 7, "none", "r1", "http://10.0.0.9:18700", 0)


class _Core:
    def __getattr__(self, name: str) -> Any:
        async def call(*a: Any, **kw: Any) -> str:
            return name

        return call


def test_a_backup_refuses_admin_writes_naming_the_leader() -> None:
    gate = LeaderGate(_Core(), _Replica(leading=False))  # type: ignore[arg-type]
    with pytest.raises(NotLeader) as ei:
        asyncio.run(gate.drain("gw1"))
    assert isinstance(ei.value, NotPrimary)  # the REST layer's 503
    assert "replica r2 is a backup" in str(ei.value) and "r1 (http://10.0.0.9:18700)" in str(ei.value)
    assert asyncio.run(gate.rebalance(dry_run=True)) == "rebalance", "a dry run is a read"
    assert asyncio.run(gate.buckets()) == "buckets"
    leader = LeaderGate(_Core(), _Replica(leading=True))  # type: ignore[arg-type]
    assert asyncio.run(leader.move(3, "gw2")) == "move"

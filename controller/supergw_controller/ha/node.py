"""Wiring of a replica into the controller process (used by app.py when `ha:` is set)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from supergw_controller.config import Config
from supergw_controller.dispatcher import Dispatcher
from supergw_controller.ha.fence import LeaseFence
from supergw_controller.ha.fenced_store import FencedStore
from supergw_controller.ha.leadership import Leadership
from supergw_controller.ha.replica import Replica


class _CoreAdapter:
    """The two things the replica needs from the `Dispatcher`."""

    def __init__(self, d: Dispatcher, store: FencedStore | None) -> None:
        self._d = d
        self._store = store
        self.primary_ready: asyncio.Event = d.primary_ready

    async def reload_intent(self) -> None:
        # The previous leader may have changed weights, drains and pins since this
        # replica started: the store is the truth (applied like Dispatcher._load_intent).
        if self._store is None:
            return
        await self._store.open()  # a no-op when open; opens a store etcd refused at start
        intent = await self._store.load()
        # The core drops a store it could not open at start (single-controller behaviour);
        # a leader must write its intent and events to etcd, so it gets it back here.
        self._d._store = self._store  # noqa: SLF001
        known = set(self._d.registry.names())
        self._d.registry.apply_intent(
            {n: w for n, w in intent.weights.items() if n in known}, {n for n in intent.drained if n in known}
        )
        k = self._d.config.buckets
        self._d.pins = {b: g for b, g in intent.pins.items() if g in known and 0 <= b < k}

    def note(self, kind: str, reason: str, detail: str) -> None:
        self._d.events_ring.add(self._d._wall(), kind, reason, detail=detail)  # noqa: SLF001


def build_replica(config: Config, dispatcher: Dispatcher) -> Replica:
    """A `Replica` for `config.ha`; the dispatcher's store writes become fenced."""
    ha = config.ha
    etcd = config.store.etcd
    if ha is None or etcd is None:
        raise ValueError("build_replica needs config.ha and store.etcd (Config validates both)")
    fence = LeaseFence(float(ha.lease_ttl_s), ha.fence_margin_s)
    inner: Any = dispatcher._store  # noqa: SLF001 - the process owns the dispatcher's store
    store = FencedStore(inner, fence) if inner is not None else None
    if store is not None:
        dispatcher._store = store  # noqa: SLF001
    api = ha.api_url or f"{config.api.scheme}://{config.api.listen}"
    leadership = Leadership(etcd.endpoints, etcd.prefix, ha.replica, api, ha.lease_ttl_s, etcd.timeout_s)
    return Replica(
        replica=ha.replica,
        leadership=leadership,
        fence=fence,
        switch=dispatcher.session.switch,
        core=_CoreAdapter(dispatcher, store),
        store=inner if hasattr(inner, "set_fence") else None,
        keepalive_s=ha.lease_ttl_s / 4,
        poll_s=min(0.5, ha.lease_ttl_s / 4),
    )


class HaCollector(Collector):
    """Prometheus: leader (0/1), term, takeovers of this replica."""

    def __init__(self, replica: Replica) -> None:
        self._r = replica

    def collect(self) -> Iterator[Metric]:
        v = self._r.view()
        leader = GaugeMetricFamily("supergw_ha_leader", "1 while this replica is the etcd leader", labels=["replica"])
        leader.add_metric([v.replica], 1.0 if v.role == "leader" else 0.0)
        term = GaugeMetricFamily(
            "supergw_ha_term", "leadership term (the leader key's etcd create_revision) this replica knows", labels=["replica"]
        )
        term.add_metric([v.replica], float(v.term))
        takeovers = CounterMetricFamily(
            "supergw_ha_takeovers", "times this replica became leader", labels=["replica"]
        )
        takeovers.add_metric([v.replica], float(v.takeovers))
        yield from (leader, term, takeovers)

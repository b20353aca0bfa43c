"""A replica's Prometheus metrics (`supergw_ha_leader`, `supergw_ha_term`, `supergw_ha_takeovers_total`).

The replica itself is wired into the core by `compose.ReplicaCore`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from supergw_controller.ha.replica import Replica


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

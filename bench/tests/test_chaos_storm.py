"""bench/chaos's rebalance storm against a fake API: refusals are counted, never raised
(seed 4: the leader stepped down during a storm and rightly refused the rebalance)."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any, cast

from bench.chaos.faults import storm
from supergw_proto.rest import ApiError, ControllerClient


class FakeApi:
    def __init__(self, refuse_after: int) -> None:
        self.calls, self.refuse_after = 0, refuse_after
        self.moves: list[tuple[int, str]] = []

    def gateways(self) -> list[Any]:
        return [SimpleNamespace(name="g1", state="alive", drained=False), SimpleNamespace(name="g2", state="dead", drained=False),
                SimpleNamespace(name="g3", state="alive", drained=True)]

    def buckets(self) -> list[Any]:
        return [SimpleNamespace(bucket=b, pinned="g1" if b == 0 else None) for b in range(4)]

    def _refuse(self, path: str) -> None:
        self.calls += 1
        if self.calls > self.refuse_after:
            raise ApiError("POST", path, 503, "replica c3 is a backup")

    def move(self, bucket: int, gateway: str) -> None:
        self._refuse("/api/v1/buckets/move")
        self.moves.append((bucket, gateway))

    def rebalance(self) -> Any:
        self._refuse("/api/v1/rebalance")
        return SimpleNamespace(moves=[1, 2])


def test_storm_moves_unpinned_buckets_to_eligible_gateways() -> None:
    api = FakeApi(refuse_after=100)
    assert storm(cast(ControllerClient, api), random.Random(1), 10) == "10 moves, 0 refused, rebalance 2 moves"
    assert all(b != 0 and g == "g1" for b, g in api.moves)


def test_storm_counts_refusals_when_the_leader_steps_down() -> None:
    api = FakeApi(refuse_after=3)
    assert storm(cast(ControllerClient, api), random.Random(1), 5) == "3 moves, 2 refused, rebalance refused (503)"

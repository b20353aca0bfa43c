"""Liveness on its own: what it hands to `react`, and when (a recorder stands in for placement)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from supergw_controller.gateways import GatewayRegistry, Transition
from supergw_controller.liveness import Liveness, heartbeat_keys
from supergw_proto.beats import FLAG_CHARON_DOWN, encode
from supergw_proto.reports import Heartbeat

from corekit import Clock, make_config


class Reactions:
    def __init__(self) -> None:
        self.calls: list[list[tuple[str, bool, str]]] = []

    async def __call__(self, transitions: Sequence[Transition]) -> None:
        self.calls.append([(t.gateway, t.died, t.why) for t in transitions])


@pytest.fixture
def live(tmp_path: Path) -> tuple[Liveness, Reactions, Clock]:
    clock = Clock(0.0)
    cfg = make_config(tmp_path, timing={"startup_grace_s": 0.5})
    react = Reactions()
    return Liveness(cfg, GatewayRegistry(cfg, clock(), 0.5), react, clock=clock), react, clock


async def test_every_tick_reacts_even_without_transitions(live: tuple[Liveness, Reactions, Clock]) -> None:
    lv, react, clock = live
    await lv.tick()
    await lv.tick()
    assert react.calls == [[], []]  # placement retries a pending failover on each
    clock.t = 0.6  # past the grace: g1 and g2 never posted
    await lv.tick()
    assert react.calls[-1] == [("g1", True, "no heartbeat for 0.3s"), ("g2", True, "no heartbeat for 0.3s")]


async def test_rest_posts_count_and_react_only_on_a_transition(live: tuple[Liveness, Reactions, Clock]) -> None:
    lv, react, clock = live
    await lv.accept_heartbeat(Heartbeat(gateway="g1", timestamp=1.0))
    assert react.calls == [] and lv.heartbeats_total == 1
    await lv.accept_heartbeat(Heartbeat(gateway="g1", timestamp=1.0, charon_down=True))
    assert react.calls == [[("g1", True, "agent reports charon stopped")]]
    await lv.port_changed(12, False)
    assert react.calls[-1] == [("g2", True, "port down")]
    await lv.port_changed(1, False)  # a host port: no gateway, still a (empty) reaction
    assert react.calls[-1] == []


async def test_arrivals_keep_a_slow_post_from_counting_as_silence(live: tuple[Liveness, Reactions, Clock]) -> None:
    lv, react, clock = live
    await lv.accept_heartbeat(Heartbeat(gateway="g1", timestamp=1.0))
    await lv.accept_heartbeat(Heartbeat(gateway="g2", timestamp=1.0))
    arrived = lv.agent_arriving("g1")
    assert arrived == 0.0 and lv.agent_arriving("nope") is None
    clock.t = 0.7
    await lv.tick()
    assert react.calls[-1] == [("g2", True, "no heartbeat for 0.3s")]  # g1's POST is being handled
    lv.agent_settled("g1", arrived)


async def test_a_datagram_acts_when_the_socket_is_readable(live: tuple[Liveness, Reactions, Clock], tmp_path: Path) -> None:
    lv, react, clock = live
    sock = lv.receiver.open("127.0.0.1", 0)
    try:
        keys = heartbeat_keys(make_config(tmp_path))
        assert set(keys) == {"g1", "g2"}  # g3 sends no heartbeats
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.sendto(encode("g1", keys["g1"], 1, 1, time.time_ns(), FLAG_CHARON_DOWN), sock.getsockname())
        for _ in range(200):
            lv.readable()
            if lv.heartbeats_total:
                break
            await asyncio.sleep(0.005)
        await lv.settle()
        assert react.calls == [[("g1", True, "agent reports charon stopped")]]
    finally:
        lv.receiver.close()

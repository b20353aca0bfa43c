"""Liveness on its own: what it hands to `react`, and when (a recorder stands in for placement)."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from supergw_controller.gateways import GatewayRegistry, Transition
from supergw_controller.heartbeat_keys import heartbeat_keys
from supergw_controller.liveness import Liveness
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


async def test_a_beat_declaring_a_longer_interval_is_judged_by_it_and_named(
    live: tuple[Liveness, Reactions, Clock], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lv, react, clock = live
    keys = heartbeat_keys(make_config(tmp_path))
    sock = lv.receiver.open("127.0.0.1", 0)
    seq = [0]

    async def beat(name: str, interval_ms: int | None) -> None:
        seq[0] += 1
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.sendto(encode(name, keys[name], 1, seq[0], time.time_ns(), interval_ms=interval_ms), sock.getsockname())
        before = lv.heartbeats_total
        for _ in range(200):
            lv.readable()
            if lv.heartbeats_total > before:
                await lv.settle()
                return
            await asyncio.sleep(0.005)
        raise AssertionError("the datagram never arrived")

    try:
        with caplog.at_level(logging.INFO, logger="supergw_controller.liveness"):
            await beat("g1", 1000)  # an agent on 1 s heartbeats (not told our 100 ms yet)
            await beat("g2", 100)
            await beat("g1", 1000)
            clock.t = 2.0  # 2 s: far past our 0.3 s, within its 3 x 1 s
            await lv.tick()
            assert react.calls[-1] == [("g2", True, "no heartbeat for 0.3s")]
            assert not lv.registry.get("g1").dead
            assert caplog.text.count("gateway g1: its agent sends heartbeats every 1000 ms, but this controller's "
                                     "timing.heartbeat_interval_ms is 100 ms") == 1
            clock.t = 3.1
            await lv.tick()
            assert react.calls[-1] == [("g1", True, "no heartbeat for 3s")]
            await beat("g1", 100)  # told: now on our timing, and judged by it again
            assert "gateway g1: its agent now sends heartbeats every 100 ms" in caplog.text
            clock.t = 3.5
            await lv.tick()
            assert react.calls[-1] == [("g1", True, "no heartbeat for 0.3s")]
            await beat("g1", 1000)
            await beat("g1", None)  # an older agent (version 1): our interval again
            clock.t = 3.85
            await lv.tick()
            assert react.calls[-1] == [("g1", True, "no heartbeat for 0.3s")]
    finally:
        lv.receiver.close()

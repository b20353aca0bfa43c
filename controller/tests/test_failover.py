"""Heartbeat watchdog: a stalled event loop never causes a false failover (fake clock).

The scenario behind the spurious failovers: the loop stalls (a big synchronous write, a
busy machine), heartbeats pile up unread, and when the loop resumes the watchdog's timer
runs before the queued heartbeat handlers. Here the fake `sleep` always delivers queued
heartbeats only AFTER the watchdog has looked, the worst order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from supergw_controller.compose import ControllerCore
from supergw_controller.failover import watchdog
from supergw_proto.reports import Heartbeat
from supergw_controller.rebalancer import MoveReason

from corekit import RecordingSession, make_config, running_core


class Done(Exception):
    pass


class FakeLoop:
    """A clock and a sleep: each sleep lasts what was asked plus a scripted stall."""

    def __init__(self, stalls: list[float], before_sleep: Callable[[], Awaitable[None]] | None = None) -> None:
        self.t = 1000.0
        self.stalls = stalls
        self.before_sleep = before_sleep

    def clock(self) -> float:
        return self.t

    async def sleep(self, d: float) -> None:
        if self.before_sleep is not None:
            await self.before_sleep()
        if not self.stalls:
            raise Done
        self.t += d + self.stalls.pop(0)


async def test_late_tick_gives_no_verdict_and_the_next_on_time_tick_does() -> None:
    loop = FakeLoop([0, 0, 0.3, 0, 0])
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(round(loop.t - 1000.0, 6))

    with pytest.raises(Done):
        await watchdog(0.02, tick, stall_s=0.05, clock=loop.clock, sleep=loop.sleep)
    # 0.36 was 0.30 late: skipped; the schedule restarts from there.
    assert ticks == [0.02, 0.04, 0.38, 0.4]


async def test_a_long_tick_counts_as_a_stall() -> None:
    loop = FakeLoop([0, 0, 0, 0])
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(round(loop.t - 1000.0, 6))
        if len(ticks) == 1:
            loop.t += 0.2  # e.g. the failover write blocked the loop

    with pytest.raises(Done):
        await watchdog(0.02, tick, stall_s=0.05, clock=loop.clock, sleep=loop.sleep)
    assert ticks == [0.02, 0.24, 0.26]


async def test_small_lateness_is_not_a_stall() -> None:
    loop = FakeLoop([0.01] * 5)
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(loop.t)

    with pytest.raises(Done):
        await watchdog(0.02, tick, stall_s=0.05, clock=loop.clock, sleep=loop.sleep)
    assert len(ticks) == 5


class Agents:
    """Gateways posting a heartbeat every 100 ms; posts reach the core only when the loop
    runs other tasks, i.e. at the next sleep, after the watchdog had its turn."""

    def __init__(self, core: ControllerCore, loop: FakeLoop, names: list[str]) -> None:
        self.core, self.loop, self.alive = core, loop, set(names)
        self.next_send = {n: loop.t for n in names}

    async def deliver(self) -> None:
        for name in sorted(self.alive):
            while self.next_send[name] <= self.loop.t:
                await self.core.accept_heartbeat(Heartbeat(gateway=name, timestamp=0.0))
                self.next_send[name] += 0.1

    def silence(self, now: float) -> float:
        return max(now - (self.core.registry.get(n).last_heartbeat or 0.0) for n in self.alive)


async def composed(tmp_path: Path, loop: FakeLoop) -> tuple[ControllerCore, RecordingSession]:
    cfg = make_config(tmp_path, timing={"startup_grace_s": 0.5})  # dead after 3 x 100 ms
    return await running_core(cfg, loop.clock, store=tmp_path / "state.sqlite3")


async def run_watchdog(c: ControllerCore, loop: FakeLoop) -> None:
    hb = c.config.timing.heartbeat_interval_ms / 1000.0
    with pytest.raises(Done):
        await watchdog(hb / 5, c.liveness.tick, stall_s=hb / 2, clock=loop.clock, sleep=loop.sleep)


@pytest.mark.parametrize("stall", [0.35, 0.5, 2.0])
async def test_stalled_loop_causes_no_failover(tmp_path: Path, stall: float) -> None:
    # 1 s of normal ticks, one stall, 1 s of normal ticks.
    loop = FakeLoop([0.0] * 50 + [stall] + [0.0] * 50)
    d, sess = await composed(tmp_path, loop)
    agents = Agents(d, loop, ["g1", "g2"])
    silences: list[float] = []

    async def before_sleep() -> None:
        silences.append(agents.silence(loop.t))
        await agents.deliver()

    loop.before_sleep = before_sleep
    await agents.deliver()
    await run_watchdog(d, loop)
    # The stall did leave the gateways silent for longer than dead_after when the
    # watchdog woke up (judging then would have declared both dead) ...
    assert max(silences) > d.config.timing.dead_after_s
    # ... yet nobody died and nothing was written.
    assert not any(g.dead for g in d.registry.all())
    assert sess.batches == []
    assert [e.reason for e in d.eventlog.ring.recent(100, 0) if e.kind == "gateway"] == []


async def test_a_real_death_is_still_detected_promptly(tmp_path: Path) -> None:
    loop = FakeLoop([0.0] * 100)
    d, sess = await composed(tmp_path, loop)
    agents = Agents(d, loop, ["g1", "g2"])
    killed_at: list[float] = []
    dead_at: list[float] = []

    async def before_sleep() -> None:
        if not killed_at and loop.t >= 1000.5:
            agents.alive.discard("g1")
            killed_at.append(loop.t)
        if not dead_at and d.registry.get("g1").dead:
            dead_at.append(loop.t)
        await agents.deliver()

    loop.before_sleep = before_sleep
    await agents.deliver()
    await run_watchdog(d, loop)
    assert dead_at, "g1 never declared dead"
    # Its last heartbeat was at most 0.1 s before the kill; dead 0.3 s after that,
    # judged within one tick (20 ms).
    assert dead_at[0] - killed_at[0] <= 0.3 + 0.02 + 1e-9
    assert not d.registry.get("g2").dead
    moved = [u for batch in sess.batches for u in batch]
    assert len(moved) == sum(1 for b in range(16) if b % 3 == 0)
    assert d.eventlog.moves_total[MoveReason.FAILOVER.value] == len(moved)


# -- the failover write


async def test_failover_writes_hot_buckets_first(tmp_path: Path) -> None:
    loop = FakeLoop([])
    d, sess = await composed(tmp_path, loop)
    hot = {0, 9}  # g1's buckets that carry traffic
    d.stats.update(1.0, {b: (0, 0) for b in range(16)})
    d.stats.update(2.0, {b: ((100, 6000) if b in hot else (0, 0)) for b in range(16)})
    loop.t += 1.0  # g1 and g2 never posted: both out of grace, both dead
    await d.liveness.tick()
    first, *rest = sess.batches
    assert {u.entity.bucket for u in first} == hot
    assert len(rest) == 1
    assert d.registry.get("g1").dead and d.registry.get("g2").dead
    assert set(d.placement.assignment.values()) == {"g3"}
    assert d.eventlog.failovers_total == 1


# -- arrivals: a POST on its way through the API proves life


def test_a_post_in_flight_is_not_silence(tmp_path: Path) -> None:
    from supergw_controller.gateways import GatewayRegistry

    reg = GatewayRegistry(make_config(tmp_path), now=0.0, startup_grace_s=0.0)
    reg.heartbeat("g1", 1.0)
    reg.heartbeat("g2", 1.0)
    assert reg.arriving("g1")
    assert not reg.arriving("nope")
    # 0.5 s after g1's last handled heartbeat, but its next POST is still being handled
    # (its agent waits for our answer): only g2 is silent.
    assert [t.gateway for t in reg.tick(1.5)] == ["g2"]
    reg.heartbeat("g1", 1.6)  # the handler finally runs ...
    reg.settled("g1", 1.2, 1.7)  # ... and the answer goes out at 1.7
    assert reg.get("g1").inflight == 0
    assert reg.get("g1").last_heartbeat == 1.7
    assert reg.tick(1.95) == []
    assert [t.gateway for t in reg.tick(2.05)] == ["g1"]


def test_a_failed_post_proves_nothing(tmp_path: Path) -> None:
    from supergw_controller.gateways import GatewayRegistry

    reg = GatewayRegistry(make_config(tmp_path), now=0.0, startup_grace_s=0.0)
    reg.heartbeat("g1", 1.0)
    reg.arriving("g1")
    reg.settled("g1", 1.1, 1.2)  # e.g. 422: no heartbeat handled since it arrived
    assert reg.get("g1").last_heartbeat == 1.0
    assert "g1" in [t.gateway for t in reg.tick(1.35)]


def test_a_post_in_flight_never_revives_a_dead_gateway_by_itself(tmp_path: Path) -> None:
    from supergw_controller.gateways import GatewayRegistry

    reg = GatewayRegistry(make_config(tmp_path), now=0.0, startup_grace_s=0.0)
    reg.heartbeat("g1", 1.0)
    assert [t.gateway for t in reg.tick(1.5) if t.died] == ["g1", "g2"]
    reg.arriving("g1")
    assert reg.tick(1.61) == []
    assert reg.get("g1").dead
    t = reg.heartbeat("g1", 1.7)
    reg.settled("g1", 1.6, 1.7)
    assert t is not None and not t.died and reg.get("g1").recovering


class ArrivalRecorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def agent_arriving(self, name: str) -> float | None:
        self.calls.append(("arriving", name))
        return None if name == "unknown" else 7.0

    def agent_settled(self, name: str, arrived: float) -> None:
        assert arrived == 7.0
        self.calls.append(("settled", name))


@pytest.mark.parametrize(
    ("method", "path", "auth", "expect"),
    [
        ("POST", "/api/v1/gateways/g1/heartbeat", b"Bearer agent-g1-token-0123456789", ["arriving g1", "settled g1"]),
        ("POST", "/api/v1/gateways/g2/report", b"bearer agent-g2-token-0123456789", ["arriving g2", "settled g2"]),
        ("POST", "/api/v1/gateways/unknown/heartbeat", b"Bearer agent-unknown-token-0123456789", ["arriving unknown"]),
        # Only a gateway's own agent proves it alive: not another gateway's agent, not an operator.
        ("POST", "/api/v1/gateways/g2/heartbeat", b"Bearer agent-g1-token-0123456789", []),
        ("POST", "/api/v1/gateways/g1/heartbeat", b"Bearer operator-token-0123456789", []),
        ("POST", "/api/v1/gateways/g1/heartbeat", b"Bearer wrong", []),
        ("POST", "/api/v1/gateways/g1/heartbeat", b"Basic agent-g1-token-0123456789", []),
        ("POST", "/api/v1/gateways/g1/heartbeat", None, []),
        ("GET", "/api/v1/gateways/g1/heartbeat", b"Bearer agent-g1-token-0123456789", []),
        ("POST", "/api/v1/gateways/g1/drain", b"Bearer agent-g1-token-0123456789", []),
    ],
)
async def test_agent_arrivals_middleware(method: str, path: str, auth: bytes | None, expect: list[str]) -> None:
    from typing import Any

    from supergw_controller.app import AgentArrivals

    rec = ArrivalRecorder()
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        raise RuntimeError("handler failed")

    from supergw_controller.api.auth import Authenticator, Principal
    from supergw_controller.config import Role

    authenticator = Authenticator(
        [("operator-token-0123456789", Principal("ops", role=Role.ADMIN))]
        + [(f"agent-{g}-token-0123456789", Principal(g, gateway=g)) for g in ("g1", "g2", "unknown")]
    )
    mw = AgentArrivals(app, rec, authenticator, "/api/v1")  # type: ignore[arg-type]
    headers = [] if auth is None else [(b"authorization", auth)]
    with pytest.raises(RuntimeError):
        await mw({"type": "http", "method": method, "path": path, "headers": headers}, None, None)
    assert seen == [path]  # always passed on
    assert [f"{a} {n}" for a, n in rec.calls] == expect  # settled even when the handler raised

"""Gateway liveness: heartbeats (UDP and REST), reports and port state become transitions.

`Liveness` feeds `gateways.GatewayRegistry` (the pure state and its rules) and hands
every transition (a gateway died or came back) to `react`, which placement answers with
its failover. The watchdog ticks every fifth of a heartbeat interval (a tick late by more
than half an interval means the event loop stalled and gives no verdict: `failover.watchdog`)
and drains the UDP heartbeat socket before every verdict, so a beat that reached this host
is never missed however late the loop runs. `react` runs on every tick, with or without
transitions, so that a failover whose write failed is retried at the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from supergw_controller.config import Config
from supergw_controller.failover import PortMonitor, watchdog
from supergw_controller.gateways import GatewayRegistry, Transition
from supergw_controller.heartbeat import HeartbeatReceiver
from supergw_controller.heartbeat_keys import HeartbeatKeys
from supergw_proto.reports import GatewayReport, Heartbeat

log = logging.getLogger(__name__)

React = Callable[[Sequence[Transition]], Coroutine[Any, Any, None]]


def heartbeat_receiver(config: Config, clock: Callable[[], float] = time.monotonic) -> HeartbeatReceiver:
    """The receiver of `config`'s gateways: their keys (re-read on rotation), the sources
    they may beat from, the flood limits."""
    return HeartbeatReceiver(
        HeartbeatKeys.from_config(config, clock),
        sources={g.name: g.heartbeat_from for g in config.gateways},
        limits=config.heartbeats,
    )


class Liveness:
    def __init__(
        self,
        config: Config,
        registry: GatewayRegistry,
        react: React,
        *,
        clock: Callable[[], float] = time.monotonic,
        receiver: HeartbeatReceiver | None = None,
    ) -> None:
        self._config = config
        self.registry = registry
        self._react = react
        self._clock = clock
        self.receiver = receiver if receiver is not None else heartbeat_receiver(config)
        self.reports_total = 0
        self.heartbeats_total = 0  # REST and UDP
        self.silence_verdicts_deferred = 0
        self._flooded_since: float | None = None  # see tick()
        self._off_timing: dict[str, int] = {}  # gateway -> the slower interval its beats declare
        self._reactions: set[asyncio.Task[None]] = set()

    async def run(self, *, udp: bool = True) -> None:
        """The watchdog, the UDP heartbeat socket (on the API's address and port number
        unless `udp` is false) and the port monitor, until cancelled."""
        cfg = self._config
        hb_s = cfg.timing.heartbeat_interval_ms / 1000.0
        loop = asyncio.get_running_loop()
        if udp:
            sock = self.receiver.open(cfg.api.host, cfg.api.port)
            loop.add_reader(sock.fileno(), self.readable)
            log.info("UDP heartbeats on %s:%d", cfg.api.host, cfg.api.port)
        tasks = [asyncio.create_task(watchdog(hb_s / 5, self.tick, stall_s=hb_s / 2), name="watchdog")]
        interfaces = {p: pcfg.interface for p, pcfg in cfg.ports.items() if pcfg.interface}
        if cfg.port_monitor.enabled and interfaces:
            monitor = PortMonitor(interfaces, cfg.port_monitor.netns, self.port_changed)
            tasks.append(asyncio.create_task(self._port_monitor(monitor), name="port-monitor"))
        try:
            await asyncio.gather(*tasks)
        finally:
            if self.receiver.sock is not None:
                loop.remove_reader(self.receiver.sock.fileno())
                self.receiver.close()
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def _port_monitor(self, monitor: PortMonitor) -> None:
        try:
            await monitor.run()
        except OSError as exc:
            # Not on the switch host, or no such namespace: heartbeats still detect death.
            log.error("port monitor unavailable (%s); failover relies on heartbeats only", exc)

    # -- what agents send (REST)
    async def accept_report(self, report: GatewayReport) -> None:
        self.reports_total += 1
        t = self.registry.report(report, self._clock())
        if t is not None:  # else answer at once: a pending failover is the watchdog's
            await self._react([t])

    async def accept_heartbeat(self, hb: Heartbeat) -> None:
        self.heartbeats_total += 1
        t = self.registry.heartbeat(hb.gateway, self._clock(), charon_down=hb.charon_down, partner_down=hb.partner_down)
        if t is not None:  # else answer at once: a pending failover is the watchdog's
            await self._react([t])

    def agent_arriving(self, gateway: str) -> float | None:
        """An authenticated heartbeat/report POST for `gateway` arrived (see app.AgentArrivals):
        its arrival time, or None for an unknown gateway."""
        now = self._clock()
        return now if self.registry.arriving(gateway) else None

    def agent_settled(self, gateway: str, arrived: float) -> None:
        """The POST announced by `agent_arriving` has been answered."""
        self.registry.settled(gateway, arrived, self._clock())

    # -- the switch host's view
    async def port_changed(self, port: int, up: bool) -> None:
        t = self.registry.set_port_state(port, up, self._clock())
        await self._react([t] if t else [])

    def restart_grace(self) -> None:
        """This instance just became primary (see `GatewayRegistry.restart_grace`)."""
        self.registry.restart_grace(self._clock())

    # -- UDP heartbeats and the watchdog
    async def tick(self) -> None:
        """One watchdog verdict: every beat that reached this host is counted before anyone is judged silent."""
        transitions = self._take_heartbeats()
        now = self._clock()
        dead_after = self._config.timing.dead_after_s
        if self.receiver.backlog:
            # A flood of datagrams is still queued (the drain stops at its limit so the loop
            # keeps turning): a good beat may wait behind them, so silence is not judged
            # now -- for at most one dead-after, after which a flood cannot keep a silent
            # gateway alive. Flags (charon or partner down) still count at once.
            if self._flooded_since is None:
                self._flooded_since = now
                log.warning("heartbeat socket flooded (%s rejected so far): silence verdicts deferred up to %.3gs",
                            dict(self.receiver.rejected), dead_after)
            if now - self._flooded_since < dead_after:
                self.silence_verdicts_deferred += 1
                await self._react(transitions)
                return
        else:
            self._flooded_since = None
        await self._react(transitions + self.registry.tick(now))

    def readable(self) -> None:
        """The heartbeat socket is readable: a revival or a flag acts now, not at the next tick."""
        transitions = self._take_heartbeats()
        if transitions:
            task = asyncio.get_running_loop().create_task(self._react(transitions))
            self._reactions.add(task)
            task.add_done_callback(self._reactions.discard)

    async def settle(self) -> None:
        """Wait for the reactions `readable` started."""
        if self._reactions:
            await asyncio.gather(*self._reactions)

    def _take_heartbeats(self) -> list[Transition]:
        beats = self.receiver.drain()
        if not beats:
            return []
        now = self._clock()
        out: list[Transition] = []
        for b in beats:
            self.heartbeats_total += 1
            if b.interval_ms is not None:
                self._check_timing(b.gateway, b.interval_ms)
            t = self.registry.heartbeat(
                b.gateway,
                now,
                charon_down=b.charon_down,
                partner_down=b.partner_down,
                interval_s=0.0 if b.interval_ms is None else b.interval_ms / 1000.0,
            )
            if t is not None:
                out.append(t)
        return out

    def _check_timing(self, gateway: str, interval_ms: int) -> None:
        """Say, once per change, when a gateway's beats come slower than we expect: it is
        judged by its own interval meanwhile (no spurious failover), but it should have
        adopted ours from the answer to its reports."""
        t = self._config.timing
        if interval_ms <= t.heartbeat_interval_ms:
            if self._off_timing.pop(gateway, None) is not None:
                log.warning("gateway %s: its agent now sends heartbeats every %d ms (this controller's "
                            "timing.heartbeat_interval_ms is %d ms)", gateway, interval_ms, t.heartbeat_interval_ms)
            return
        if self._off_timing.get(gateway) == interval_ms:
            return
        self._off_timing[gateway] = interval_ms
        log.error(
            "gateway %s: its agent sends heartbeats every %d ms, but this controller's timing.heartbeat_interval_ms is "
            "%d ms: judged dead only after %d x %d ms until it adopts ours (agents adopt the timing from the answer "
            "to their reports; an agent that keeps sending %d ms does not get it: check that its reports reach this "
            "controller, or upgrade it)",
            gateway, interval_ms, t.heartbeat_interval_ms, t.missed_heartbeats, interval_ms, interval_ms,
        )  # fmt: skip

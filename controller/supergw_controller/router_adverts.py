"""Router Advertisements by packet-out: when each host port gets one (RFC 4861 §6.2.4, §6.2.6).

`RaSchedule` is the pure clock: unsolicited RAs to every host port at a random interval in
[min_interval, max_interval] (the first `MAX_INITIAL_RTR_ADVERTISEMENTS` at most
`MAX_INITIAL_RTR_ADVERT_INTERVAL` apart, so hosts that missed the first one are not kept
waiting minutes), and an answer to a Router Solicitation after a random delay of at most
`MAX_RA_DELAY_TIME`, at most one multicast RA per port every `MIN_DELAY_BETWEEN_RAS`.
`RouterAdvertiser` runs it on the primary and sends the frames through the southbound.

The switch sends a packet-out only out of the port it names, so the unit of the RFC's
"interface" here is the host port: each port is its own rate limit, and a solicited RA
goes out of the solicitor's port only (to all-nodes, the RFC's usual case).

No final RA with router lifetime 0 is sent when the controller stops: the gateways keep
forwarding without the controller, a restarted or replacing controller (HA takeover)
goes on advertising, and a final RA would make every host drop its default route.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from supergw_controller.config import Config, PortRoleName, RouterAdvertConfig
from supergw_controller.errors import SwitchUnavailable
from supergw_controller.ndp import PrefixInfo, RouterAdvert, RouterSolicitation, router_advert_frame

log = logging.getLogger(__name__)

# RFC 4861 §10, router constants
MAX_INITIAL_RTR_ADVERT_INTERVAL = 16.0
MAX_INITIAL_RTR_ADVERTISEMENTS = 3
MIN_DELAY_BETWEEN_RAS = 3.0
MAX_RA_DELAY_TIME = 0.5


@dataclass(frozen=True)
class RaTiming:
    min_interval_s: float
    max_interval_s: float

    def __post_init__(self) -> None:
        if not 0 < self.min_interval_s <= self.max_interval_s:
            raise ValueError(f"need 0 < min_interval_s {self.min_interval_s} <= max_interval_s {self.max_interval_s}")


class RaSchedule:
    """Which host ports are due an RA, and when the next one is due (pure; times are the
    caller's monotonic clock)."""

    def __init__(self, ports: Sequence[int], timing: RaTiming, rng: random.Random, now: float) -> None:
        self._ports = sorted(set(ports))
        self._timing = timing
        self._rng = rng
        self._initial_left = MAX_INITIAL_RTR_ADVERTISEMENTS
        self._next_periodic = now  # the first RA goes out at once
        self._solicited: dict[int, float] = {}  # port -> when its answer is due
        self._last: dict[int, float] = {}  # port -> when it last got a multicast RA

    @property
    def ports(self) -> list[int]:
        return list(self._ports)

    def next_due(self) -> float:
        return min([self._next_periodic, *self._solicited.values()])

    def solicited(self, port: int, now: float) -> bool:
        """A valid RS arrived on `port`: schedule its answer (False: not a host port, or an
        answer is already due there, which answers this one too)."""
        if port not in self._ports or port in self._solicited:
            return False
        at = now + self._rng.uniform(0.0, MAX_RA_DELAY_TIME)
        last = self._last.get(port)
        if last is not None:
            at = max(at, last + MIN_DELAY_BETWEEN_RAS)
        # A periodic RA due sooner answers it (§6.2.6).
        if self._next_periodic <= at:
            return False
        self._solicited[port] = at
        return True

    def due(self, now: float) -> list[int]:
        """The ports to send an RA to now; they count as sent."""
        if now >= self._next_periodic:
            ports = list(self._ports)
            self._solicited.clear()
            interval = self._rng.uniform(self._timing.min_interval_s, self._timing.max_interval_s)
            if self._initial_left > 0:
                self._initial_left -= 1
                interval = min(interval, MAX_INITIAL_RTR_ADVERT_INTERVAL)
            self._next_periodic = now + interval
        else:
            ports = sorted(p for p, at in self._solicited.items() if at <= now)
            for p in ports:
                del self._solicited[p]
        for p in ports:
            self._last[p] = now
        return ports


class RaSwitch(Protocol):
    """What the advertiser asks of the southbound."""

    async def send_packet(self, frame: bytes, port: int) -> None: ...


class RouterAdvertiser:
    """Sends the configured RA out of every host port on `RaSchedule`'s clock, and answers
    Router Solicitations; `run()` on the primary only (the southbound cancels it on a role
    change)."""

    def __init__(
        self,
        advert: RouterAdvert,
        source: ipaddress.IPv6Address,
        eth_src: str,
        ports: Sequence[int],
        timing: RaTiming,
        switch: RaSwitch,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self._frame = router_advert_frame(advert, source, eth_src)
        self._ports = list(ports)
        self._timing = timing
        self._switch = switch
        self._clock = clock
        self._rng = rng or random.Random()
        self._schedule: RaSchedule | None = None
        self._wake = asyncio.Event()
        self.sent_total = 0
        self.solicitations_total = 0
        self.send_failures_total = 0

    @property
    def frame(self) -> bytes:
        return self._frame

    def solicited(self, rs: RouterSolicitation, port: int) -> None:
        """A valid RS from host port `port` (ignored while not running: not primary)."""
        self.solicitations_total += 1
        if self._schedule is None:
            return
        if self._schedule.solicited(port, self._clock()):
            log.debug("router solicitation from %s (%s) on port %d: answer scheduled", rs.src, rs.eth_src, port)
            self._wake.set()

    async def run(self) -> None:
        schedule = RaSchedule(self._ports, self._timing, self._rng, self._clock())
        self._schedule = schedule
        log.info("sending router advertisements to host ports %s every %.0f-%.0f s",
                 schedule.ports, self._timing.min_interval_s, self._timing.max_interval_s)
        try:
            while True:
                await self.send_due(schedule)
                self._wake.clear()
                wait = max(0.0, schedule.next_due() - self._clock())
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
                except TimeoutError:
                    pass
        finally:
            self._schedule = None

    async def send_due(self, schedule: RaSchedule) -> None:
        for port in schedule.due(self._clock()):
            try:
                await self._switch.send_packet(self._frame, port)
                self.sent_total += 1
            except SwitchUnavailable as exc:
                # The next periodic RA retries; hosts hold the route for router_lifetime.
                self.send_failures_total += 1
                log.warning("router advertisement to port %d not sent: %s", port, exc)


def router_advert(cfg: RouterAdvertConfig) -> RouterAdvert:
    """The RA `cfg` describes."""
    return RouterAdvert(
        router_lifetime_s=cfg.router_lifetime,
        prefixes=tuple(
            PrefixInfo(p.prefix, p.on_link, p.autonomous, p.valid_lifetime_s, p.preferred_lifetime_s)
            for p in cfg.prefixes
        ),
        cur_hop_limit=cfg.cur_hop_limit,
        managed=cfg.managed,
        other_config=cfg.other_config,
        reachable_time_ms=cfg.reachable_time_ms,
        retrans_timer_ms=cfg.retrans_timer_ms,
        mtu=cfg.mtu,
    )


def build_advertiser(
    config: Config, switch: RaSwitch, *, clock: Callable[[], float] = time.monotonic
) -> RouterAdvertiser | None:
    """The advertiser `config.router_advertisements` asks for (None: no RAs), from
    `gateway_ip6.link_local`. The frames' Ethernet source is `vmac_base` (bucket 0's vmac): a
    MAC of the switch's own block that no gateway or host holds; hosts take nothing from it
    (no SLLA option)."""
    ra, ip6 = config.router_advertisements, config.gateway_ip6
    if ra is None or ip6 is None or not ra.enabled:
        return None
    return RouterAdvertiser(
        router_advert(ra),
        ip6.link_local,
        config.vmac_base,
        config.ports_with_role(PortRoleName.HOST),
        RaTiming(ra.min_interval, ra.max_interval_s),
        switch,
        clock=clock,
    )

"""Registry of the gateways: config, operator intent, liveness and their last reports.

Pure state with an injected clock (`now`, monotonic seconds): `liveness.Liveness` feeds it
heartbeats, reports, port events and watchdog ticks, and acts on the transitions it
returns. A gateway is *dead* when its heartbeats stopped (more than
`missed_heartbeats x heartbeat_interval`), its port is down, its agent reports its charon
stopped, its last report shows no installed CHILD SA (its tunnel to the partner is
down: traffic sent to it would be lost), or its agent says its partner gateway at the
partner site is down (the pair beacons through the tunnel stopped, or the partner cannot
carry traffic: the partner's own site fails the partner over, and traffic sent here would
reach a gateway nobody uses); a dead gateway that comes back is *recovering* until the
rebalancer has refilled it, or *withheld* while another gateway still holds the remote-access
SAs it took over from it (`withheld` says why; `takeover.py` sets and clears it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from supergw_controller.config import Config
from supergw_controller.errors import InvalidArgument, UnknownGateway
from supergw_controller.rebalancer import GatewayInput, GatewayState
from supergw_proto.reports import GatewayReport, tunnel_up


@dataclass
class GatewayRecord:
    name: str
    port: int
    mac: str
    weight: float
    heartbeat_required: bool
    drained: bool = False
    # False: the gateway serves remote-access clients only; its site-to-site tunnel is no verdict
    site_to_site: bool = True
    dead: bool = False
    recovering: bool = False
    port_up: bool | None = None  # None: nobody watches the port
    charon_down: bool = False  # its agent's last heartbeat said charon is stopped or gone
    tunnel_up: bool | None = None  # from the last report's SAs; None: not known yet
    partner_down: bool = False  # its agent's last heartbeat said its partner gateway is down
    last_heartbeat: float | None = None
    last_report: GatewayReport | None = None
    last_report_at: float | None = None
    # Before the first heartbeat a gateway counts as alive until this deadline, so that a
    # restarted controller does not fail over gateways whose agents have not posted yet.
    grace_start: float = 0.0
    grace_until: float = 0.0
    load: float = 0.0
    reported_cpu: float | None = field(default=None)
    # Authenticated heartbeat/report POSTs that arrived (ASGI layer) and have not been
    # answered yet. Their agent is alive and waits for our answer before it posts again,
    # so however slowly we handle them, that time is not the gateway's silence.
    inflight: int = 0
    # How long silence may last before it is death: the controller's dead-after, or the
    # agent's own interval x the miss count when its beats declare a longer one (an agent
    # not told our timing yet, or a mis-set one, is late by its own clock, not dead).
    dead_after: float = 0.0
    # Why it may not serve although alive: its remote-access SAs were taken over (None: it may).
    withheld: str | None = None

    @property
    def state(self) -> GatewayState:
        if self.dead:
            return GatewayState.DEAD
        if self.drained:
            return GatewayState.DRAINED
        if self.withheld is not None:
            return GatewayState.WITHHELD
        if self.recovering:
            return GatewayState.RECOVERING
        return GatewayState.ALIVE

    def heartbeat_ok(self, now: float) -> bool:
        if not self.heartbeat_required:
            return True
        if self.inflight and not self.dead:
            return True  # only a handled heartbeat revives a dead gateway
        if self.last_heartbeat is None or self.last_heartbeat < self.grace_start:
            # The grace period keeps a live gateway alive; it never revives a dead one.
            return not self.dead and now <= self.grace_until
        return now - self.last_heartbeat <= self.dead_after

    def alive(self, now: float) -> bool:
        return (
            self.port_up is not False
            and not self.charon_down
            and self.tunnel_up is not False
            and not self.partner_down
            and self.heartbeat_ok(now)
        )

    @property
    def partner_up(self) -> bool | None:
        """False when its agent says the partner is down; None when no partner is configured."""
        if self.partner_down:
            return False
        rep = self.last_report
        if rep is None or rep.partner is None:
            return None
        return rep.partner.up is not False

    def unhealthy_why(self) -> str | None:
        """Why the gateway cannot carry traffic although its agent may be talking."""
        if self.port_up is False:
            return "port down"
        if self.charon_down:
            return "agent reports charon stopped"
        if self.tunnel_up is False:
            if self.last_report is not None and self.last_report.remote_access is not None:
                return (f"tunnel down (no installed CHILD SA); it serves remote-access clients: if it has no "
                        f"site-to-site tunnel, set `site_to_site: false` on gateway {self.name!r} in the controller "
                        f"config's `gateways:`")
            return "tunnel down (no installed CHILD SA)"
        if self.partner_down:
            rep = self.last_report
            detail = rep.partner.why if rep is not None and rep.partner is not None and rep.partner.up is False else None
            return "partner down" + (f" ({detail})" if detail else "")
        return None


@dataclass(frozen=True)
class Transition:
    gateway: str
    died: bool  # True: alive -> dead; False: dead -> alive (recovering)
    why: str


class GatewayRegistry:
    def __init__(self, config: Config, now: float, startup_grace_s: float) -> None:
        self._dead_after = config.timing.dead_after_s
        self._missed = config.timing.missed_heartbeats
        self._grace = startup_grace_s
        self._gws: dict[str, GatewayRecord] = {
            g.name: GatewayRecord(
                name=g.name,
                port=g.port,
                mac=g.mac,
                weight=g.weight,
                heartbeat_required=g.heartbeat,
                site_to_site=g.site_to_site,
                grace_start=now,
                grace_until=now + startup_grace_s,
                dead_after=self._dead_after,
            )
            for g in config.gateways
        }
        self._by_port = {g.port: g.name for g in config.gateways}

    # -- lookups
    def get(self, name: str) -> GatewayRecord:
        try:
            return self._gws[name]
        except KeyError:
            raise UnknownGateway(f"no gateway named {name!r}") from None

    def by_port(self, port: int) -> GatewayRecord | None:
        name = self._by_port.get(port)
        return None if name is None else self._gws[name]

    def all(self) -> list[GatewayRecord]:
        return list(self._gws.values())

    def names(self) -> list[str]:
        return list(self._gws)

    def eligible(self) -> list[GatewayRecord]:
        return [g for g in self._gws.values() if g.state in (GatewayState.ALIVE, GatewayState.RECOVERING)]

    def rebalance_inputs(self) -> list[GatewayInput]:
        """Every gateway in the config's order (the ring of `rebalancer.policy: paper`)."""
        return [
            GatewayInput(name=g.name, weight=g.weight, state=g.state, reported_cpu=g.reported_cpu)
            for g in self._gws.values()
        ]

    # -- intent
    def apply_intent(self, weights: dict[str, float], drained: set[str]) -> None:
        for name, w in weights.items():
            if name in self._gws and w > 0:
                self._gws[name].weight = w
        for name in drained:
            if name in self._gws:
                self._gws[name].drained = True

    def set_weight(self, name: str, weight: float) -> None:
        if not weight > 0 or weight != weight or weight == float("inf"):
            raise InvalidArgument(f"weight must be a finite number > 0, got {weight}")
        self.get(name).weight = weight

    def set_drained(self, name: str, drained: bool) -> None:
        self.get(name).drained = drained

    def set_withheld(self, name: str, why: str | None) -> None:
        """`why` it may not serve while alive (a takeover holds its SAs); None: it may again."""
        self.get(name).withheld = why

    # -- liveness
    def restart_grace(self, now: float) -> None:
        """This instance just became primary: gateways it has not heard from lately get a
        fresh grace period; those with current heartbeats keep being judged by them."""
        for g in self._gws.values():
            if g.last_heartbeat is not None and now - g.last_heartbeat <= g.dead_after:
                g.grace_start = g.grace_until = float("-inf")
            else:
                g.grace_start = now
                g.grace_until = now + self._grace

    def arriving(self, name: str) -> bool:
        """An authenticated heartbeat/report POST for `name` arrived and is being handled.

        On a busy loop its handler may run hundreds of milliseconds later (FastAPI runs
        plain-`def` dependencies in a thread pool; tasks queue); the watchdog must not
        count that time as the gateway's silence. False for an unknown name."""
        g = self._gws.get(name)
        if g is None:
            return False
        g.inflight += 1
        return True

    def settled(self, name: str, arrived: float, now: float) -> None:
        """The POST announced by `arriving` at `arrived` has been answered (or failed).

        If a heartbeat or report was handled since it arrived, the agent was alive and
        waiting for this answer until `now`: its silence starts now, not at the handler.
        """
        g = self._gws.get(name)
        if g is None or g.inflight == 0:
            return
        g.inflight -= 1
        if g.last_heartbeat is not None and g.last_heartbeat >= arrived:
            g.last_heartbeat = max(g.last_heartbeat, now)

    def heartbeat(self, name: str, ts_now: float, charon_down: bool | None = None,
                  partner_down: bool | None = None, interval_s: float | None = None) -> Transition | None:
        """A heartbeat of `name` at `ts_now`; `charon_down`/`partner_down` as the agent said
        (None: it did not say). Only heartbeats set them: they are newer than any report.
        `interval_s`: the interval a UDP beat declares (0: none, an older agent: the
        controller's own; None: a REST heartbeat, which says nothing of it)."""
        g = self.get(name)
        g.last_heartbeat = ts_now if g.last_heartbeat is None else max(g.last_heartbeat, ts_now)
        if interval_s is not None:
            g.dead_after = max(self._dead_after, interval_s * self._missed)
        if charon_down is not None:
            g.charon_down = charon_down
        why = "heartbeats resumed"
        if partner_down is not None:
            if g.partner_down and not partner_down:
                why = "partner up"
            g.partner_down = partner_down
        return self._settle(g, ts_now, why)

    def report(self, report: GatewayReport, now: float) -> Transition | None:
        g = self.get(report.gateway)
        g.last_report = report
        g.last_report_at = now
        g.reported_cpu = report.cpu_percent / (100.0 * report.cpu_cores)  # 0..1 of its own capacity
        up = tunnel_up(report) if g.site_to_site else None
        if up is not None:  # None: the agent could not read its SAs; keep the last verdict
            g.tunnel_up = up
        # A report proves the agent is alive just as a heartbeat does.
        g.last_heartbeat = now if g.last_heartbeat is None else max(g.last_heartbeat, now)
        return self._settle(g, now, "tunnel up" if up else "reports resumed")

    def set_port_state(self, port: int, up: bool, now: float) -> Transition | None:
        g = self.by_port(port)
        if g is None:
            return None
        g.port_up = up
        return self._settle(g, now, "port up" if up else "port down")

    def tick(self, now: float) -> list[Transition]:
        """Watchdog: gateways whose heartbeats stopped since the last tick."""
        out: list[Transition] = []
        for g in self._gws.values():
            t = self._settle(g, now, f"no heartbeat for {g.dead_after:.3g}s")
            if t is not None:
                out.append(t)
        return out

    def refilled(self, name: str) -> None:
        self.get(name).recovering = False

    def _settle(self, g: GatewayRecord, now: float, why: str) -> Transition | None:
        alive = g.alive(now)
        if g.dead and alive:
            g.dead = False
            g.recovering = True
            return Transition(g.name, died=False, why=why)
        if not g.dead and not alive:
            g.dead = True
            g.recovering = False
            return Transition(g.name, died=True, why=g.unhealthy_why() or why)
        return None

    def heartbeat_age(self, name: str, now: float) -> float | None:
        g = self.get(name)
        return None if g.last_heartbeat is None else max(0.0, now - g.last_heartbeat)

    def report_age(self, name: str, now: float) -> float | None:
        g = self.get(name)
        return None if g.last_report_at is None else max(0.0, now - g.last_report_at)

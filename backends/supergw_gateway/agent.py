"""The agent beside charon: load reports every T_L, heartbeats, and a /health endpoint.

Its timing is its controllers': every answer to a report or REST heartbeat carries the
controller's `AgentTiming` (`Supergw-Timing` header), which the agent adopts at once and on
every change (`Timing`): heartbeats, pair beacons and reports follow it. Until the first
answer it runs on the defaults (`supergw_proto.reports`); its UDP heartbeats and pair
beacons declare their interval, so a receiver still on another timing judges them by it.
With several controllers it follows the fastest (and says so when they disagree). The same
answers carry the controller's orders for this gateway (`Orders`, `Supergw-Orders`): while it
is drained, redirect its remote-access clients to IP_P (RFC 5685, `ra/sessions.py`), at once
and then at every report.

Heartbeats are UDP datagrams from a thread of their own (`beacon.py`), HMAC-keyed by the
gateway's agent secret, to every configured controller; `heartbeat="http"` keeps the
older REST heartbeat (one POST per interval per controller). Reports go to every
controller (primary and backups) independently, each with its own HTTP client and short
timeouts. It survives controller downtime: failed POSTs are retried with backoff (REST
heartbeats capped at 0.5 s so they resume quickly, reports up to 5 s), and no error ends
the loops.

With a `partner` in its config (the paired gateway of a partner super gateway) the agent
exchanges pair beacons with the partner's agent through the tunnel (`partner.py`) and says
in every heartbeat and report whether the partner is up; without one the feature is off
(the log and /health say so) and the partner learns of a failure only through IKE DPD.

CPU is the gateway's own, never the machine's: for a UML guest under a CPU quota the host's
count of the guest's processes against the quota, without one the guest's /proc/stat; in a
namespace its cgroup's cpuacct usage when it has one, else its processes (charon with
libipsec's userspace ESP threads, and this agent).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from supergw_proto.replication import ReplicationOrders
from supergw_proto.reports import (
    ORDERS_GENERATION_HEADER,
    ORDERS_HEADER,
    TIMING_HEADER,
    AgentOrders,
    AgentTiming,
    tunnel_up,
)

from supergw_gateway import tunnel
from supergw_proto.beats import FLAG_CHARON_DOWN, FLAG_LAN_DOWN

from supergw_gateway.agent_secret import RotatingSecret
from supergw_gateway.beacon import HeartbeatSender, Key, process_running
from supergw_gateway.cgroup import CpuAcct
from supergw_gateway.liveness import LivenessSender
from supergw_gateway.config import Controller, GatewayConfig
from supergw_gateway.errors import ConfigError, GatewayError
from supergw_gateway.partner import PartnerMonitor, link_running
from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.ra.sessions import ClientMonitor, monitor_for
from supergw_gateway.report import (
    CpuSample,
    GatewayReport,
    Heartbeat,
    build_report,
    family_cpu_jiffies,
    guest_cpus,
    parse_pid_stat,
    parse_proc_stat,
)
from supergw_gateway.runtime import Gateway
from supergw_gateway.statesync.setup import replicator_for
from supergw_gateway.tuning import lifecycle as tuning
from supergw_gateway.uml import descendants
from supergw_gateway.vici_client import IkeSaStatus, ViciClient

log = logging.getLogger(__name__)

_GUEST_SAMPLE = "cat /proc/stat; echo @@; cat /proc/$(cat /run/charon.pid)/stat 2>/dev/null || true"


def _pid_jiffies(pid: int | None) -> int:
    if pid is None:
        return 0
    try:
        return parse_pid_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, IndexError, ValueError):
        return 0


class Sampler:
    """The gateway's own CPU (see the module doc) and VICI SAs from its charon."""

    def __init__(self, gw: Gateway, acct: CpuAcct | None = None) -> None:
        self.gw = gw
        self.acct = acct if acct is not None else CpuAcct(f"sgw-gw-{gw.cfg.name}")
        self._vici: ViciClient | None = None

    def cpu(self) -> CpuSample:
        t = time.monotonic()
        quota = self.gw.cfg.cpu_quota_percent
        if self.gw.cfg.backend.value == "uml":
            guest = self.gw.charon_pid()  # the guest's kernel process
            if quota is not None and guest is not None:
                # Under a host quota the guest's ticks stop while the host holds it back, so
                # its /proc/stat never shows it saturated: its load is the host's count of its
                # processes (the kernel's and one per guest process, ESP included) against the
                # quota. (Its cgroup's counters are out of reach: `ip netns exec` mounts a sysfs
                # of its own.) Nothing runs in the guest for it: a command there forks in UML,
                # ~20 ms of the guest's CPU, a fifth of a 10 % quota at two reports a second,
                # in bursts that stall its traffic. So its charon and softirq go unreported (0).
                used = family_cpu_jiffies(guest, descendants(guest))
                return CpuSample(t, used, 0, 0, scope="processes", cores=quota / 100.0)
            out = self.gw.executor().run(["sh", "-c", _GUEST_SAMPLE], timeout=5).stdout
            stat, _, pid_stat = out.partition("@@")
            busy, soft = parse_proc_stat(stat)
            charon = parse_pid_stat(pid_stat) if pid_stat.strip() else 0
            return CpuSample(t, busy, soft, charon, scope="guest", cores=guest_cpus(stat))
        charon = _pid_jiffies(self.gw.charon_pid())
        cores = quota / 100.0 if quota is not None else float(os.cpu_count() or 1)
        usage = self.acct.usage_jiffies()
        if usage is not None:
            return CpuSample(t, usage, 0, charon, scope="cgroup", cores=cores)
        # Namespaces share the host kernel: softirq (kernel ESP) is nobody's in particular.
        own = charon + _pid_jiffies(os.getpid())
        return CpuSample(t, own, 0, charon, scope="processes", cores=cores)

    def sas(self) -> list[IkeSaStatus]:
        try:
            if self._vici is None:
                self._vici = self.gw.vici()
            return self._vici.list_sas()
        except Exception:
            if self._vici is not None:
                self._vici.close()
            self._vici = None
            raise


# Heartbeats must resume quickly when a controller comes back (it declares a gateway dead
# after a few missed 100 ms beats); reports are bigger and may back off further.
HEARTBEAT_BACKOFF_CAP_S = 0.5
REPORT_BACKOFF_CAP_S = 5.0
ORDERS_BACKOFF_CAP_S = 2.0  # a takeover order must not wait long behind a failed poll
ORDERS_WAIT_S = 20
REPORT_TIMEOUT_S = 2.0


def heartbeat_timeout_s(interval_s: float) -> float:
    """Short enough that a hung controller costs at most a beat or two, never the others'."""
    return min(1.0, max(0.2, 2 * interval_s))


@dataclass
class LinkState:
    url: str
    reports_ok: int = 0
    reports_failed: int = 0
    heartbeats_ok: int = 0
    heartbeats_failed: int = 0
    last_error: str | None = None


@dataclass
class AgentState:
    reports_ok: int = 0
    reports_failed: int = 0
    heartbeats_ok: int = 0
    heartbeats_failed: int = 0
    last_error: str | None = None
    last_report: GatewayReport | None = None
    started: float = field(default_factory=time.time)


class Backoff:
    def __init__(self, base: float, cap: float = REPORT_BACKOFF_CAP_S) -> None:
        self.base, self.cap, self.cur = base, max(cap, base), base

    def ok(self) -> float:
        self.cur = self.base
        return self.base

    def fail(self) -> float:
        self.cur = min(self.cap, self.cur * 2)
        return self.cur


class ReportFeed:
    """The latest report, numbered; each controller link posts the newest one it has not sent."""

    def __init__(self) -> None:
        self.seq = 0
        self.report: GatewayReport | None = None
        self._cond = asyncio.Condition()

    async def publish(self, rep: GatewayReport) -> None:
        async with self._cond:
            self.report, self.seq = rep, self.seq + 1
            self._cond.notify_all()

    async def newer_than(self, seq: int) -> tuple[int, GatewayReport]:
        async with self._cond:
            await self._cond.wait_for(lambda: self.seq > seq)
            assert self.report is not None
            return self.seq, self.report


class Timing:
    """The timing this agent runs by: what its controllers told it, the defaults until then.

    With several controllers (primary and backups, normally one config) it follows the
    fastest of each value: beating faster than a controller asks costs it a few datagrams,
    slower would look like death. `on_change` runs whenever the timing in force changes.
    """

    def __init__(self, on_change: Callable[[AgentTiming], None] = lambda _t: None) -> None:
        self.current = AgentTiming()
        self._told: dict[str, AgentTiming] = {}
        self._on_change = on_change
        self._quiet: set[str] = set()  # controllers whose silence about timing was said once

    def told(self, url: str, timing: AgentTiming) -> None:
        if self._told.get(url) == timing:
            return
        self._told[url] = timing
        told = list(self._told.values())
        new = AgentTiming(
            heartbeat_interval_ms=min(t.heartbeat_interval_ms for t in told),
            missed_heartbeats=min(t.missed_heartbeats for t in told),
            report_interval_ms=min(t.report_interval_ms for t in told),
        )
        if len(set(told)) > 1:
            log.warning("controllers tell different timings (%s): following the fastest: %s",
                        "; ".join(f"{u}: {t.describe()}" for u, t in sorted(self._told.items())), new.describe())
        if new != self.current:
            log.warning("timing from controller %s: %s (was: %s)", url, new.describe(), self.current.describe())
            self.current = new
            self._on_change(new)

    def heard(self, url: str, response: httpx.Response) -> None:
        """A controller's 2xx answer: adopt the timing it carries."""
        value = response.headers.get(TIMING_HEADER)
        if value is None:
            if url not in self._quiet:
                self._quiet.add(url)
                log.warning("controller %s does not say its timing (no %s header: an older controller?): keeping %s",
                            url, TIMING_HEADER, self.current.describe())
            return
        try:
            timing = AgentTiming.from_header(value)
        except ValueError as exc:
            if url not in self._quiet:
                self._quiet.add(url)
                log.warning("controller %s sent an unusable %s header %r (%s): keeping %s", url, TIMING_HEADER,
                            value[:200], exc, self.current.describe())
            return
        self._quiet.discard(url)
        self.told(url, timing)


class Orders:
    """What this agent's controllers ask of it now (`AgentOrders`, the `Supergw-Orders` header
    of each answer, or the body of the orders long-poll; absent: nothing). A level per
    controller: the last answer of each counts, and a redirect holds while any controller asks
    for it. `on_change` runs when that changes; `on_replication` gets every replication
    order (the replicator ignores repeats)."""

    def __init__(self, on_change: Callable[[], None] = lambda: None,
                 on_replication: Callable[[ReplicationOrders], None] = lambda _o: None) -> None:
        self._by_url: dict[str, AgentOrders] = {}
        self._on_change = on_change
        self._on_replication = on_replication

    @property
    def redirect_to(self) -> ipaddress.IPv4Address | None:
        return next((o.redirect_to for _, o in sorted(self._by_url.items()) if o.redirect_to is not None), None)

    def heard(self, url: str, response: httpx.Response) -> None:
        try:
            orders = AgentOrders.from_header(response.headers.get(ORDERS_HEADER))
        except ValueError as exc:
            log.warning("controller %s sent an unusable %s header (%s): ignored", url, ORDERS_HEADER, exc)
            return
        self.take(url, orders)

    def take(self, url: str, orders: AgentOrders) -> None:
        if orders.replication is not None:
            self._on_replication(orders.replication)
        before = self.redirect_to
        self._by_url[url] = orders
        if self.redirect_to != before:
            if self.redirect_to is not None:
                log.warning("controller %s: this gateway is drained; redirecting its remote-access clients to %s",
                            url, self.redirect_to)
            else:
                log.warning("controllers no longer ask for redirects (undrained)")
            self._on_change()


class ControllerLink:
    """One controller: its own HTTP clients for heartbeats and reports, so a slow report POST
    never delays a heartbeat, and an unreachable controller never slows another one. Every
    answer tells `timing` the controller's timing."""

    def __init__(self, url: str, gateway: str, ctl: Controller, state: AgentState,
                 transport: httpx.AsyncBaseTransport | None = None,
                 flags: Callable[[], tuple[bool | None, bool | None]] = lambda: (None, None),
                 timing: Timing | None = None, orders: Orders | None = None) -> None:
        self.gateway, self.ctl, self.agg = gateway, ctl, state
        self.flags = flags  # (charon down, partner down) for the REST heartbeat
        self.timing = timing if timing is not None else Timing()
        self.orders = orders if orders is not None else Orders()
        self.state = LinkState(url)
        base = url.rstrip("/") + "/api/v1"
        # Followed in its file: a rotated token is used from the next POST on (agent_secret.py).
        self.secret = (RotatingSecret(lambda: ctl.secret(url), f"controller {url}", overlap_s=ctl.key_overlap_s)
                       if ctl.secret(url) else None)
        self.hb_http = httpx.AsyncClient(base_url=base, transport=transport, verify=ctl.verify())
        self.rep_http = httpx.AsyncClient(base_url=base, timeout=REPORT_TIMEOUT_S, transport=transport,
                                          verify=ctl.verify())

    async def _post(self, http: httpx.AsyncClient, path: str, body: str, timeout: float | None = None) -> None:
        headers = {"Content-Type": "application/json"}
        if self.secret is not None:
            headers["Authorization"] = f"Bearer {self.secret.current()}"
        r = await http.post(path, content=body, headers=headers,
                            timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout)
        if r.status_code >= 300:
            raise GatewayError(f"POST {self.state.url}{path}: HTTP {r.status_code}: {r.text[:200]}")
        self.timing.heard(self.state.url, r)
        self.orders.heard(self.state.url, r)

    def _failed(self, what: str, exc: Exception) -> None:
        msg = f"{what} to {self.state.url}: {type(exc).__name__}: {exc}"
        self.state.last_error = self.agg.last_error = msg

    async def heartbeat_loop(self) -> None:
        backoff = Backoff(self.timing.current.heartbeat_interval_ms / 1000, HEARTBEAT_BACKOFF_CAP_S)
        path = f"/gateways/{self.gateway}/heartbeat"
        while True:
            t0 = time.monotonic()
            interval = self.timing.current.heartbeat_interval_ms / 1000
            backoff.base = interval
            try:
                charon_down, partner_down = await asyncio.to_thread(self.flags)
                hb = Heartbeat(gateway=self.gateway, timestamp=time.time(), charon_down=charon_down,
                               partner_down=partner_down)
                await self._post(self.hb_http, path, hb.model_dump_json(), timeout=heartbeat_timeout_s(interval))
                self.state.heartbeats_ok += 1
                self.agg.heartbeats_ok += 1
                backoff.ok()
            except Exception as exc:
                self.state.heartbeats_failed += 1
                self.agg.heartbeats_failed += 1
                self._failed("heartbeat", exc)
                if self.state.heartbeats_failed == 1 or backoff.cur < backoff.cap:
                    log.warning("heartbeat to %s failed (retry in %.2fs): %s", self.state.url, backoff.fail(), exc)
                else:
                    backoff.fail()
            # A fixed cadence: the time the POST took counts against the wait.
            await asyncio.sleep(max(0.0, backoff.cur - (time.monotonic() - t0)))

    async def report_loop(self, feed: ReportFeed) -> None:
        delay = 0.0
        seq = 0
        path = f"/gateways/{self.gateway}/report"
        while True:
            period = self.timing.current.report_interval_ms / 1000
            seq, rep = await feed.newer_than(seq)
            try:
                await self._post(self.rep_http, path, rep.model_dump_json())
                self.state.reports_ok += 1
                self.agg.reports_ok += 1
                delay = 0.0
            except Exception as exc:
                self.state.reports_failed += 1
                self.agg.reports_failed += 1
                self._failed("report", exc)
                delay = min(REPORT_BACKOFF_CAP_S, max(period, delay * 2))
                log.warning("report to %s failed (retry in %.1fs): %s", self.state.url, delay, exc)
                await asyncio.sleep(delay)

    async def orders_loop(self) -> None:
        """Long-poll this controller's orders for this gateway: the answer comes as soon as
        they change (a takeover reaches the backup in one round trip), else after the wait.
        Each answer's `Supergw-Orders-Generation` is the next `after` (generations only grow,
        across controller restarts too)."""
        path = f"/gateways/{self.gateway}/orders"
        backoff = Backoff(0.2, ORDERS_BACKOFF_CAP_S)
        after = 0
        http = httpx.AsyncClient(base_url=self.hb_http.base_url, timeout=ORDERS_WAIT_S + 5, verify=self.ctl.verify())
        try:
            while True:
                headers = {"Authorization": f"Bearer {self.secret.current()}"} if self.secret is not None else {}
                try:
                    r = await http.get(path, params={"after": after, "wait": ORDERS_WAIT_S}, headers=headers)
                    if r.status_code == 404 and r.content == b'{"detail":"Not Found"}':  # no such route
                        log.warning("controller %s has no orders long-poll (an older controller?): orders come with "
                                    "report answers only", self.state.url)
                        return
                    if r.status_code >= 300:
                        raise GatewayError(f"GET {self.state.url}{path}: HTTP {r.status_code}: {r.text[:200]}")
                    self.timing.heard(self.state.url, r)
                    self.orders.take(self.state.url, AgentOrders.model_validate_json(r.content))
                    after = int(r.headers.get(ORDERS_GENERATION_HEADER, after))
                    backoff.ok()
                except Exception as exc:
                    self._failed("orders", exc)
                    await asyncio.sleep(backoff.fail())
        finally:
            await http.aclose()

    async def aclose(self) -> None:
        await self.hb_http.aclose()
        await self.rep_http.aclose()


class Agent:
    def __init__(self, cfg: GatewayConfig, transport: httpx.AsyncBaseTransport | None = None,
                 heartbeat: str = "udp") -> None:
        if cfg.controller is None:
            raise GatewayError(f"{cfg.name}: no `controller` section in the config: the agent has nowhere to report")
        if heartbeat not in ("udp", "http"):
            raise GatewayError(f"heartbeat must be 'udp' or 'http', got {heartbeat!r}")
        self.cfg = cfg
        self.ctl = cfg.controller
        self.gw = Gateway(cfg)
        self.sampler = Sampler(self.gw)
        self.state = AgentState()
        self.feed = ReportFeed()
        self.timing = Timing(self._timing_changed)
        self.replicator = replicator_for(cfg, self.gw.vici, self._replication_change)
        self._urgent = False  # a takeover moved: report at once (the controller moves the pool on it)
        self.orders = Orders(self._client_change,  # a redirect asked or withdrawn: act at once
                             self.replicator.apply if self.replicator is not None else lambda _o: None)
        self.partner = self._partner_monitor(cfg)
        self.links = [ControllerLink(u, cfg.name, self.ctl, self.state, transport, self.rest_flags, self.timing,
                                     self.orders)
                      for u in self.ctl.endpoints]
        self.heartbeat = heartbeat
        # Remote-access clients (ra/sessions.py): a client that comes or goes wakes the sampler,
        # so the controller pins it within a report round trip, not a report period.
        self._clients_changed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.clients: ClientMonitor | None = (
            monitor_for(cfg, self.gw.connect, self._client_change) if cfg.remote_access is not None else None)
        self.liveness = self._liveness_sender(cfg)
        self.sender: HeartbeatSender | None = None
        if heartbeat == "udp":
            keyed: list[tuple[str, Key]] = []
            for link in self.links:
                if link.secret is None:
                    raise GatewayError(f"{cfg.name}: no agent token for controller {link.state.url} (controller.token "
                                       "or token_file): it authenticates the reports and keys the heartbeats")
                keyed.append((link.state.url, link.secret))
            self.sender = HeartbeatSender(cfg.name, keyed, self.timing.current.heartbeat_interval_ms / 1000,
                                          self.charon_running,
                                          self.partner.down if self.partner is not None else None)

    def _liveness_sender(self, cfg: GatewayConfig) -> LivenessSender | None:
        """The liveness frames out of the LAN port (`liveness.py`); not with the UML backend,
        whose LAN interface is the guest's."""
        lan = cfg.lan
        if lan is None or cfg.backend.value == "uml":
            return None
        return LivenessSender(lan.device, cfg.name, self.timing.current.lan_liveness_interval_ms)

    def liveness_line(self) -> str:
        """What the log and /health say about the liveness frames."""
        if self.liveness is None:
            why = "the UML backend's LAN interface is the guest's" if self.cfg.lan is not None else "no LAN interface"
            return f"liveness frames off ({why}): the switch leaves this gateway's failover to the controller"
        ms = self.timing.current.lan_liveness_interval_ms
        if not ms:
            return "liveness frames off: the controller asks for none (timing.lan_liveness_interval_ms 0)"
        return f"liveness frames out of {self.liveness.ifname} every {ms} ms"

    def _partner_monitor(self, cfg: GatewayConfig) -> PartnerMonitor | None:
        p = cfg.partner
        local = cfg.partner_local_address
        if p is None or local is None or cfg.backend.value == "uml":
            return None
        try:
            key = p.secret()
        except ConfigError as exc:
            raise GatewayError(f"{cfg.name}: {exc}") from None
        t = self.timing.current
        return PartnerMonitor(cfg.name, p.name, key, (str(local), p.port), (str(p.address), p.port),
                              t.heartbeat_interval_ms / 1000, t.missed_heartbeats, self.own_flags,
                              self._partner_changed, startup_grace_s=p.startup_grace_s, max_skew_s=p.max_skew_s)

    def _timing_changed(self, t: AgentTiming) -> None:
        """A controller told a new timing: heartbeats and pair beacons follow it now (reports
        from their next period)."""
        if self.sender is not None:
            self.sender.set_interval(t.heartbeat_interval_ms / 1000)
        if self.partner is not None:
            self.partner.set_timing(t.heartbeat_interval_ms / 1000, t.missed_heartbeats)
        if self.liveness is not None:
            self.liveness.update(interval_ms=t.lan_liveness_interval_ms)

    def _replication_change(self) -> None:
        self._urgent = True
        self._clients_changed.set()

    def _client_change(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._clients_changed.set)

    async def _client_report(self, rep: GatewayReport) -> GatewayReport:
        """The report with this gateway's remote-access clients (unchanged without remote access)."""
        if self.clients is None:
            return rep
        try:
            clients = await asyncio.to_thread(self.clients.poll, self.orders.redirect_to)
        except Exception as exc:  # clients unknown: say nothing rather than "none"
            log.warning("remote-access clients unavailable: %s", exc)
            return rep.model_copy(update={"remote_access": ra_gateway.report_info(self.cfg)})
        return rep.model_copy(update={"remote_access": ra_gateway.report_info(self.cfg), "clients": clients})

    def _partner_changed(self, up: bool | None) -> None:
        if self.sender is not None:
            self.sender.poke()
        if self.liveness is not None:
            self.liveness.update(serving=up is not False)

    def partner_line(self) -> str:
        """What the log and /health say about pair beacons."""
        p = self.cfg.partner
        if p is not None and self.cfg.backend.value == "uml":
            return ("pair beacons off: with the UML backend the LAN address is the guest's, not this agent's "
                    "(not supported yet); a partner site learns of this gateway's failure only through IKE DPD")
        if p is None or self.partner is None:
            return ("pair beacons off (no `partner` in the config): a partner site learns of this gateway's "
                    "failure only through IKE DPD")
        t = self.timing.current
        return (f"pair beacons with {p.name}: {self.partner.local[0]} <-> {p.address} port {p.port} through the "
                f"tunnel at the heartbeat interval (now {t.heartbeat_interval_ms} ms), partner down after "
                f"{t.missed_heartbeats} of its intervals missed")

    def charon_running(self) -> bool | None:
        """Whether the gateway's charon (for UML: its guest) is running, not stopped or gone."""
        return process_running(self.gw.charon_pid())

    def own_flags(self) -> int:
        """What this gateway's pair beacons say of it: charon stopped, LAN interface down."""
        flags = 0
        if self.charon_running() is False:
            flags |= FLAG_CHARON_DOWN
        lan = self.cfg.lan
        if lan is not None and self.cfg.backend.value != "uml" and link_running(lan.device) is False:
            flags |= FLAG_LAN_DOWN
        return flags

    def rest_flags(self) -> tuple[bool | None, bool | None]:
        charon = self.charon_running()
        return (None if charon is None else not charon), (self.partner.down() if self.partner is not None else None)

    def backend_label(self) -> str:
        st = self.gw.backend_state()
        return st.label if st else ("xfrm_uml" if self.cfg.backend.value == "uml" else "libipsec")

    async def make_report(self, prev: CpuSample) -> tuple[GatewayReport, CpuSample]:
        cur = await asyncio.to_thread(self.sampler.cpu)
        sa_error = None
        try:
            sas = await asyncio.to_thread(self.sampler.sas)
        except Exception as exc:  # SA state unknown: say so; a dead charon shows in the heartbeats
            log.warning("VICI unavailable: %s", exc)
            sas, sa_error = [], f"VICI: {type(exc).__name__}: {exc}"[:500]
        partner = await asyncio.to_thread(self.partner.state) if self.partner is not None else None
        rep = build_report(self.cfg.name, self.backend_label(), prev, cur, sas, tunnel.conn_name(self.cfg),
                           sa_error=sa_error, partner=partner)
        rep.tuning = await asyncio.to_thread(tuning.summary, self.cfg)
        if self.replicator is not None:
            try:
                await asyncio.to_thread(self.replicator.sweep)
            except Exception as exc:
                log.warning("replication sweep failed: %s", exc)
            rep.replication = self.replicator.state()
        return await self._client_report(rep), cur

    async def sample_loop(self) -> None:
        """One report every T_L (the controller's report interval), published to every controller link."""
        prev = await asyncio.to_thread(self.sampler.cpu)
        self._loop = asyncio.get_running_loop()
        if self.clients is not None:
            self.clients.start()
        while True:
            period = self.timing.current.report_interval_ms / 1000
            t0 = time.monotonic()
            try:  # a period, or less when a remote-access client came, went or moved
                await asyncio.wait_for(self._clients_changed.wait(), period)
                # ... but no CPU sample over less than a fifth of a period (too noisy to use),
                # unless a takeover moved: the controller waits for that report
                if not self._urgent:
                    await asyncio.sleep(max(0.0, period / 5 - (time.monotonic() - t0)))
            except asyncio.TimeoutError:
                pass
            self._clients_changed.clear()
            self._urgent = False
            try:
                rep, prev = await self.make_report(prev)
            except Exception as exc:
                self.state.last_error = f"sample: {exc}"
                log.warning("sampling failed: %s", exc)
                continue
            self.state.last_report = rep
            await self.feed.publish(rep)
            if self.liveness is not None and (pid := self.gw.charon_pid()) is not None:
                self.liveness.update(charon_pid=pid)

    async def report_loop(self) -> None:
        """Sample every T_L and post to every controller, each on its own backoff."""
        await asyncio.gather(self.sample_loop(), *(link.report_loop(self.feed) for link in self.links))

    async def heartbeat_loop(self) -> None:
        if self.liveness is not None:
            self.liveness.update(charon_pid=self.gw.charon_pid())
            self.liveness.start()
        if self.partner is not None:
            self.partner.start()
        try:
            if self.sender is None:
                await asyncio.gather(*(link.heartbeat_loop() for link in self.links))
                return
            self.sender.start()
            try:
                await asyncio.Event().wait()  # the thread beats until we are cancelled
            finally:
                self.sender.stop()
        finally:
            if self.partner is not None:
                await asyncio.to_thread(self.partner.stop)

    async def replication_loop(self) -> None:
        """The relay (charon's sync socket, the backup link, the listener) and one orders
        long-poll per controller; nothing without state replication."""
        if self.replicator is None:
            return
        await self.replicator.start()
        await asyncio.gather(*(link.orders_loop() for link in self.links))

    async def aclose(self) -> None:
        if self.liveness is not None:
            await asyncio.to_thread(self.liveness.stop)
        if self.replicator is not None:
            await self.replicator.close()
        if self.sender is not None:
            self.sender.stop()
        if self.partner is not None:
            self.partner.stop()
        if self.clients is not None:
            await asyncio.to_thread(self.clients.stop)
        for link in self.links:
            await link.aclose()

    def health(self) -> tuple[int, dict[str, object]]:
        charon = self.gw.charon_pid()
        rep = self.state.last_report
        up = bool(tunnel_up(rep)) if rep else False
        body: dict[str, object] = {
            "gateway": self.cfg.name, "backend": self.backend_label(), "charon_pid": charon,
            "tunnel_up": up, "reports_ok": self.state.reports_ok, "reports_failed": self.state.reports_failed,
            "heartbeats_ok": self.state.heartbeats_ok, "heartbeats_failed": self.state.heartbeats_failed,
            "heartbeat": self.heartbeat,
            "udp_heartbeats": vars(self.sender.stats).copy() if self.sender else None,
            "partner": (self.partner.state().model_dump() | {"send_failed": self.partner.send_failed,
                                                             "last_error": self.partner.last_error})
            if self.partner is not None else None,
            "pair_beacons": self.partner_line(),
            "liveness_frames": self.liveness_line(),
            "liveness_sender": self.liveness.health() if self.liveness is not None else None,
            "timing": self.timing.current.model_dump(),
            "tuning": tuning.health(self.cfg),
            "remote_access": None if self.clients is None else {
                "clients": len(self.clients.tracker.live()), "evicted": self.clients.evicted,
                "redirect_to": None if self.orders.redirect_to is None else str(self.orders.redirect_to),
                "redirected": self.clients.redirects.sent_total,
                "session_log": str(self.clients.log.path), "session_log_error": self.clients.log_error,
                "event_errors": self.clients.listener.errors,
                "last_event_error": self.clients.listener.last_error},
            "replication": None if self.replicator is None else self.replicator.state().model_dump(),
            "last_error": self.state.last_error, "uptime_s": round(time.time() - self.state.started, 1),
            "controllers": [vars(link.state).copy() for link in self.links],
        }
        return (200 if charon is not None else 503), body

    async def _serve_health(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode(errors="replace").split()
            if len(parts) >= 2 and parts[0] == "GET" and parts[1] in ("/health", "/healthz"):
                code, body = await asyncio.to_thread(self.health)
            else:
                code, body = 404, {"error": "only GET /health"}
            data = json.dumps(body).encode()
            reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[code]
            writer.write(f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start_health(self, listen: str) -> asyncio.Server:
        host, _, port = listen.rpartition(":")
        return await asyncio.start_server(self._serve_health, host or "127.0.0.1", int(port))


async def run_agent(cfg: GatewayConfig, health_listen: str = "127.0.0.1:0") -> None:
    agent = Agent(cfg)
    server = await agent.start_health(health_listen)
    addr = server.sockets[0].getsockname()
    log.warning("agent %s: health on http://%s:%d/health, reporting to %s; %s; %s", cfg.name, addr[0], addr[1],
                ", ".join(agent.ctl.endpoints), agent.partner_line(), agent.liveness_line())
    # SIGTERM (systemd's stop, the emulation's) ends the loops and lets aclose stop the
    # liveness sender and reap it: a child left to die with us would be reparented to PID 1,
    # and systemd on cgroup v1 in a container then waits out TimeoutStopSec for a cgroup it
    # cannot see empty (the deploy test's units).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async def work() -> None:
        await asyncio.gather(agent.report_loop(), agent.heartbeat_loop(), agent.replication_loop())

    async def stopped() -> None:
        await stop.wait()

    loops, stopper = asyncio.create_task(work()), asyncio.create_task(stopped())
    try:
        async with server:
            await asyncio.wait({loops, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if loops.done():
                loops.result()  # a loop that failed ends the agent with its error
    finally:
        for task in (loops, stopper):
            task.cancel()
        await asyncio.gather(loops, stopper, return_exceptions=True)
        await agent.aclose()

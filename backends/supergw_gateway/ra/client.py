"""A stock strongSwan road-warrior client in its own network namespace, for tests and emulations.

Each client is its own `charon-systemd` (userspace ESP through kernel-libipsec, its own
STRONGSWAN_CONF and VICI socket) that requests a virtual IP from the gateway. It can connect,
disconnect, lose its link (an outage), be frozen (SIGSTOP: a sleeping laptop) and move to a
new outer address (MOBIKE, RFC 4555). `ike_auths()` counts the IKE_AUTH exchanges it started
(the `counters` plugin), so a caller tells a resumption (same IKE SA, no new IKE_AUTH) from a
full IKE_SA_INIT + IKE_AUTH.

The namespace and its outer interface must exist (a lab or emulation makes them); the client
puts its address and default route on it.
"""

from __future__ import annotations

import ipaddress
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supergw_gateway.charon import CharonOptions, CharonProcess, Retransmit
from supergw_gateway.config import CharonTuning
from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import LocalExecutor
from supergw_gateway.ike_syntax import DEFAULT_ESP_PROPOSAL, DEFAULT_IKE_PROPOSAL
from supergw_gateway.vici_client import ViciClient

CONN = "ra"
CHILD = "ra-net"
# Fewer worker threads than a gateway (16): a client runs one IKE SA; with 4, VICI requests starve
# behind the threads libipsec, the receiver and the kernel watchers hold.
CLIENT_THREADS = 16


@dataclass(frozen=True)
class ClientConfig:
    """One client. `gateway` is the next hop toward `server` (IP_P); `subnets` are what it
    reaches through the tunnel (the gateway's LAN side)."""

    name: str
    netns: str
    device: str
    address: ipaddress.IPv4Interface
    gateway: ipaddress.IPv4Address
    server: ipaddress.IPv4Address
    server_id: str
    identity: str
    cacert: Path
    cert: Path
    key: Path
    subnets: tuple[ipaddress.IPv4Network, ...]
    run_dir: Path
    ike_proposals: tuple[str, ...] = (DEFAULT_IKE_PROPOSAL,)
    esp_proposals: tuple[str, ...] = (DEFAULT_ESP_PROPOSAL,)
    dpd_delay_s: int = 10
    retransmit: Retransmit = field(default_factory=lambda: Retransmit(tries=4, timeout_s=1.0, base=1.4))
    ike_rekey_s: int = 14400
    child_rekey_s: int = 3600
    # Reauthenticate this long before the lifetime the gateway sends in AUTH_LIFETIME.
    over_time_s: int = 2
    log_level: int = 1


@dataclass(frozen=True)
class ClientState:
    """The client's IKE SA as its own charon sees it."""

    ike_id: int
    state: str
    initiator_spi: str
    responder_spi: str
    local: str
    remote: str
    vip: str | None
    established_s: int
    child_state: str | None
    spi_in: str | None
    spi_out: str | None
    bytes_in: int
    bytes_out: int


def parse_state(raw: dict[str, Any]) -> ClientState | None:
    """The first IKE SA of a list-sas reply entry (decoded), or None."""
    for _name, ike in raw.items():
        children = list(ike.get("child-sas", {}).values())
        installed = [c for c in children if c.get("state") == "INSTALLED"]
        c = (installed or children or [{}])[-1]
        vips = ike.get("local-vips", [])
        return ClientState(
            ike_id=int(ike.get("uniqueid", 0)), state=ike.get("state", "?"),
            initiator_spi=ike.get("initiator-spi", ""), responder_spi=ike.get("responder-spi", ""),
            local=ike.get("local-host", ""), remote=ike.get("remote-host", ""),
            vip=vips[0] if vips else None, established_s=int(ike.get("established", 0)),
            child_state=c.get("state"), spi_in=c.get("spi-in"), spi_out=c.get("spi-out"),
            bytes_in=int(c.get("bytes-in", 0)), bytes_out=int(c.get("bytes-out", 0)),
        )
    return None


def build_conn(c: ClientConfig) -> dict[str, Any]:
    """The client's connection: an always-on road warrior with MOBIKE and a virtual IP."""
    child = {
        "remote_ts": [str(n) for n in c.subnets],
        "esp_proposals": list(c.esp_proposals),
        "rekey_time": f"{c.child_rekey_s}s",
        "dpd_action": "restart",
        "close_action": "start",  # the gateway ended the SA: connect again at once
        "start_action": "none",
    }
    return {CONN: {
        "version": "2",
        "remote_addrs": [str(c.server)],
        "vips": ["0.0.0.0"],
        "proposals": list(c.ike_proposals),
        "mobike": "yes",
        "dpd_delay": f"{c.dpd_delay_s}s",
        "rekey_time": f"{c.ike_rekey_s}s",
        "over_time": f"{c.over_time_s}s",
        "keyingtries": "0",
        "send_cert": "always",
        "local-1": {"auth": "pubkey", "id": c.identity, "certs": [c.cert.read_bytes()]},
        "remote-1": {"auth": "pubkey", "id": c.server_id, "cacerts": [c.cacert.read_bytes()]},
        "children": {CHILD: child},
    }}


@dataclass
class Followed:
    """A client followed through a move of its SA to another gateway (a redirect), from `t0`."""

    back_s: float | None = None  # t0 -> its first answer through the new SA (None: not within the time)
    worst_gap_s: float = 0.0  # the longest time without any answer (old SA or new) from t0 until then
    probes: int = 0


def follow_move(through_new: Callable[[], bool], through_old: Callable[[], bool], t0: float,
                timeout_s: float) -> Followed:
    """Probe until `through_new` (a probe only the new SA can answer) succeeds; meanwhile
    `through_old` (a probe the old SA answers) shows whether traffic kept flowing. Each probe
    takes as long as its ping's wait at most."""
    f = Followed()
    last = t0
    while time.monotonic() - t0 < timeout_s:
        new = through_new()
        ok = new or through_old()
        now = time.monotonic()
        f.probes += 1
        if ok:
            f.worst_gap_s = max(f.worst_gap_s, now - last)
            last = now
        if new:
            f.back_s = now - t0
            return f
    f.worst_gap_s = max(f.worst_gap_s, time.monotonic() - last)
    return f


class RemoteClient:
    def __init__(self, cfg: ClientConfig) -> None:
        self.cfg = cfg
        self.ns = LocalExecutor(cfg.netns)
        self.address = cfg.address
        self.next_hop = cfg.gateway
        self.charon = CharonProcess(
            cfg.netns, cfg.run_dir, libipsec=True,
            tuning=CharonTuning(threads=CLIENT_THREADS, log_level=cfg.log_level),
            options=CharonOptions(install_virtual_ip=True, plugins=("counters",), retransmit=cfg.retransmit),
        )

    # -- lifecycle -------------------------------------------------------------------------
    def configure_network(self) -> None:
        """The outer address and the default route (idempotent)."""
        self.ns.run(["ip", "link", "set", self.cfg.device, "up"])
        self.ns.run(["ip", "addr", "replace", str(self.address), "dev", self.cfg.device])
        self.ns.run(["ip", "route", "replace", "default", "via", str(self.next_hop), "dev", self.cfg.device])

    def start(self, timeout: float = 15.0) -> int:
        """Network, charon and the connection loaded (not initiated); returns charon's pid."""
        self.configure_network()
        pid = self.charon.start(timeout)
        with self.vici() as v:
            v.load_key(self.cfg.key.read_bytes())
            v.load_conn(build_conn(self.cfg))
        return pid

    def stop(self) -> None:
        pid = self.charon.pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGCONT)  # a frozen charon cannot act on SIGTERM
            except ProcessLookupError:
                pass
        self.charon.stop()

    def vici(self) -> ViciClient:
        return ViciClient(self.charon.connect)

    # -- IKE -------------------------------------------------------------------------------
    def connect(self, timeout_s: float = 20.0) -> ClientState:
        """Initiate the connection and wait until its CHILD SA is installed."""
        with self.vici() as v:
            v.initiate(CONN, CHILD, timeout_ms=int(timeout_s * 1000))
        st = self.wait(lambda s: s is not None and s.child_state == "INSTALLED", timeout_s, "connected")
        assert st is not None
        return st

    def disconnect(self) -> None:
        with self.vici() as v:
            v.terminate(ike=CONN, timeout_ms=5000)

    def state(self) -> ClientState | None:
        with self.vici() as v:
            for entry in list(v.raw_sas(CONN)):
                st = parse_state(entry)
                if st is not None and st.state == "ESTABLISHED":
                    return st
        return None

    def ike_auths(self) -> int:
        """IKE_AUTH requests this client sent: one per full IKE_SA_INIT + IKE_AUTH (with
        certificates, one IKE_AUTH exchange; retransmissions are not counted)."""
        with self.vici() as v:
            return v.counters(CONN).get("ike-auth-out-req", 0)

    def wait(self, pred: Callable[[ClientState | None], bool], timeout_s: float, what: str) -> ClientState | None:
        deadline = time.monotonic() + timeout_s
        st: ClientState | None = None
        while time.monotonic() < deadline:
            try:
                st = self.state()
            except (OSError, GatewayError):
                st = None
            if pred(st):
                return st
            time.sleep(0.2)
        raise GatewayError(f"client {self.cfg.name}: not {what} within {timeout_s:.0f}s (last state {st}); "
                           f"see {self.charon.log_path}")

    # -- what happens to a client ----------------------------------------------------------
    def link_down(self) -> None:
        """An outage: the client's link goes down (its routes with it)."""
        self.ns.run(["ip", "link", "set", self.cfg.device, "down"])

    def link_up(self) -> None:
        self.configure_network()

    def sleep(self) -> None:
        """The laptop sleeps: charon is frozen (SIGSTOP) and answers nothing."""
        os.kill(self._pid(), signal.SIGSTOP)

    def wake(self) -> None:
        os.kill(self._pid(), signal.SIGCONT)

    def move(self, address: ipaddress.IPv4Interface, next_hop: ipaddress.IPv4Address) -> None:
        """A new outer address (another network): charon moves its SAs there with MOBIKE."""
        old = self.address
        self.ns.run(["ip", "addr", "add", str(address), "dev", self.cfg.device])
        self.ns.run(["ip", "route", "replace", "default", "via", str(next_hop), "dev", self.cfg.device])
        self.ns.run(["ip", "addr", "del", str(old), "dev", self.cfg.device])
        self.address, self.next_hop = address, next_hop

    def ping(self, target: ipaddress.IPv4Address, count: int = 3, interval: float = 0.2, size: int = 56,
             deadline_s: float | None = None) -> tuple[int, int]:
        """(sent, received) of pings from the client (its virtual IP, by the tunnel's route)."""
        argv = ["ping", "-n", "-q", "-c", str(count), "-i", str(interval), "-W", "1", "-s", str(size)]
        if deadline_s is not None:
            argv += ["-w", str(int(deadline_s))]
        out = self.ns.run([*argv, str(target)], check=False, timeout=count * interval + 30).stdout
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        if not m:
            raise GatewayError(f"client {self.cfg.name}: ping printed no summary: {out!r}")
        return int(m.group(1)), int(m.group(2))

    def answers(self, target: ipaddress.IPv4Address, wait_s: float = 0.5) -> bool:
        """One ping through the tunnel, answered within `wait_s`."""
        argv = ["ping", "-n", "-q", "-c", "1", "-W", f"{wait_s:g}", str(target)]
        return self.ns.run(argv, check=False, timeout=wait_s + 10).returncode == 0

    def ike_sas(self) -> int:
        """IKE SAs of the connection (two while a reauthentication or redirect makes its new one)."""
        with self.vici() as v:
            return len(list(v.raw_sas(CONN)))

    def wait_traffic(self, target: ipaddress.IPv4Address, timeout_s: float) -> float:
        """Seconds until a ping through the tunnel is answered; GatewayError after timeout_s."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.ping(target, count=1, interval=0.2)[1] == 1:
                return time.monotonic() - t0
            time.sleep(0.2)
        raise GatewayError(f"client {self.cfg.name}: no traffic to {target} within {timeout_s:.0f}s; "
                           f"see {self.charon.log_path}")

    # -- cost ------------------------------------------------------------------------------
    def _pid(self) -> int:
        pid = self.charon.pid()
        if pid is None:
            raise GatewayError(f"client {self.cfg.name}: charon is not running")
        return pid

    def memory_kb(self) -> tuple[int, int]:
        """(RSS, PSS) of the client's charon in kB: PSS shares the pages all clients map once."""
        pid = self._pid()
        rss = pss = 0
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                kb = int(rest.split()[0])
                rss, pss = (kb, pss) if key == "Rss" else (rss, kb)
        return rss, pss

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the client's charon used so far."""
        fields = Path(f"/proc/{self._pid()}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


"""Test harness: a real switch in namespaces, controller processes, heartbeats.

Every test here talks to a real switch over real P4Runtime: the eBPF target
(`supergw-switch`) or BMv2 (`simple_switch_grpc` with the JSON from `make p4`), one run of
each test module per switch (`SGW_SWITCH=ebpf|bmv2` picks one). The controller runs as its
real CLI (`python -m supergw_controller.cli`). Skipped, with the reason, when not root or
when the switch is not built / installed.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import pytest
import yaml

from sgwctl_topo import (
    REMOTE_IP,
    SWITCHES,
    Endpoint,
    Switch,
    Topology,
    python,
    stop_process,
    switch_missing,
    wait_tcp,
)
from supergw_proto.bucket import bucket_of
from supergw_proto.reports import Heartbeat
from supergw_proto.rest import ApiError, ControllerClient
from topologies.bmv2 import stale_json
from topologies.paths import BMV2_JSON, P4INFO

TOKEN = "integration-test-token"


def agent_token(gateway: str) -> str:
    """Gateway `gateway`'s own agent token in the generated controller configs."""
    return f"integration-agent-{gateway}-token"


def switches() -> list[Switch]:
    """The switches to run on: both, or the one `SGW_SWITCH` names."""
    want = os.environ.get("SGW_SWITCH", "").strip()
    if not want:
        return list(SWITCHES)
    for s in SWITCHES:
        if s == want:
            return [s]
    raise pytest.UsageError(f"SGW_SWITCH={want!r}: expected one of {', '.join(SWITCHES)}")


def skip_reason(switch: Switch = "ebpf") -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces, eBPF)"
    if not P4INFO.exists():
        return f"P4Info {P4INFO} missing"
    if shutil.which("ping") is None:
        return "iputils ping not installed (apt-get install iputils-ping)"
    return switch_missing(switch)


@dataclass
class Controller:
    """One controller process (the real CLI) and its REST API (`client`, the typed client
    with the operator token; `agent(g)`, gateway g's agent)."""

    name: str
    config_path: Path
    api_port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    _agents: dict[str, ControllerClient] = field(default_factory=dict, init=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @functools.cached_property
    def client(self) -> ControllerClient:
        return ControllerClient(self.url, TOKEN)

    def agent(self, gateway: str) -> ControllerClient:
        """Gateway `gateway`'s agent: its own token, a short timeout (a stand-in agent retries)."""
        if gateway not in self._agents:
            self._agents[gateway] = ControllerClient(self.url, agent_token(gateway), timeout=1.0)
        return self._agents[gateway]

    def start(self, wait_role: str | None = "primary", timeout: float = 30) -> None:
        assert self.proc is None or self.proc.poll() is not None
        log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [python(), "-m", "supergw_controller.cli", "--config", str(self.config_path), "--log-level", "info"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_tcp(f"127.0.0.1:{self.api_port}", timeout, self.proc)
        if wait_role:
            self.wait_role(wait_role, timeout)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            stop_process(self.proc, sig)

    def role(self) -> str:
        """/status's role; "primary" only once the switch's tables are reconciled (a primary
        still writing them says "reconciling": hosts do not reach their gateways yet)."""
        try:
            st = self.client.status()
        except ApiError:
            return "unreachable"
        return "reconciling" if st.role == "primary" and not st.reconciled else st.role

    def wait_role(self, role: str, timeout: float) -> float:
        """Seconds until `role()` says `role`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.role() == role:
                return time.monotonic() - t0
            time.sleep(0.05)
        raise TimeoutError(f"{self.name} not {role} after {timeout}s; log tail:\n{self.log_tail()}")

    def log_time_of(self, needle: str, after: float = 0.0) -> float | None:
        """UNIX time of the first log line containing `needle` logged after `after`."""
        import datetime as dt

        for line in self.log_path.read_text(errors="replace").splitlines():
            if needle in line and line.startswith("ts="):
                stamp = line[3 : line.index(" ")]
                t = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()
                if t >= after:
                    return t
        return None

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""

    def bucket_of_gateway(self) -> dict[int, str | None]:
        return {b.bucket: b.gateway for b in self.client.buckets()}


class StandInAgent:
    """A stand-in for gateway agents: `tick()` every `interval` s on a daemon thread while
    the `with` block runs. A POST that fails is simply tried again next tick, as a real
    agent does while its controller restarts."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def tick(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.interval)


class Heartbeats(StandInAgent):
    """Posts a heartbeat for every gateway not silenced, every `interval` s, to every controller."""

    def __init__(self, controllers: list[Controller], gateways: list[str], interval: float = 0.1) -> None:
        super().__init__(interval)
        self.controllers = controllers
        self.gateways = gateways
        self.silenced: set[str] = set()

    def tick(self) -> None:
        for c in self.controllers:
            for g in self.gateways:
                if g in self.silenced:
                    continue
                try:
                    c.agent(g).heartbeat(Heartbeat(gateway=g, timestamp=time.time()), timeout=0.5)
                except ApiError:
                    pass


@dataclass
class Setup:
    topo: Topology
    tmp: Path
    controllers: list[Controller] = field(default_factory=list)

    def config(self, name: str, *, election_low: int, api_port: int, **over: Any) -> Path:
        t = self.topo
        ports: dict[int, Any] = {}
        for ep in t.endpoints.values():
            ports[ep.port] = {"role": ep.role, "interface": f"p{ep.port}"}
        data: dict[str, Any] = {
            "switch": {"address": t.grpc_addr, "device_id": t.device_id, "election_id": {"high": 0, "low": election_low}},
            "pipeline": self.pipeline(),
            "gateway_ip": t.gateway_ip,
            "buckets": 16,
            "vmac_base": "02:5e:00:00:00:00",
            "ports": ports,
            "gateways": [
                {"name": g.name, "port": g.port, "mac": g.mac, "agent_token": agent_token(g.name)} for g in t.gateways()
            ],
            # 10 x 100 ms instead of the default 3: this machine is shared with fuzzers and
            # benchmarks (load averages above 10 on 2 cores), and a test that flaps a
            # gateway by accident tests nothing. The default is checked by unit tests.
            "timing": {
                "rebalance_interval_ms": 600_000,
                "counter_poll_interval_ms": 500,
                "ageing_s": 600,
                "missed_heartbeats": 10,
            },
            "api": {"listen": f"127.0.0.1:{api_port}", "token": TOKEN},
            "port_monitor": {"enabled": True, "netns": t.sw_ns},
            "state_db": str(self.tmp / f"{name}.sqlite3"),
        }
        for k, v in over.items():
            if isinstance(v, dict) and isinstance(data.get(k), dict):
                data[k] = {**data[k], **v}
            else:
                data[k] = v
        path = self.tmp / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    def pipeline(self) -> dict[str, str]:
        if self.topo.switch == "bmv2":
            return {"p4info": str(P4INFO), "device_config": str(BMV2_JSON)}
        return {"p4info": str(P4INFO)}

    def controller(self, name: str, *, election_low: int = 20, api_port: int, **over: Any) -> Controller:
        c = Controller(
            name=name,
            config_path=self.config(name, election_low=election_low, api_port=api_port, **over),
            api_port=api_port,
            log_path=self.tmp / f"{name}.log",
        )
        self.controllers.append(c)
        return c


@dataclass(frozen=True)
class TopologySpec:
    """A test module's topology: `tag` names its namespaces (<prefix>-<tag>-*), `index`
    picks its mgmt subnet, device id (700+index) and gRPC port (50700+index)."""

    tag: str
    index: int
    hosts: int
    gateways: int
    prefix: str = "sgw-ctl"


def make_setup(spec: TopologySpec, switch: Switch, tmp: Path) -> Iterator[Setup]:
    reason = skip_reason(switch)
    if reason:
        pytest.skip(f"{switch}: {reason}")
    if switch == "bmv2" and (stale := stale_json()) is not None:
        pytest.fail(stale, pytrace=False)
    topo = Topology(tag=spec.tag, index=spec.index, prefix=spec.prefix, log_dir=tmp, switch=switch)
    s = Setup(topo=topo, tmp=tmp)
    try:
        topo.create(hosts=spec.hosts, gateways=spec.gateways)
        topo.start_switch()
        yield s
    finally:
        for c in s.controllers:
            c.stop(signal.SIGKILL)
        topo.destroy()


def vmac_of(base: str, bucket: int) -> str:
    from supergw_proto.bucket import vmac

    return vmac(base, bucket)


def neighbour_mac(ep: Any, ip: str) -> str | None:
    out = ep.exec("ip", "neigh", "show", ip, "dev", "eth0").stdout.split()
    return out[out.index("lladdr") + 1] if "lladdr" in out else None


def owner(ctl: Controller, host: Endpoint, buckets: int) -> str:
    """The gateway the controller says carries `host`'s bucket."""
    return str(ctl.client.bucket(bucket_of(host.mac, buckets)).gateway)


def two_hosts_on(setup: Setup, ctl: Controller, buckets: int, gateway: str) -> tuple[Endpoint, Endpoint, int, int]:
    """h1, h2 and their buckets, both moved onto `gateway` (operator moves)."""
    h1, h2 = setup.topo.endpoints["h1"], setup.topo.endpoints["h2"]
    b1, b2 = bucket_of(h1.mac, buckets), bucket_of(h2.mac, buckets)
    assert b1 != b2, "test needs the two hosts in different buckets"
    for b in (b1, b2):
        ctl.client.move(b, gateway)
    return h1, h2, b1, b2


def move_to_the_other(ctl: Controller, host: Endpoint, buckets: int) -> tuple[int, str]:
    """An operator move of `host`'s bucket from g1 to g2 or back; (the bucket, where it went),
    once the controller says it is there."""
    b = bucket_of(host.mac, buckets)
    other = "g2" if owner(ctl, host, buckets) == "g1" else "g1"
    ctl.client.move(b, other)
    assert owner(ctl, host, buckets) == other
    return b, other


def pings_seen_by(setup: Setup, host: Endpoint, count: int = 10) -> dict[str, int]:
    """Ping the remote IP from `host`; return rx packet deltas per gateway namespace."""
    before = {g.name: g.rx_packets() for g in setup.topo.gateways()}
    sent, got = host.ping(REMOTE_IP, count=count, interval=0.02)
    assert (sent, got) == (count, count), f"{host.name}: {got}/{sent} pings answered"
    return {g.name: g.rx_packets() - before[g.name] for g in setup.topo.gateways()}

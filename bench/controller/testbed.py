"""The controller benchmark's network: real switch, real controller, emulated gateways.

    root ns: benchmark + supergw-controller (REST 127.0.0.1:18800)
       └─ sgw-api-m0 10.218.0.1/30 ── m1 10.218.0.2 ─┐
                                       sgw-api-sw: supergw-switch (P4Runtime 10.218.0.2:18801)
    sgw-api-h   eth0 ── p1  (port 1, host)      ─────┤
    sgw-api-g1  eth0 ── p11 (port 11, gateway gw1) ──┤
    sgw-api-g2  eth0 ── p12 (port 12, gateway gw2) ──┤
    sgw-api-g3  eth0 ── p13 (port 13, gateway gw3) ──┘

The gateways are namespaces whose eth0 receives the probe frames (a gateway agent is not
needed to measure dispatch; the benchmark posts their heartbeats). Every object is named
sgw-api-*; `teardown()` removes all of them, also after a crash.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SWITCH_BIN = REPO / "targets" / "ebpf" / "bin" / "supergw-switch"
P4INFO = REPO / "p4src" / "v1model" / "supergw.p4info.txtpb"
PYTHON = REPO / ".venv" / "bin" / "python"

PREFIX = "sgw-api"
SWITCH_NS = f"{PREFIX}-sw"
HOST_NS = f"{PREFIX}-h"
GATEWAYS = ("gw1", "gw2", "gw3")
GATEWAY_NS = {g: f"{PREFIX}-g{i}" for i, g in enumerate(GATEWAYS, start=1)}
GATEWAY_PORT = {g: 10 + i for i, g in enumerate(GATEWAYS, start=1)}
GATEWAY_MAC = {g: f"02:a9:00:00:00:{10 + i:02x}" for i, g in enumerate(GATEWAYS, start=1)}
HOST_PORT = 1
NAMESPACES = (SWITCH_NS, HOST_NS, *GATEWAY_NS.values())
MGMT_ROOT, MGMT_SW = f"{PREFIX}-m0", "m1"
MGMT_ROOT_IP, MGMT_SW_IP = "10.218.0.1", "10.218.0.2"
GRPC_ADDR = f"{MGMT_SW_IP}:18801"
API_LISTEN = "127.0.0.1:18800"
DEVICE_ID = 18
PIN_DIR = Path("/sys/fs/bpf") / PREFIX
VMAC_BASE = "02:5e:a9:00:00:00"
GATEWAY_IP = "10.218.1.1"
TOKEN = "sgw-api-bench-token-0123456789"


def agent_token(gateway: str) -> str:
    """Each emulated gateway's own agent token (only it may post that gateway's heartbeats)."""
    return f"sgw-bench-agent-{gateway}-0123456789"


class TestbedError(RuntimeError):
    pass


def sh(*argv: str, netns: str | None = None, check: bool = True, timeout: float = 30) -> str:
    full = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise TestbedError(f"`{' '.join(full)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def teardown() -> None:
    for ns in NAMESPACES:
        if Path("/run/netns", ns).exists():
            sh("ip", "netns", "del", ns, check=False)
    if Path("/sys/class/net", MGMT_ROOT).exists():
        sh("ip", "link", "del", MGMT_ROOT, check=False)
    if PIN_DIR.exists():
        shutil.rmtree(PIN_DIR, ignore_errors=True)
    time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=8)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@dataclass
class Testbed:
    workdir: Path
    buckets: int = 4096
    switch: subprocess.Popen[bytes] | None = None
    controller: subprocess.Popen[bytes] | None = None
    notes: list[str] = field(default_factory=list)

    def build(self) -> None:
        if os.geteuid() != 0:
            raise TestbedError("needs root (network namespaces, veths, eBPF)")
        if not SWITCH_BIN.is_file():
            raise TestbedError(f"switch binary missing: {SWITCH_BIN} (run `make switch`)")
        teardown()
        self.workdir.mkdir(parents=True, exist_ok=True)
        for ns in NAMESPACES:
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "set", "lo", "up", netns=ns)
            sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", netns=ns, check=False)
        sh("ip", "link", "add", MGMT_ROOT, "type", "veth", "peer", "name", MGMT_SW, "netns", SWITCH_NS)
        sh("ip", "addr", "add", f"{MGMT_ROOT_IP}/30", "dev", MGMT_ROOT)
        sh("ip", "link", "set", MGMT_ROOT, "up")
        sh("ip", "addr", "add", f"{MGMT_SW_IP}/30", "dev", MGMT_SW, netns=SWITCH_NS)
        sh("ip", "link", "set", MGMT_SW, "up", netns=SWITCH_NS)
        self._veth(f"p{HOST_PORT}", HOST_NS, None)
        for g in GATEWAYS:
            self._veth(f"p{GATEWAY_PORT[g]}", GATEWAY_NS[g], GATEWAY_MAC[g])
        sh("ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off", netns=HOST_NS, check=False)

    def _veth(self, sw_end: str, far_ns: str, mac: str | None) -> None:
        sh("ip", "link", "add", sw_end, "netns", SWITCH_NS, "type", "veth", "peer", "name", "eth0", "netns", far_ns)
        if mac:
            sh("ip", "link", "set", "eth0", "address", mac, netns=far_ns)
        sh("ip", "link", "set", sw_end, "up", netns=SWITCH_NS)
        sh("ip", "link", "set", "eth0", "up", netns=far_ns)

    def start_switch(self) -> None:
        ports = [f"{HOST_PORT}@p{HOST_PORT}"] + [f"{GATEWAY_PORT[g]}@p{GATEWAY_PORT[g]}" for g in GATEWAYS]
        argv = ["ip", "netns", "exec", SWITCH_NS, str(SWITCH_BIN), "--device-id", str(DEVICE_ID),
                "--grpc-server-addr", GRPC_ADDR, "--cpu-port", "255", "--pin-dir", str(PIN_DIR)]
        for p in ports:
            argv += ["-i", p]
        with open(self.workdir / "switch.log", "wb") as log:
            self.switch = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
        self._wait_tcp(GRPC_ADDR, self.switch, "switch P4Runtime server")

    def write_config(
        self, rebalance_ms: int, poll_ms: int, move_budget: int, refill_budget: int, port_monitor: bool = True
    ) -> Path:
        token_file = self.workdir / "api-token"
        token_file.write_text(TOKEN + "\n")
        config = {
            "switch": {"address": GRPC_ADDR, "device_id": DEVICE_ID, "election_id": {"high": 0, "low": 10}},
            "pipeline": {"p4info": str(P4INFO)},
            "gateway_ip": GATEWAY_IP,
            "buckets": self.buckets,
            "vmac_base": VMAC_BASE,
            "ports": {HOST_PORT: "host"} | {GATEWAY_PORT[g]: {"role": "gateway", "interface": f"p{GATEWAY_PORT[g]}"} for g in GATEWAYS},
            "gateways": [
                {"name": g, "port": GATEWAY_PORT[g], "mac": GATEWAY_MAC[g], "agent_token": agent_token(g)} for g in GATEWAYS
            ],
            "timing": {
                "heartbeat_interval_ms": 100,
                "missed_heartbeats": 3,
                "rebalance_interval_ms": rebalance_ms,
                "counter_poll_interval_ms": poll_ms,
            },
            "rebalancer": {"threshold": 1.10, "hysteresis": 0.05, "move_budget": move_budget, "refill_budget": refill_budget},
            "api": {"listen": API_LISTEN, "token_file": str(token_file)},
            "port_monitor": {"enabled": port_monitor, "netns": SWITCH_NS},
            "state_db": str(self.workdir / "state.sqlite3"),
        }
        path = self.workdir / "controller.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        db = self.workdir / "state.sqlite3"
        for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            p.unlink(missing_ok=True)
        return path

    def start_controller(self, config: Path) -> None:
        argv = [str(PYTHON), "-m", "supergw_controller.cli", "--config", str(config), "--log-level", "info"]
        with open(self.workdir / "controller.log", "wb") as log:
            self.controller = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                               start_new_session=True, cwd=REPO)
        self._wait_tcp(API_LISTEN, self.controller, "controller REST API")

    def _wait_tcp(self, addr: str, proc: subprocess.Popen[bytes], what: str, timeout: float = 20) -> None:
        import socket

        host, _, port = addr.rpartition(":")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise TestbedError(f"{what} exited with {proc.returncode}; see {self.workdir}")
            try:
                with socket.create_connection((host, int(port)), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise TestbedError(f"{what} did not listen on {addr} within {timeout:.0f} s")

    def link(self, gateway: str, up: bool) -> None:
        sh("ip", "link", "set", "eth0", "up" if up else "down", netns=GATEWAY_NS[gateway])

    def stop(self) -> None:
        _stop(self.controller)
        _stop(self.switch)
        self.controller = self.switch = None

"""The controller benchmark's network: real switch, real controller, emulated gateways.

    root ns: benchmark + supergw-controller (REST 127.0.0.1:18800)
       └─ sgw-api-m0 10.218.0.1/30 ── mgmt 10.218.0.2 ─┐
                                       sgw-api-sw: supergw-switch (P4Runtime 10.218.0.2:18801)
    sgw-api-h   eth0 ── p1  (port 1, host)      ──────┤
    sgw-api-g1  eth0 ── p11 (port 11, gateway gw1) ───┤
    sgw-api-g2  eth0 ── p12 (port 12, gateway gw2) ───┤
    sgw-api-g3  eth0 ── p13 (port 13, gateway gw3) ───┘

A switch lab (topologies/switchlab.py). The gateways are namespaces whose eth0 receives the
probe frames (a gateway agent is not needed to measure dispatch; the benchmark posts their
heartbeats). Every object is named sgw-api-*; `teardown()` removes all of it, also after a crash.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from topologies.iproute import NetworkError
from topologies.paths import P4INFO, REPO, SWITCH_BIN
from topologies.switch import SwitchCommand, pin_dir
from topologies.switchlab import Endpoint, MgmtLink, SwitchLab

PYTHON = REPO / ".venv" / "bin" / "python"

PREFIX = "sgw-api"
GATEWAYS = ("gw1", "gw2", "gw3")
GATEWAY_PORT = {g: 10 + i for i, g in enumerate(GATEWAYS, start=1)}
GATEWAY_MAC = {g: f"02:a9:00:00:00:{10 + i:02x}" for i, g in enumerate(GATEWAYS, start=1)}
HOST_PORT = 1
MGMT = MgmtLink(ipaddress.IPv4Network("10.218.0.0/30"))
LAB = SwitchLab(PREFIX, [Endpoint("h", HOST_PORT, offloads_off=True),
                         *(Endpoint(f"g{i}", GATEWAY_PORT[g], GATEWAY_MAC[g]) for i, g in enumerate(GATEWAYS, start=1))],
                mgmt=MGMT)
HOST_NS = LAB.ns("h")
GATEWAY_NS = {g: LAB.ns(f"g{i}") for i, g in enumerate(GATEWAYS, start=1)}
GRPC_ADDR = f"{MGMT.switch_ip}:18801"
API_LISTEN = "127.0.0.1:18800"
DEVICE_ID = 18
PIN_DIR = pin_dir(PREFIX)
VMAC_BASE = "02:5e:a9:00:00:00"
GATEWAY_IP = "10.218.1.1"
TOKEN = "sgw-api-bench-token-0123456789"


def agent_token(gateway: str) -> str:
    """Each emulated gateway's own agent token (only it may post that gateway's heartbeats)."""
    return f"sgw-bench-agent-{gateway}-0123456789"


class TestbedError(RuntimeError):
    pass


def teardown() -> None:
    LAB.teardown()
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
        try:
            LAB.build()
        except NetworkError as exc:
            raise TestbedError(str(exc)) from None

    def start_switch(self) -> None:
        argv = ["ip", "netns", "exec", LAB.switch_ns,
                *SwitchCommand("ebpf", DEVICE_ID, GRPC_ADDR, 255, LAB.ports(), pin_dir=PIN_DIR).argv()]
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
            "port_monitor": {"enabled": port_monitor, "netns": LAB.switch_ns},
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
        LAB.set_link(f"g{GATEWAYS.index(gateway) + 1}", up)

    def stop(self) -> None:
        _stop(self.controller)
        _stop(self.switch)
        self.controller = self.switch = None

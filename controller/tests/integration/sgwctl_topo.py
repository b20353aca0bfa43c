"""Namespaces, veths and processes for the controller's integration tests.

The switch is either target of the same P4 program (`SWITCHES`): the eBPF target
(`supergw-switch`, pipeline built in) or BMv2 `simple_switch_grpc` started with `--no-p4`,
to which the controller pushes the JSON that `make p4` compiled. Both take the same
command line shape, ports and CPU port (255), so everything else is shared: the command
line comes from topologies/switch.py, the namespaces from a switch lab
(topologies/switchlab.py), as for the benchmarks.

Layout (all names carry the topology's prefix, `sgw-ctl` unless a module picks its own,
and a per-module tag):

    root ns  --mgmt veth <prefix>-<tag>-m0 (10.207.<i>.1/30 <-> .2)--  switch ns (the switch, P4Runtime on .2)
                                                     |  p<n> veth ends, one per switch port
              host namespaces   (eth0: MAC, 10.0.0.<x>/24, default route via IP_G)
              gateway namespaces(eth0: MAC, 10.0.0.<y>/24; 192.0.2.1/32 on lo = "the remote site")

The controller runs in the root namespace (P4Runtime over the mgmt veth, REST on
127.0.0.1); its port monitor watches the p<n> interfaces inside the switch namespace.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

# simple_switch_grpc has no default CPU port: both switches get the pipeline's (defines.p4).
from supergw_proto.p4constants import CPU_PORT
from topologies import bmv2
from topologies.paths import BMV2_JSON, SWITCH_BIN
from topologies.switch import SwitchCommand, lasting_pin_dir, mount_lasting_pin_root
from topologies.switchlab import Endpoint as LabEndpoint
from topologies.switchlab import MgmtLink, SwitchLab

Switch = Literal["ebpf", "bmv2"]
SWITCHES: tuple[Switch, ...] = ("ebpf", "bmv2")
REMOTE_IP = "192.0.2.1"


def sh(*cmd: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def nsexec(ns: str, *cmd: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *cmd, check=check, timeout=timeout)


@dataclass
class Endpoint:
    """A host or gateway: one namespace with eth0 on one switch port."""

    name: str
    ns: str
    port: int
    mac: str
    ip: str
    role: str  # "host" | "gateway"

    def exec(self, *cmd: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return nsexec(self.ns, *cmd, check=check, timeout=timeout)

    def rx_packets(self) -> int:
        out = self.exec("cat", "/sys/class/net/eth0/statistics/rx_packets").stdout
        return int(out.strip())

    def ping(self, dst: str, count: int = 3, interval: float = 0.2, deadline: float | None = None) -> tuple[int, int]:
        """(transmitted, received) of an iputils ping."""
        args = ["ping", "-n", "-q", "-c", str(count), "-i", str(interval), "-W", "1"]
        if deadline is not None:
            args += ["-w", str(deadline)]
        r = self.exec(*args, dst, check=False, timeout=count * interval + 30)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", r.stdout)
        if not m:
            raise RuntimeError(f"ping output not understood: {r.stdout} {r.stderr}")
        return int(m.group(1)), int(m.group(2))


@dataclass
class Topology:
    tag: str
    index: int  # selects the mgmt subnet, gRPC port and device id
    prefix: str = "sgw-ctl"  # of every namespace, interface, pin path and log file
    gateway_ip: str = "10.0.0.1"
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    switch_proc: subprocess.Popen[bytes] | None = None
    log_dir: Path = Path("/tmp")
    switch: Switch = "ebpf"
    lab: SwitchLab = field(init=False)

    def __post_init__(self) -> None:
        self.lab = SwitchLab(f"{self.prefix}-{self.tag}", mgmt=MgmtLink(ipaddress.IPv4Network(f"10.207.{self.index}.0/30")))

    @property
    def sw_ns(self) -> str:
        return self.lab.switch_ns

    @property
    def mgmt_sw_ip(self) -> str:
        assert self.lab.mgmt is not None
        return self.lab.mgmt.switch_ip

    @property
    def device_id(self) -> int:
        return 700 + self.index

    @property
    def grpc_addr(self) -> str:
        return f"{self.mgmt_sw_ip}:{50700 + self.index}"

    @property
    def pin_dir(self) -> Path:
        """On a bpffs that outlives the switch process, as a deployed switch's: a switch
        stopped with `keep_dataplane` leaves its data plane for the next one to adopt."""
        return lasting_pin_dir(self.lab.prefix)

    def exec_sw(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return nsexec(self.sw_ns, *cmd, check=check)

    def hosts(self) -> list[Endpoint]:
        return [e for e in self.endpoints.values() if e.role == "host"]

    def gateways(self) -> list[Endpoint]:
        return [e for e in self.endpoints.values() if e.role == "gateway"]

    # -- build / tear down
    def create(self, hosts: int, gateways: int) -> None:
        self.destroy()
        self.endpoints, self.lab.endpoints = {}, []
        used: set[int] = set()
        for i in range(1, hosts + 1):
            self._endpoint(f"h{i}", "host", port=i, mac=self._host_mac(i, used), ip=f"10.0.0.{10 + i}")
        for i in range(1, gateways + 1):
            self._endpoint(f"g{i}", "gateway", port=10 + i, mac=f"52:54:00:{self.index:02x}:01:{i:02x}", ip=f"10.0.0.{1 + i}")
        self.lab.build()

    def _host_mac(self, i: int, used: set[int], k: int = 16) -> str:
        """A host MAC whose bucket (for K=k) no other host of this topology has."""
        from supergw_proto.bucket import bucket_of

        for low in range(256):
            mac = f"02:00:{self.index:02x}:{i:02x}:00:{low:02x}"
            if bucket_of(mac, k) not in used:
                used.add(bucket_of(mac, k))
                return mac
        raise RuntimeError("no free bucket")

    def _endpoint(self, name: str, role: str, port: int, mac: str, ip: str) -> Endpoint:
        self.lab.endpoints.append(LabEndpoint(
            name, port, mac, f"{ip}/24", route_via=self.gateway_ip if role == "host" else None,
            loopback=(REMOTE_IP,) if role == "gateway" else ()))
        ep = Endpoint(name=name, ns=self.lab.ns(name), port=port, mac=mac, ip=ip, role=role)
        self.endpoints[name] = ep
        return ep

    def start_switch(self) -> None:
        assert self.switch_proc is None
        if self.switch == "ebpf":
            mount_lasting_pin_root()
        log_file = self.log_dir / f"{self.lab.prefix}-bmv2" if self.switch == "bmv2" else None
        cmd = SwitchCommand(self.switch, self.device_id, self.grpc_addr, CPU_PORT, self.lab.ports(),
                            pin_dir=self.pin_dir if self.switch == "ebpf" else None, log_file=log_file)
        log = open(self.log_dir / f"{self.lab.prefix}-switch.log", "ab")  # noqa: SIM115
        self.switch_proc = subprocess.Popen(["ip", "netns", "exec", self.sw_ns, *cmd.argv()], stdout=log,
                                            stderr=subprocess.STDOUT)
        wait_tcp(self.grpc_addr, 15, self.switch_proc)

    def stop_switch(self, keep_dataplane: bool = False) -> None:
        """Stop the switch process; its data plane (eBPF: still forwarding) goes too unless
        `keep_dataplane` (a restart that the next switch adopts)."""
        if self.switch_proc is not None:
            stop_process(self.switch_proc)
            self.switch_proc = None
        if not keep_dataplane:
            with contextlib.suppress(Exception):
                sh("rm", "-rf", str(self.pin_dir), check=False)

    def destroy(self) -> None:
        self.stop_switch()
        self.lab.teardown()

    def switch_died(self) -> str | None:
        """Why the switch this topology started is gone, with its log's tail; None if it runs
        (or was stopped on purpose)."""
        if self.switch_proc is None or (rc := self.switch_proc.poll()) is None:
            return None
        how = f"killed by signal {-rc}" if rc < 0 else f"exited with {rc}"
        return f"the {self.switch} switch {how}; last lines of its output:\n{self.switch_log()[-1500:]}"

    def switch_log(self) -> str:
        p = self.log_dir / f"{self.lab.prefix}-switch.log"
        return p.read_text(errors="replace") if p.exists() else ""


def switch_missing(switch: Switch) -> str | None:
    """Why `switch` cannot run here (what to install or build), or None. A BMv2 JSON compiled
    from other sources than the committed P4Info is not "missing": the harness fails on it."""
    if switch == "ebpf":
        return None if SWITCH_BIN.exists() else f"switch binary {SWITCH_BIN} not built (run `make switch`)"
    if bmv2.binary() is None:
        return (
            f"BMv2 {bmv2.BINARY} is not on PATH: install p4lang's behavioral-model with PI "
            "(p4lang packages or a source build, see README.md) to run these tests on BMv2"
        )
    if not BMV2_JSON.exists():
        return f"{BMV2_JSON} missing: `make p4` compiles it (needs p4c)"
    return None


def wait_tcp(addr: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    import socket

    host, _, port = addr.rpartition(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {addr}")
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=0.5):
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {addr} after {timeout}s")


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 5) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)


def python() -> str:
    return sys.executable

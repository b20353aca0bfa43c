"""Namespaces, veths and processes for the controller's integration tests.

The switch is either target of the same P4 program (`SWITCHES`): the eBPF target
(`supergw-switch`, pipeline built in) or BMv2 `simple_switch_grpc` started with `--no-p4`,
to which the controller pushes the JSON that `make p4` compiled. Both take the same
command line shape, ports and CPU port (255), so everything else is shared.

Layout (all names carry the topology's prefix, `sgw-ctl` unless a module picks its own,
and a per-module tag):

    root ns  --mgmt veth (10.207.<i>.1/30 <-> .2)--  switch ns (the switch, P4Runtime on .2)
                                                     |  p<n> veth ends, one per switch port
              host namespaces   (eth0: MAC, 10.0.0.<x>/24, default route via IP_G)
              gateway namespaces(eth0: MAC, 10.0.0.<y>/24; 192.0.2.1/32 on lo = "the remote site")

The controller runs in the root namespace (P4Runtime over the mgmt veth, REST on
127.0.0.1); its port monitor watches the p<n> interfaces inside the switch namespace.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

# simple_switch_grpc has no default CPU port: both switches get the pipeline's (defines.p4).
from supergw_proto.p4constants import CPU_PORT

# The committed P4Info, and `make p4`'s BMv2 JSON with the P4Info p4c wrote beside it.
from topologies.configs import BMV2_BUILT_P4INFO, BMV2_JSON, P4INFO

REPO = Path(__file__).resolve().parents[3]
SWITCH_BIN = REPO / "targets" / "ebpf" / "bin" / "supergw-switch"
BMV2_BIN = "simple_switch_grpc"  # looked up on PATH, like ptf-tests/run.sh does

Switch = Literal["ebpf", "bmv2"]
SWITCHES: tuple[Switch, ...] = ("ebpf", "bmv2")
PIN_ROOT = "/sys/fs/bpf"
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

    @property
    def sw_ns(self) -> str:
        return f"{self.prefix}-{self.tag}-sw"

    @property
    def mgmt_if(self) -> str:
        return f"{self.prefix}-{self.tag}m"

    @property
    def mgmt_root_ip(self) -> str:
        return f"10.207.{self.index}.1"

    @property
    def mgmt_sw_ip(self) -> str:
        return f"10.207.{self.index}.2"

    @property
    def device_id(self) -> int:
        return 700 + self.index

    @property
    def grpc_addr(self) -> str:
        return f"{self.mgmt_sw_ip}:{50700 + self.index}"

    def exec_sw(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return nsexec(self.sw_ns, *cmd, check=check)

    def hosts(self) -> list[Endpoint]:
        return [e for e in self.endpoints.values() if e.role == "host"]

    def gateways(self) -> list[Endpoint]:
        return [e for e in self.endpoints.values() if e.role == "gateway"]

    # -- build / tear down
    def create(self, hosts: int, gateways: int) -> None:
        self.destroy()
        sh("ip", "netns", "add", self.sw_ns)
        self._quiet(self.sw_ns)
        sh("ip", "link", "add", self.mgmt_if, "type", "veth", "peer", "name", "mgmt", "netns", self.sw_ns)
        sh("ip", "addr", "add", f"{self.mgmt_root_ip}/30", "dev", self.mgmt_if)
        sh("ip", "link", "set", self.mgmt_if, "up")
        nsexec(self.sw_ns, "ip", "addr", "add", f"{self.mgmt_sw_ip}/30", "dev", "mgmt")
        nsexec(self.sw_ns, "ip", "link", "set", "mgmt", "up")
        nsexec(self.sw_ns, "ip", "link", "set", "lo", "up")
        used: set[int] = set()
        for i in range(1, hosts + 1):
            self._endpoint(f"h{i}", "host", port=i, mac=self._host_mac(i, used), ip=f"10.0.0.{10 + i}")
        for i in range(1, gateways + 1):
            ep = self._endpoint(
                f"g{i}", "gateway", port=10 + i, mac=f"52:54:00:{self.index:02x}:01:{i:02x}", ip=f"10.0.0.{1 + i}"
            )
            ep.exec("ip", "addr", "add", f"{REMOTE_IP}/32", "dev", "lo")

    def _host_mac(self, i: int, used: set[int], k: int = 16) -> str:
        """A host MAC whose bucket (for K=k) no other host of this topology has."""
        from supergw_proto.bucket import bucket_of

        for low in range(256):
            mac = f"02:00:{self.index:02x}:{i:02x}:00:{low:02x}"
            if bucket_of(mac, k) not in used:
                used.add(bucket_of(mac, k))
                return mac
        raise RuntimeError("no free bucket")

    def _quiet(self, ns: str) -> None:
        for key in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
            nsexec(ns, "sysctl", "-qw", f"{key}=1", check=False)

    def _endpoint(self, name: str, role: str, port: int, mac: str, ip: str) -> Endpoint:
        ns = f"{self.prefix}-{self.tag}-{name}"
        sh("ip", "netns", "add", ns)
        self._quiet(ns)
        sh("ip", "link", "add", f"p{port}", "netns", self.sw_ns, "type", "veth", "peer", "name", "eth0", "netns", ns)
        nsexec(self.sw_ns, "ip", "link", "set", f"p{port}", "up")
        nsexec(ns, "ip", "link", "set", "eth0", "address", mac)
        nsexec(ns, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
        nsexec(ns, "ip", "link", "set", "eth0", "up")
        nsexec(ns, "ip", "link", "set", "lo", "up")
        if role == "host":
            nsexec(ns, "ip", "route", "add", "default", "via", self.gateway_ip)
        ep = Endpoint(name=name, ns=ns, port=port, mac=mac, ip=ip, role=role)
        self.endpoints[name] = ep
        return ep

    def start_switch(self) -> None:
        assert self.switch_proc is None
        ports: list[str] = []
        for ep in self.endpoints.values():
            ports += ["-i", f"{ep.port}@p{ep.port}"]
        args = ["ip", "netns", "exec", self.sw_ns]
        if self.switch == "ebpf":
            args += [
                str(SWITCH_BIN), "--device-id", str(self.device_id), *ports,
                "--grpc-server-addr", self.grpc_addr,
                "--cpu-port", str(CPU_PORT),
                "--pin-dir", f"{PIN_ROOT}/{self.prefix}-{self.tag}",
            ]  # fmt: skip
        else:
            args += [
                bmv2_binary(), "--device-id", str(self.device_id), *ports, "--no-p4",
                "--log-file", str(self.log_dir / f"{self.prefix}-{self.tag}-bmv2"), "--log-flush",
                "--", "--grpc-server-addr", self.grpc_addr, "--cpu-port", str(CPU_PORT),
            ]  # fmt: skip
        log = open(self.log_dir / f"{self.prefix}-{self.tag}-switch.log", "ab")  # noqa: SIM115
        self.switch_proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        wait_tcp(self.grpc_addr, 15, self.switch_proc)

    def stop_switch(self) -> None:
        if self.switch_proc is not None:
            stop_process(self.switch_proc)
            self.switch_proc = None
        with contextlib.suppress(Exception):
            sh("rm", "-rf", f"{PIN_ROOT}/{self.prefix}-{self.tag}", check=False)

    def destroy(self) -> None:
        self.stop_switch()
        for ns in list_netns():
            if ns.startswith(f"{self.prefix}-{self.tag}-"):
                sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", self.mgmt_if, check=False)

    def switch_died(self) -> str | None:
        """Why the switch this topology started is gone, with its log's tail; None if it runs
        (or was stopped on purpose)."""
        if self.switch_proc is None or (rc := self.switch_proc.poll()) is None:
            return None
        how = f"killed by signal {-rc}" if rc < 0 else f"exited with {rc}"
        return f"the {self.switch} switch {how}; last lines of its output:\n{self.switch_log()[-1500:]}"

    def switch_log(self) -> str:
        p = self.log_dir / f"{self.prefix}-{self.tag}-switch.log"
        return p.read_text(errors="replace") if p.exists() else ""


def bmv2_binary() -> str:
    found = shutil.which(BMV2_BIN)
    if found is None:
        raise RuntimeError(f"{BMV2_BIN} is not on PATH")
    return found


def switch_missing(switch: Switch) -> str | None:
    """Why `switch` cannot run here (what to install or build), or None."""
    if switch == "ebpf":
        return None if SWITCH_BIN.exists() else f"switch binary {SWITCH_BIN} not built (run `make switch`)"
    if shutil.which(BMV2_BIN) is None:
        return (
            f"BMv2 {BMV2_BIN} is not on PATH: install p4lang's behavioral-model with PI "
            "(p4lang packages or a source build, see README.md) to run these tests on BMv2"
        )
    if not BMV2_JSON.exists():
        return f"{BMV2_JSON} missing: `make p4` compiles it (needs p4c)"
    return None


def stale_bmv2_json() -> str | None:
    """Why the compiled JSON does not belong to the committed P4Info, or None.

    `make p4` writes p4c's P4Info beside the JSON; if it differs from the committed one the
    JSON is from other sources than the P4Info the controller loads."""
    if not BMV2_BUILT_P4INFO.exists():
        return f"{BMV2_BUILT_P4INFO} missing: rerun `make p4`"
    if BMV2_BUILT_P4INFO.read_text() != P4INFO.read_text():
        return f"{BMV2_JSON} was compiled from other sources than {P4INFO.name}: rerun `make p4`"
    return None


def list_netns() -> list[str]:
    out = sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


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

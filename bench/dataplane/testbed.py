"""The benchmark's own little network: one switch namespace, one host, two gateways.

    sgw-bench-h  eth0 ── h0 (port 1) ┐
                                     sgw-bench-sw (supergw-switch, P4Runtime 127.0.0.1:9610; or BMv2, 127.0.0.1:9612)
    sgw-bench-g1 eth0 ── g1 (port 2) ┤
    sgw-bench-g2 eth0 ── g2 (port 3) ┘

The gateway ends run an XDP sink (count and drop) so receiving costs almost nothing.
Everything is named sgw-bench-*, and `teardown` removes all of it, also after a crash.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "sgw-bench"
SWITCH_NS = f"{PREFIX}-sw"
HOST_NS = f"{PREFIX}-h"
GATEWAY_NS = (f"{PREFIX}-g1", f"{PREFIX}-g2")
NAMESPACES = (SWITCH_NS, HOST_NS, *GATEWAY_NS)
PIN_DIR = Path("/sys/fs/bpf") / PREFIX
DEVICE_ID = 610
DPBENCH_DEVICE_ID = 611  # sgw-dpbench builds its own namespace and switch
BMV2_DEVICE_ID = 612
BMV2_GRPC_ADDR = "127.0.0.1:9612"
GRPC_ADDR = "127.0.0.1:9610"
HOST_PORT = 1
GATEWAY_PORTS = (2, 3)
GATEWAY_MACS = ("02:be:00:00:00:02", "02:be:00:00:00:03")


class TestbedError(RuntimeError):
    pass


def sh(argv: list[str], netns: str | None = None, check: bool = True, timeout: float = 30) -> str:
    full = ["ip", "netns", "exec", netns, *argv] if netns else argv
    proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise TestbedError(f"`{' '.join(full)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


@dataclass
class Testbed:
    switch_bin: Path
    sink_obj: Path
    log_dir: Path
    switch: subprocess.Popen[bytes] | None = None
    log_name: str = "dataplane-switch.log"
    notes: list[str] = field(default_factory=list)

    def build(self) -> None:
        teardown()
        for ns in NAMESPACES:
            sh(["ip", "netns", "add", ns])
            sh(["ip", "link", "set", "lo", "up"], ns)
        self._veth("h0", "eth0", HOST_NS, None)
        for i, (ns, mac) in enumerate(zip(GATEWAY_NS, GATEWAY_MACS), start=1):
            self._veth(f"g{i}", "eth0", ns, mac)
            sh(["ip", "link", "set", "dev", "eth0", "xdpdrv", "obj", str(self.sink_obj), "sec", "xdp"], ns)
        # Generator frames are complete; no offload work for the stack to defer.
        sh(["ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off"], HOST_NS, check=False)

    def _veth(self, sw_end: str, far_end: str, far_ns: str, mac: str | None) -> None:
        sh(["ip", "link", "add", sw_end, "netns", SWITCH_NS, "type", "veth", "peer", "name", far_end, "netns", far_ns])
        if mac:
            sh(["ip", "link", "set", far_end, "address", mac], far_ns)
        sh(["ip", "link", "set", sw_end, "up"], SWITCH_NS)
        sh(["ip", "link", "set", far_end, "up"], far_ns)

    def start_switch(self) -> None:
        ports = ["-i", f"{HOST_PORT}@h0", "-i", f"{GATEWAY_PORTS[0]}@g1", "-i", f"{GATEWAY_PORTS[1]}@g2"]
        self._start([str(self.switch_bin), "--device-id", str(DEVICE_ID), "--grpc-server-addr", GRPC_ADDR,
                     "--cpu-port", "255", "--pin-dir", str(PIN_DIR), *ports], "dataplane-switch.log")

    def start_bmv2(self, binary: Path, cpus: list[int]) -> None:
        """simple_switch_grpc on the same veths, in the shape docs/environment-notes.md gives,
        but without --log-file/--log-console (a logging BMv2 measures its logger), with all
        its threads on `cpus` (none: wherever the scheduler puts them)."""
        self.stop_switch()
        shutil.rmtree(PIN_DIR, ignore_errors=True)
        ports = ["-i", f"{HOST_PORT}@h0", "-i", f"{GATEWAY_PORTS[0]}@g1", "-i", f"{GATEWAY_PORTS[1]}@g2"]
        pin = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []  # taskset execs: the pid stays BMv2's
        self._start([*pin, str(binary), "--device-id", str(BMV2_DEVICE_ID), *ports, "--no-p4", "--",
                     "--grpc-server-addr", BMV2_GRPC_ADDR, "--cpu-port", "255"], "dataplane-bmv2.log")

    def _start(self, cmd: list[str], log_name: str) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_name = log_name
        argv = ["ip", "netns", "exec", SWITCH_NS, *cmd]
        log = open(self.log_dir / log_name, "wb")
        self.switch = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        log.close()

    def stop_switch(self) -> None:
        if self.switch is None or self.switch.poll() is not None:
            return
        self.switch.send_signal(signal.SIGTERM)
        try:
            self.switch.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.switch.kill()
            self.switch.wait(timeout=5)

    def switch_alive(self) -> bool:
        return self.switch is not None and self.switch.poll() is None

    @property
    def switch_pid(self) -> int | None:
        """The switch process itself (`ip netns exec` execs it in place)."""
        return self.switch.pid if self.switch_alive() and self.switch is not None else None


def sink_frames(ns: str) -> int:
    """Frames the gateway end received (its veth RX counter, XDP_DROPped frames included)."""
    return int(sh(["cat", "/sys/class/net/eth0/statistics/rx_packets"], ns).strip())


def teardown() -> None:
    for ns in NAMESPACES:
        if Path("/run/netns", ns).exists():
            sh(["ip", "netns", "del", ns], check=False)
    if PIN_DIR.exists():
        shutil.rmtree(PIN_DIR, ignore_errors=True)
    # namespace deletion is asynchronous for veths; give the kernel a moment
    time.sleep(0.2)

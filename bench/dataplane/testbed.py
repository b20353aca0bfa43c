"""The benchmark's own little network: a switch lab (topologies/switchlab.py) with one host
and two gateway ends.

    sgw-bench-h  eth0 ── p1 (port 1) ┐
                                     sgw-bench-sw (supergw-switch, P4Runtime 127.0.0.1:9610; or BMv2, 127.0.0.1:9612)
    sgw-bench-g1 eth0 ── p2 (port 2) ┤
    sgw-bench-g2 eth0 ── p3 (port 3) ┘

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

from topologies import iproute
from topologies.switch import SwitchCommand, pin_dir
from topologies.switchlab import Endpoint, SwitchLab

PREFIX = "sgw-bench"
HOST_PORT = 1
GATEWAY_PORTS = (2, 3)
GATEWAY_MACS = ("02:be:00:00:00:02", "02:be:00:00:00:03")
# Generator frames are complete; no offload work for the stack to defer.
LAB = SwitchLab(PREFIX, [Endpoint("h", HOST_PORT, offloads_off=True),
                         *(Endpoint(f"g{i}", port, mac) for i, (port, mac) in enumerate(zip(GATEWAY_PORTS, GATEWAY_MACS), 1))])
SWITCH_NS = LAB.switch_ns
HOST_NS = LAB.ns("h")
GATEWAY_NS = (LAB.ns("g1"), LAB.ns("g2"))
PIN_DIR = pin_dir(PREFIX)
DEVICE_ID = 610
DPBENCH_DEVICE_ID = 611  # sgw-dpbench builds its own namespace and switch
BMV2_DEVICE_ID = 612
BMV2_GRPC_ADDR = "127.0.0.1:9612"
GRPC_ADDR = "127.0.0.1:9610"
CPU_PORT = 255


class TestbedError(RuntimeError):
    pass


def sh(argv: list[str], netns: str | None = None, check: bool = True, timeout: float = 30) -> str:
    try:
        return iproute.run(argv, netns, check=check, timeout=timeout).stdout
    except iproute.NetworkError as exc:
        raise TestbedError(str(exc)) from None


@dataclass
class Testbed:
    switch_bin: Path
    sink_obj: Path
    log_dir: Path
    switch: subprocess.Popen[bytes] | None = None
    log_name: str = "dataplane-switch.log"
    notes: list[str] = field(default_factory=list)

    def build(self) -> None:
        try:
            LAB.build()
        except iproute.NetworkError as exc:
            raise TestbedError(str(exc)) from None
        for ns in GATEWAY_NS:
            sh(["ip", "link", "set", "dev", "eth0", "xdpdrv", "obj", str(self.sink_obj), "sec", "xdp"], ns)

    def start_switch(self) -> None:
        cmd = SwitchCommand("ebpf", DEVICE_ID, GRPC_ADDR, CPU_PORT, LAB.ports(), pin_dir=PIN_DIR, binary=self.switch_bin)
        self._start(cmd.argv(), "dataplane-switch.log")

    def start_bmv2(self, binary: Path, cpus: list[int]) -> None:
        """simple_switch_grpc on the same veths, in the shape docs/environment-notes.md gives,
        but without --log-file/--log-console (a logging BMv2 measures its logger), with all
        its threads on `cpus` (none: wherever the scheduler puts them)."""
        self.stop_switch()
        shutil.rmtree(PIN_DIR, ignore_errors=True)
        cmd = SwitchCommand("bmv2", BMV2_DEVICE_ID, BMV2_GRPC_ADDR, CPU_PORT, LAB.ports(), binary=binary)
        pin = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []  # taskset execs: the pid stays BMv2's
        self._start([*pin, *cmd.argv()], "dataplane-bmv2.log")

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
    return iproute.rx_packets(ns, "eth0")


def teardown() -> None:
    LAB.teardown()
    if PIN_DIR.exists():
        shutil.rmtree(PIN_DIR, ignore_errors=True)
    # namespace deletion is asynchronous for veths; give the kernel a moment
    time.sleep(0.2)

"""The benchmark's own little network: one switch namespace, one host, two gateways.

    sgw-bench-h  eth0 ── h0 (port 1) ┐
                                     sgw-bench-sw (supergw-switch, P4Runtime 127.0.0.1:9610; or BMv2, 127.0.0.1:9612)
    sgw-bench-g1 eth0 ── g1 (port 2) ┤
    sgw-bench-g2 eth0 ── g2 (port 3) ┘

Two cores, two roles. Every veth receives in a NAPI context run by its own kernel thread
(GRO on, which gives a veth NAPI; `threaded` = 1), like a NIC's receive queue:

- the switch's ends (h0, g1, g2) on the switch's core: a frame sent into eth0 is received,
  run through the switch's tc program, redirected and transmitted into the next veth by the
  NAPI thread of the switch's port, on that core and nowhere else. The switch process is
  pinned there too. TSO/GSO are off on these ends: veth hands a forwarded frame to the
  receiving end's NAPI ring only then; otherwise the receiving end's whole receive
  processing (the sink) would run on the switch's core, in the switch's thread.
- the far ends (the host's and the gateways' eth0, where the generator sends and the sinks
  count) on the traffic core, at real-time priority (SCHED_FIFO): counting never loses the
  core to the generator, which spins there.

Every NAPI context re-polls on a timer while frames keep coming (`gro_flush_timeout` 50 us,
`napi_defer_hard_irqs`), like a NIC's interrupt coalescing: the sender does not wake the
receiver's thread for each frame. Everything is named sgw-bench-*, and `teardown` removes
all of it, also after a crash.
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
FAR_END = "eth0"  # the host's and each gateway's interface
SWITCH_IFACES = {HOST_PORT: "h0", GATEWAY_PORTS[0]: "g1", GATEWAY_PORTS[1]: "g2"}
COALESCE_NS = 50_000  # NAPI re-poll period while frames keep coming (a NIC's rx-usecs)
COALESCE_POLLS = 100  # timer-driven polls before the context waits to be woken again
SINK_PRIORITY = 50  # SCHED_FIFO priority of the far ends' NAPI threads


class TestbedError(RuntimeError):
    pass


def sh(argv: list[str], netns: str | None = None, check: bool = True, timeout: float = 30) -> str:
    full = ["ip", "netns", "exec", netns, *argv] if netns else argv
    proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise TestbedError(f"`{' '.join(full)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def _napi_threads() -> dict[int, str]:
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("napi/"):
                out[int(entry.name)] = comm
    return out


def threaded_napi(netns: str, dev: str, cpu: int, fifo_priority: int | None = None) -> list[int]:
    """Give `dev` a coalescing NAPI context (veth: GRO on) run by its own kernel thread,
    pinned to `cpu` (and SCHED_FIFO at `fifo_priority`); returns the thread ids. The threads
    are told apart from other devices' by appearing."""
    before = _napi_threads()
    sh(["ethtool", "-K", dev, "gro", "on"], netns)
    sysfs = f"/sys/class/net/{dev}"
    sh(["sh", "-c", f"echo {COALESCE_NS} > {sysfs}/gro_flush_timeout && echo {COALESCE_POLLS} > "
                    f"{sysfs}/napi_defer_hard_irqs && echo 1 > {sysfs}/threaded"], netns)
    new = [pid for pid, comm in _napi_threads().items() if pid not in before and comm.startswith(f"napi/{dev}-")]
    if not new:
        raise TestbedError(f"{netns}:{dev}: no NAPI thread appeared after `ethtool -K gro on` and threaded=1 "
                           "(veth needs threaded NAPI support: Linux >= 5.12)")
    for pid in new:
        sh(["taskset", "-p", "-c", str(cpu), str(pid)])
        if fifo_priority is not None:
            sh(["chrt", "-f", "-p", str(fifo_priority), str(pid)])
    return new


@dataclass
class Testbed:
    switch_bin: Path
    log_dir: Path
    switch_cpu: int
    traffic_cpu: int
    switch: subprocess.Popen[bytes] | None = None
    log_name: str = "dataplane-switch.log"
    switch_threads: list[int] = field(default_factory=list)  # NAPI threads of h0, g1, g2

    def build(self) -> None:
        teardown()
        for ns in NAMESPACES:
            sh(["ip", "netns", "add", ns])
            # No IPv6 autoconfiguration: the switch namespace's own stack would send router
            # solicitations and MLD reports out of the ports, frames the switch never forwarded.
            sh(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"], ns)
            sh(["ip", "link", "set", "lo", "up"], ns)
        self._veth(SWITCH_IFACES[HOST_PORT], HOST_NS, None)
        for port, ns, mac in zip(GATEWAY_PORTS, GATEWAY_NS, GATEWAY_MACS):
            self._veth(SWITCH_IFACES[port], ns, mac)
        for ns in (HOST_NS, *GATEWAY_NS):
            threaded_napi(ns, FAR_END, self.traffic_cpu, SINK_PRIORITY)
        for dev in SWITCH_IFACES.values():
            sh(["ethtool", "-K", dev, "tso", "off", "gso", "off"], SWITCH_NS)
            self.switch_threads += threaded_napi(SWITCH_NS, dev, self.switch_cpu)

    def _veth(self, sw_end: str, far_ns: str, mac: str | None) -> None:
        sh(["ip", "link", "add", sw_end, "netns", SWITCH_NS, "type", "veth", "peer", "name", FAR_END, "netns", far_ns])
        if mac:
            sh(["ip", "link", "set", FAR_END, "address", mac], far_ns)
        sh(["ip", "link", "set", sw_end, "up"], SWITCH_NS)
        sh(["ip", "link", "set", FAR_END, "up"], far_ns)

    def _ports(self) -> list[str]:
        return [arg for port, dev in SWITCH_IFACES.items() for arg in ("-i", f"{port}@{dev}")]

    def start_switch(self) -> None:
        """supergw-switch with its default flags (only what the deployment must name: device
        id, address, CPU port, pin directory, ports), pinned to the switch's core."""
        self._start(["taskset", "-c", str(self.switch_cpu), str(self.switch_bin), "--device-id", str(DEVICE_ID),
                     "--grpc-server-addr", GRPC_ADDR, "--cpu-port", "255", "--pin-dir", str(PIN_DIR), *self._ports()],
                    "dataplane-switch.log")

    def start_bmv2(self, binary: Path) -> None:
        """simple_switch_grpc on the same veths and core, in the shape docs/environment-notes.md
        gives, but without --log-file/--log-console (a logging BMv2 measures its logger)."""
        self.stop_switch()
        shutil.rmtree(PIN_DIR, ignore_errors=True)
        # taskset execs: the pid stays BMv2's
        self._start(["taskset", "-c", str(self.switch_cpu), str(binary), "--device-id", str(BMV2_DEVICE_ID),
                     *self._ports(), "--no-p4", "--", "--grpc-server-addr", BMV2_GRPC_ADDR, "--cpu-port", "255"],
                    "dataplane-bmv2.log")

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
        """The switch process itself (`ip netns exec` and `taskset` exec it in place)."""
        return self.switch.pid if self.switch_alive() and self.switch is not None else None


def teardown() -> None:
    for ns in NAMESPACES:
        if Path("/run/netns", ns).exists():
            sh(["ip", "netns", "del", ns], check=False)
    if PIN_DIR.exists():
        shutil.rmtree(PIN_DIR, ignore_errors=True)
    # namespace deletion is asynchronous for veths; give the kernel a moment
    time.sleep(0.2)

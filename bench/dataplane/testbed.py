"""The benchmark's own little network: a switch lab (topologies/switchlab.py) with one host
and two gateway ends.

    sgw-bench-h  eth0 ── p1 (port 1) ┐
                                     sgw-bench-sw (supergw-switch, P4Runtime 127.0.0.1:9610; or BMv2, 127.0.0.1:9612)
    sgw-bench-g1 eth0 ── p2 (port 2) ┤
    sgw-bench-g2 eth0 ── p3 (port 3) ┘

Two cores, two roles. Every veth receives in a NAPI context run by its own kernel thread
(GRO on, which gives a veth NAPI; `threaded` = 1), like a NIC's receive queue:

- the switch's ends (p1, p2, p3) on the switch's core: a frame sent into eth0 is received,
  run through the switch's tc program, redirected and transmitted into the next veth by the
  NAPI thread of the switch's port, on that core and nowhere else (TSO is off on the sending
  ends as well: veth bypasses the receiver's NAPI for a socket's frame from a TSO-capable
  device, veth_skb_is_eligible_for_gro). The switch process is
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

from topologies import iproute
from topologies.switch import SwitchCommand, lasting_pin_dir, mount_lasting_pin_root
from topologies.switchlab import Endpoint, SwitchLab

PREFIX = "sgw-bench"
HOST_PORT = 1
GATEWAY_PORTS = (2, 3)
GATEWAY_MACS = ("02:be:00:00:00:02", "02:be:00:00:00:03")
LAB = SwitchLab(PREFIX, [Endpoint("h", HOST_PORT),
                         *(Endpoint(f"g{i}", port, mac) for i, (port, mac) in enumerate(zip(GATEWAY_PORTS, GATEWAY_MACS), 1))])
SWITCH_NS = LAB.switch_ns
HOST_NS = LAB.ns("h")
GATEWAY_NS = (LAB.ns("g1"), LAB.ns("g2"))
FAR_END = "eth0"  # the host's and each gateway's interface
SWITCH_IFACES = LAB.ports()  # P4 port -> the switch's interface
# A bpffs that outlives the switch process, as a deployed switch's /sys/fs/bpf: the restart
# runs (restart.py) replace the process under traffic and the new one adopts the data plane.
PIN_DIR = lasting_pin_dir(PREFIX)
DEVICE_ID = 610
STATE_DIR = Path("/run/supergw-switch") / str(DEVICE_ID)  # the switch's journal (its --state-dir default)
DPBENCH_DEVICE_ID = 611  # sgw-dpbench builds its own namespace and switch
BMV2_DEVICE_ID = 612
BMV2_GRPC_ADDR = "127.0.0.1:9612"
GRPC_ADDR = "127.0.0.1:9610"
CPU_PORT = 255
COALESCE_NS = 50_000  # NAPI re-poll period while frames keep coming (a NIC's rx-usecs)
COALESCE_POLLS = 100  # timer-driven polls before the context waits to be woken again
SINK_PRIORITY = 50  # SCHED_FIFO priority of the far ends' NAPI threads


class TestbedError(RuntimeError):
    pass


def sh(argv: list[str], netns: str | None = None, check: bool = True, timeout: float = 30) -> str:
    try:
        return iproute.run(argv, netns, check=check, timeout=timeout).stdout
    except iproute.NetworkError as exc:
        raise TestbedError(str(exc)) from None


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
    switch_threads: list[int] = field(default_factory=list)  # NAPI threads of the switch's ports

    def build(self) -> None:
        try:
            LAB.build()
        except iproute.NetworkError as exc:
            raise TestbedError(str(exc)) from None
        for ns in (HOST_NS, *GATEWAY_NS):
            # TSO off on the sending ends too: veth hands a frame to the receiving end's NAPI
            # only when it "is eligible for GRO", and a socket's frame (the AF_PACKET TX ring's,
            # destructor sock_wfree) from a TSO-capable veth is not; it would go through the
            # sender's backlog instead, and the switch's work would run on the traffic core.
            sh(["ethtool", "-K", FAR_END, "tso", "off", "gso", "off"], ns)
            threaded_napi(ns, FAR_END, self.traffic_cpu, SINK_PRIORITY)
        for dev in SWITCH_IFACES.values():
            sh(["ethtool", "-K", dev, "tso", "off", "gso", "off"], SWITCH_NS)
            self.switch_threads += threaded_napi(SWITCH_NS, dev, self.switch_cpu)

    def start_switch(self, options: tuple[str, ...] = ()) -> None:
        """supergw-switch with its default flags (only what a deployment must name: device id,
        address, CPU port, pin directory, ports), pinned to the switch's core; `options`: more
        flags (the restart runs' negative control)."""
        mount_lasting_pin_root()
        cmd = SwitchCommand("ebpf", DEVICE_ID, GRPC_ADDR, CPU_PORT, SWITCH_IFACES, pin_dir=PIN_DIR, binary=self.switch_bin,
                            target_options=options)
        self._start(self._pinned(cmd), "dataplane-switch.log")

    def start_bmv2(self, binary: Path) -> None:
        """simple_switch_grpc on the same veths and core, in the shape docs/environment-notes.md
        gives, but without --log-file/--log-console (a logging BMv2 measures its logger)."""
        self.stop_switch()
        teardown_dataplane()  # else the eBPF program stays on the ports, in front of BMv2
        cmd = SwitchCommand("bmv2", BMV2_DEVICE_ID, BMV2_GRPC_ADDR, CPU_PORT, SWITCH_IFACES, binary=binary)
        self._start(self._pinned(cmd), "dataplane-bmv2.log")

    def _pinned(self, cmd: SwitchCommand) -> list[str]:
        return ["taskset", "-c", str(self.switch_cpu), *cmd.argv()]  # taskset execs: the pid stays the switch's

    def _start(self, cmd: list[str], log_name: str) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        argv = ["ip", "netns", "exec", SWITCH_NS, *cmd]
        # A restarted switch appends to its predecessor's log (one story of the run).
        log = open(self.log_dir / log_name, "ab" if self.log_name == log_name and self.switch else "wb")
        self.switch = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self.log_name = log_name
        log.close()

    def stop_switch(self, sig: signal.Signals = signal.SIGTERM) -> None:
        """SIGTERM: supergw-switch exits and leaves its data plane forwarding for the next one
        (unless started with --teardown-on-exit); SIGKILL: a crash."""
        if self.switch is None or self.switch.poll() is not None:
            return
        self.switch.send_signal(sig)
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


def teardown_dataplane() -> None:
    """What an eBPF switch left running when it exited (its pins hold its programs on the
    ports and its maps) and its journal: removing them takes the data plane down."""
    for d in (PIN_DIR, STATE_DIR):
        if d.exists():
            shutil.rmtree(d, ignore_errors=True)


def teardown() -> None:
    LAB.teardown()
    teardown_dataplane()
    # namespace deletion is asynchronous for veths; give the kernel a moment
    time.sleep(0.2)

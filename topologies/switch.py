"""The switch's command line, for both targets of the same P4 program: the eBPF target
(`supergw-switch`, pipeline built in) and BMv2 (`simple_switch_grpc --no-p4`, to which the
controller pushes `make p4`'s JSON). Both take the same ports, device id, P4Runtime address
and CPU port; the emulation, the controller's integration tests and the benchmarks start
their switches from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
import subprocess
from pathlib import Path

from topologies import bmv2
from topologies.model import SwitchKind, Topology
from topologies.network import outside_interfaces, switch_interfaces
from topologies.paths import SWITCH_BIN


def pin_dir(name: str) -> Path:
    """Where an eBPF switch pins its maps and programs (bpffs): one directory per switch.
    Under `ip netns exec` the switch remounts /sys and mounts a bpffs of its own there, which
    goes with the process: its data plane ends when it exits."""
    return Path("/sys/fs/bpf") / name


# A bpffs of this machine's mount namespace. A switch started with `ip netns exec` runs in a
# private mount namespace whose /sys is remounted (pin_dir above): its data plane would end
# with the process. Pins here outlive it, so a restarted (or crashed) switch adopts its
# predecessor's running data plane, as a deployed one does with the host's /sys/fs/bpf
# (targets/ebpf/README.md, "Restart without loss"). The emulation's switches pin here.
LASTING_PIN_ROOT = Path("/run/supergw-bpf")


def lasting_pin_dir(name: str) -> Path:
    """A pin directory that outlives the switch process (`mount_lasting_pin_root` first)."""
    return LASTING_PIN_ROOT / name


def mount_lasting_pin_root() -> None:
    """bpffs at LASTING_PIN_ROOT unless it is one already, in the caller's mount namespace
    (the machine's: call it before starting a switch under `ip netns exec`)."""
    mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    if any(f[1:3] == [str(LASTING_PIN_ROOT), "bpf"] for f in mounts if len(f) > 2):
        return
    LASTING_PIN_ROOT.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "bpf", "-o", "mode=0700", "bpf", str(LASTING_PIN_ROOT)],
                   check=True, capture_output=True, text=True)


@dataclass(frozen=True)
class SwitchCommand:
    kind: SwitchKind
    device_id: int
    grpc_addr: str
    cpu_port: int
    ports: Mapping[int, str]  # P4 port -> interface in the switch's namespace
    pin_dir: Path | None = None  # eBPF: its bpffs directory (required)
    log_level: str | None = None  # eBPF: --log-level; BMv2: of the packet log (with log_file)
    log_file: Path | None = None  # BMv2: its packet log (BMv2 appends .txt); None: no packet log
    binary: Path | None = None  # None: the built supergw-switch, or the first simple_switch_grpc on PATH
    target_options: tuple[str, ...] = ()  # more P4Runtime server options (TLS): both take them after the others

    def argv(self) -> list[str]:
        ports = [a for port, ifname in sorted(self.ports.items()) for a in ("-i", f"{port}@{ifname}")]
        if self.kind == "ebpf":
            if self.pin_dir is None:
                raise ValueError("the eBPF switch needs a pin directory")
            argv = [str(self.binary or SWITCH_BIN), "--device-id", str(self.device_id), "--grpc-server-addr",
                    self.grpc_addr, "--cpu-port", str(self.cpu_port), "--pin-dir", str(self.pin_dir)]
            return argv + (["--log-level", self.log_level] if self.log_level else []) + ports + list(self.target_options)
        exe = self.binary or bmv2.binary()
        if exe is None:
            raise FileNotFoundError(f"{bmv2.BINARY} is not on PATH: {bmv2.INSTALL}")
        argv = [str(exe), "--device-id", str(self.device_id), "--no-p4", *ports]
        if self.log_file is not None:
            argv += ["--log-file", str(self.log_file), "--log-flush"]
            argv += ["--log-level", self.log_level] if self.log_level else []
        # Target options come after `--`.
        return [*argv, "--", "--grpc-server-addr", self.grpc_addr, "--cpu-port", str(self.cpu_port),
                *self.target_options]


def site_command(topo: Topology, logs: Path, target_options: tuple[str, ...] = ()) -> SwitchCommand:
    """The switch of an emulated site: eBPF with info-level logs, or BMv2 with its packet log
    at debug level (`bmv2.log_file`), so a watcher sees each packet's path. `target_options`:
    its P4Runtime TLS flags (`api_tls.switch_options`)."""
    s = topo.switch
    if s.kind == "bmv2":
        return SwitchCommand("bmv2", s.device_id, topo.p4runtime_addr, s.cpu_port, switch_interfaces(topo),
                             log_file=bmv2.log_file(logs).with_suffix(""), log_level=bmv2.LOG_LEVEL,
                             target_options=target_options)
    return SwitchCommand("ebpf", s.device_id, topo.p4runtime_addr, s.cpu_port, switch_interfaces(topo),
                         pin_dir=lasting_pin_dir(topo.prefix), log_level="info", target_options=target_options)


def outside_command(topo: Topology, logs: Path, target_options: tuple[str, ...] = ()) -> SwitchCommand:
    """The outside switch of a remote-access site: the same program and target as its LAN
    switch (the controller assigns the UPLINK and GATEWAY_OUTSIDE roles), P4Runtime on its
    management address (`target_options`: its TLS flags, as the LAN switch's), its own pin
    directory and logs."""
    ra = topo.remote_access
    if ra is None:
        raise ValueError(f"site {topo.prefix} has no outside switch (no remote_access section)")
    s = topo.switch
    if s.kind == "bmv2":
        return SwitchCommand("bmv2", ra.outside.device_id, topo.outside_p4runtime_addr, s.cpu_port,
                             outside_interfaces(topo), log_file=bmv2.log_file(logs, OUTSIDE).with_suffix(""),
                             log_level=bmv2.LOG_LEVEL, target_options=target_options)
    return SwitchCommand("ebpf", ra.outside.device_id, topo.outside_p4runtime_addr, s.cpu_port,
                         outside_interfaces(topo), pin_dir=lasting_pin_dir(outside_pin_name(topo)), log_level="info",
                         target_options=target_options)


OUTSIDE = "outside-switch"


def outside_pin_name(topo: Topology) -> str:
    return f"{topo.prefix}-osw"

"""An in-memory kernel for the tuning tests: just enough of sysctl, ethtool, sysfs, ip and
iptables for the planner, with a failure switch to stand for a crash in the middle."""

from __future__ import annotations

from dataclasses import dataclass, field

from supergw_gateway.executor import Result


class Crash(Exception):
    """Stands for the process dying in the middle of a write."""


@dataclass
class MemKernel:
    """One kernel (a namespace, a guest or the host) held in dicts. Device features are
    per device (`features[dev][name]`); `crash_after` raises `Crash` on that many-th write."""

    where: str = "netns test"
    sysctl: dict[str, str] = field(default_factory=lambda: {
        "net.ipv4.ip_forward": "0", "net.ipv4.udp_rmem_min": "4096", "net.ipv4.tcp_rmem": "4096\t131072\t6291456",
        "net.ipv4.tcp_wmem": "4096 16384 4194304", "net.ipv4.tcp_window_scaling": "1",
        "net.ipv4.tcp_timestamps": "0", "net.ipv4.tcp_sack": "1",
    })
    readonly: set[str] = field(default_factory=set)
    devices: tuple[str, ...] = ("eth0",)
    features: dict[str, dict[str, str]] = field(default_factory=dict)
    sysfs: dict[str, str] = field(default_factory=dict)
    mtu: dict[str, str] = field(default_factory=dict)
    max_mtu: int = 65535
    mss: str | None = None
    identity: str = "boot-1\n4026531992"
    crash_after: int | None = None
    writes: int = 0

    def __post_init__(self) -> None:
        for dev in self.devices:
            self.features.setdefault(dev, {"gro": "off", "gso": "on", "tso": "on"})
            self.mtu.setdefault(dev, "1500")
            for name in ("napi_defer_hard_irqs", "gro_flush_timeout", "queues/rx-0/rps_cpus"):
                self.sysfs.setdefault(f"{dev}/{name}", "0")

    def state(self) -> tuple[object, ...]:
        """Everything a knob can change, to compare before and after."""
        return (dict(self.sysctl), {d: dict(f) for d, f in self.features.items()}, dict(self.sysfs),
                dict(self.mtu), self.mss)

    def _write(self) -> None:
        self.writes += 1
        if self.crash_after is not None and self.writes >= self.crash_after:
            raise Crash(f"crashed at write {self.writes}")

    def run(self, argv: list[str], check: bool = True, timeout: float = 30.0) -> Result:
        cmd = argv[0]
        if cmd == "nproc":
            return Result(0, "2\n", "")
        if cmd == "sysctl" and argv[1] == "-n":
            v = self.sysctl.get(argv[2])
            return Result(0, v + "\n", "") if v is not None else Result(255, "", f"cannot stat {argv[2]}")
        if cmd == "sysctl" and argv[1] == "-qw":
            k, _, v = argv[2].partition("=")
            if k in self.readonly or k not in self.sysctl:
                return Result(255, "", f"permission denied on key {k}")
            self._write()
            self.sysctl[k] = v
            return Result(0, "", "")
        if cmd == "ethtool" and argv[1] == "-k":
            names = {"gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
                     "tso": "tcp-segmentation-offload"}
            if argv[2] not in self.features:
                return Result(1, "", f"no device {argv[2]}")
            return Result(0, "".join(f"{names[f]}: {v}\n" for f, v in self.features[argv[2]].items()), "")
        if cmd == "ethtool" and argv[1] == "-K":
            self._write()
            self.features[argv[2]][argv[3]] = argv[4]
            return Result(0, "", "")
        if cmd == "ethtool" and argv[1] == "-c":
            return Result(1, "", "netlink error: Operation not supported")
        if cmd == "cat":
            rel = argv[1].removeprefix("/sys/class/net/")
            return Result(0, self.sysfs[rel] + "\n", "") if rel in self.sysfs else Result(1, "", "No such file")
        if cmd == "sh" and "boot_id" in argv[2]:
            return Result(0, self.identity + "\n", "")
        if cmd == "sh" and argv[2].startswith("command -v"):
            return Result(0, "/usr/sbin/iptables\n", "")
        if cmd == "sh" and argv[2].startswith("echo "):
            val, path = argv[2][5:].split(" > ")
            self._write()
            self.sysfs[path.strip("'").removeprefix("/sys/class/net/")] = val.strip("'")
            return Result(0, "", "")
        if cmd.startswith("iptables"):
            if "-S" in argv:
                rule = f"-A FORWARD -j TCPMSS --set-mss {self.mss}\n" if self.mss else ""
                return Result(0, "-P FORWARD ACCEPT\n" + rule, "")
            if "-A" in argv:
                self._write()
                self.mss = argv[-1]
            if "-D" in argv:
                self.mss = None
            return Result(0, "", "")
        if cmd == "ip" and argv[1:3] == ["-d", "-o"]:
            dev = argv[-1]
            if dev not in self.mtu:
                return Result(1, "", f'Device "{dev}" does not exist.')
            return Result(0, f"2: {dev}: <UP> mtu {self.mtu[dev]} qdisc noqueue maxmtu {self.max_mtu}\n", "")
        if cmd == "ip" and argv[1:3] == ["link", "set"]:
            self._write()
            self.mtu[argv[4]] = argv[6]
            return Result(0, "", "")
        return Result(127, "", f"{cmd}: unknown")

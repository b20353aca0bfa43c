"""The cabling: one network namespace per machine and host, veths between them, bridges for
the shared segments (management, WAN, remote LAN). Made and removed with iproute2.

Everything is prefixed `pkgdt-` (namespaces, and the host-side names while a veth is made).
Addresses of management NICs and of the LAN/remote hosts are set here, as a DHCP server or
the data centre's provisioning would; the gateways put their own LAN/WAN addresses on (from
their config), the switch's ports carry none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sgwdeploy.host import sh

PREFIX = "pkgdt-"


@dataclass(frozen=True)
class End:
    netns: str  # without the prefix
    device: str
    mac: str | None = None
    address: str | None = None  # CIDR


def ns(name: str) -> str:
    return PREFIX + name


def ip(netns: str | None, *args: str) -> None:
    sh(["ip", *(["-n", ns(netns)] if netns else []), *args])


def add_namespace(name: str) -> None:
    if not Path("/run/netns", ns(name)).exists():
        sh(["ip", "netns", "add", ns(name)])
    ip(name, "link", "set", "lo", "up")
    # IPv4 only: a host's first frame then carries its IPv4 source to the controller's learning.
    for knob in ("all", "default"):
        sh(["ip", "netns", "exec", ns(name), "sysctl", "-qw", f"net.ipv6.conf.{knob}.disable_ipv6=1"])


def add_bridge(segment: str) -> None:
    add_namespace(segment)
    ip(segment, "link", "add", "br0", "type", "bridge")
    ip(segment, "link", "set", "br0", "up")


def cable(index: int, a: End, b: End) -> None:
    """Veth number `index` between a.netns/a.device and b.netns/b.device (b.device br0: a bridge port)."""
    ta, tb = f"{PREFIX}a{index}", f"{PREFIX}b{index}"
    sh(["ip", "link", "add", ta, "type", "veth", "peer", "name", tb])
    for tmp, end in ((ta, a), (tb, b)):
        sh(["ip", "link", "set", tmp, "netns", ns(end.netns)])
        if end.device == "br0":
            port = f"to-{a.netns}-{a.device}"[:15]
            ip(end.netns, "link", "set", tmp, "name", port)
            ip(end.netns, "link", "set", port, "master", "br0", "up")
            continue
        ip(end.netns, "link", "set", tmp, "name", end.device)
        if end.mac:
            ip(end.netns, "link", "set", end.device, "address", end.mac)
        if end.address:
            ip(end.netns, "addr", "add", end.address, "dev", end.device)
        ip(end.netns, "link", "set", end.device, "up")


def remove_all() -> None:
    """Every pkgdt- namespace (their veths go with them)."""
    for p in sorted(Path("/run/netns").glob(PREFIX + "*")) if Path("/run/netns").is_dir() else []:
        sh(["ip", "netns", "del", p.name], check=False)

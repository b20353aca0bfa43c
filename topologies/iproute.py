"""iproute2 building blocks for namespaces, veths, bridges and addresses.

Every namespace-building piece of the project uses these: the emulation's sites
(network.py) and the small switch labs of the controller's integration tests and the
benchmarks (switchlab.py). Each veth is created directly inside its two namespaces
(`ip link add A netns X type veth peer name B netns Y`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

# TX checksum offload on a veth leaves checksums for the receiving NIC to fill in;
# frames redirected by XDP/tc bypass that, so hosts and gateways compute them in software.
OFFLOADS_OFF = ("tx", "off", "tso", "off", "gso", "off")


class NetworkError(RuntimeError):
    """An iproute2 command failed while building a network."""


def run(argv: list[str], netns: str | None = None, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`argv`, inside `netns` when given; NetworkError naming the command when it fails and `check`."""
    full = ["ip", "netns", "exec", netns, *argv] if netns else argv
    proc = subprocess.run(full, capture_output=True, text=True, check=False, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetworkError(f"`{' '.join(full)}` failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
    return proc


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def link_exists(name: str, netns: str | None = None) -> bool:
    return run(["ip", "link", "show", "dev", name], netns, check=False).returncode == 0


def list_netns() -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def add_netns(name: str) -> None:
    """A namespace with lo up and IPv6 off: IPv4-only nodes stay silent in IPv6, so a host's
    first frame is ARP or IPv4, which the switch's learning digest carries its IP from (an ND
    frame would not); a dual-stack node turns it back on for its interface (`ipv6_on`)."""
    run(["ip", "netns", "add", name])
    run(["ip", "link", "set", "lo", "up"], name)
    for scope in ("all", "default"):
        run(["sysctl", "-q", "-w", f"net.ipv6.conf.{scope}.disable_ipv6=1"], name)


def del_netns(name: str) -> bool:
    """Deletes `name` if it exists (its veths go with it); whether it existed."""
    if not netns_exists(name):
        return False
    run(["ip", "netns", "del", name], check=False)
    return True


def del_link(name: str, netns: str | None = None) -> bool:
    if not link_exists(name, netns):
        return False
    run(["ip", "link", "del", name], netns, check=False)
    return True


def veth(a: str, a_ns: str | None, b: str, b_ns: str | None, *, b_mac: str | None = None) -> None:
    """A veth pair `a` (in `a_ns`, None: this namespace) <-> `b` (in `b_ns`), both up."""
    a_where = ["netns", a_ns] if a_ns else []
    b_where = ["netns", b_ns] if b_ns else []
    run(["ip", "link", "add", a, *a_where, "type", "veth", "peer", "name", b, *b_where])
    if b_mac is not None:
        run(["ip", "link", "set", b, "address", b_mac], b_ns)
    run(["ip", "link", "set", a, "up"], a_ns)
    run(["ip", "link", "set", b, "up"], b_ns)


def addr(netns: str | None, dev: str, ip: object, prefixlen: int) -> None:
    run(["ip", "addr", "replace", f"{ip}/{prefixlen}", "dev", dev], netns)


def default_route(netns: str, via: object) -> None:
    run(["ip", "route", "replace", "default", "via", str(via)], netns)


def ipv6_on(netns: str, dev: str, *, accept_ra: bool = True) -> None:
    """IPv6 back on for `dev` of a dual-stack node (add_netns turns it off), as a stock host
    has it: link-local address, and Router Advertisements accepted unless `accept_ra` is False."""
    for key, value in ((f"net.ipv6.conf.{dev}.disable_ipv6", "0"), (f"net.ipv6.conf.{dev}.accept_ra", str(int(accept_ra)))):
        run(["sysctl", "-q", "-w", f"{key}={value}"], netns)


def addr6(netns: str, dev: str, ip: object, prefixlen: int = 64) -> None:
    """A configured IPv6 address (no duplicate address detection: the topology makes it unique)."""
    run(["ip", "-6", "addr", "replace", f"{ip}/{prefixlen}", "dev", dev, "nodad"], netns)


def default_route6(netns: str, via: object) -> None:
    run(["ip", "-6", "route", "replace", "default", "via", str(via)], netns)


def bridge(netns: str, ports: list[str]) -> None:
    """`br0` in `netns` with `ports` enslaved, no STP, no forwarding delay."""
    run(["ip", "link", "add", "br0", "type", "bridge"], netns)
    run(["ip", "link", "set", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0"], netns)
    for port in ports:
        enslave(netns, port)
    run(["ip", "link", "set", "br0", "up"], netns)


def enslave(netns: str, port: str) -> None:
    run(["ip", "link", "set", port, "master", "br0"], netns)


def forwarding(netns: str) -> None:
    """A router: IPv4 forwarding on, reverse-path filtering off (tunnels and asymmetric paths)."""
    for key, value in {"net.ipv4.conf.all.rp_filter": "0", "net.ipv4.conf.default.rp_filter": "0",
                       "net.ipv4.ip_forward": "1"}.items():
        run(["sysctl", "-q", "-w", f"{key}={value}"], netns)


def offloads_off(netns: str, dev: str) -> None:
    run(["ethtool", "-K", dev, *OFFLOADS_OFF], netns, check=False)


def rx_packets(netns: str, dev: str) -> int:
    """Frames `dev` in `netns` received (its RX counter, dropped-by-XDP frames included)."""
    return int(run(["cat", f"/sys/class/net/{dev}/statistics/rx_packets"], netns).stdout.strip())

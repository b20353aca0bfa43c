"""A switch lab: one switch namespace with one endpoint namespace per switch port, and
optionally a management link from this machine to the switch namespace. The controller's
integration tests and the controller and data-plane benchmarks each build one, with their
own prefix (so several can exist at once, and with `make run`):

    <prefix>-sw             the switch's namespace: p<port> per endpoint, `mgmt` (with a management link)
    <prefix>-<endpoint>     eth0 (MAC, address, default route as given) <-> p<port>
    <prefix>-m0             this machine's end of the management link (root namespace)

Compared with an emulated site (network.py) there are no gateways with tunnels, no WAN and
no management bridge: the endpoints only send and receive frames on their switch port,
which is what those tests and benchmarks measure. `teardown` removes every namespace of the
prefix and the management link, also after a crash.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from topologies import iproute
from topologies.iproute import addr, offloads_off, run, veth
from topologies.model import Prefixed


@dataclass(frozen=True)
class Endpoint:
    """A namespace with eth0 on switch port `port`."""

    name: str  # its namespace is <prefix>-<name>
    port: int
    mac: str | None = None  # None: the kernel's random one
    address: str | None = None  # "10.0.0.11/24"
    route_via: str | None = None  # default route
    loopback: tuple[str, ...] = ()  # extra /32 addresses on lo (a remote site to answer pings)
    offloads_off: bool = False  # frames sent from here carry their checksums (generators, raw sockets)


@dataclass(frozen=True)
class MgmtLink:
    """A /30 between this machine (`<prefix>-m0`, .1) and the switch namespace (`mgmt`, .2)."""

    subnet: ipaddress.IPv4Network

    @property
    def root_ip(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def switch_ip(self) -> str:
        return str(self.subnet.network_address + 2)


@dataclass
class SwitchLab(Prefixed):
    prefix: str
    endpoints: list[Endpoint] = field(default_factory=list)
    mgmt: MgmtLink | None = None

    def ports(self) -> dict[int, str]:
        """P4 port -> the switch's interface for it."""
        return {ep.port: f"p{ep.port}" for ep in sorted(self.endpoints, key=lambda e: e.port)}

    def endpoint(self, name: str) -> Endpoint:
        return next(ep for ep in self.endpoints if ep.name == name)

    def build(self) -> None:
        """Every namespace, veth and address (after removing a crashed lab of this prefix)."""
        if len(self.mgmt_root_if) > 15:
            raise ValueError(f"lab prefix {self.prefix!r} is too long for the interface {self.mgmt_root_if!r}")
        self.teardown()
        iproute.add_netns(self.switch_ns)
        if self.mgmt is not None:
            plen = self.mgmt.subnet.prefixlen
            veth(self.mgmt_root_if, None, "mgmt", self.switch_ns)
            addr(None, self.mgmt_root_if, self.mgmt.root_ip, plen)
            addr(self.switch_ns, "mgmt", self.mgmt.switch_ip, plen)
        for ep in self.endpoints:
            ns = self.ns(ep.name)
            iproute.add_netns(ns)
            veth(f"p{ep.port}", self.switch_ns, "eth0", ns, b_mac=ep.mac)
            if ep.address is not None:
                addr(ns, "eth0", ep.address.split("/")[0], int(ep.address.split("/")[1]))
            if ep.route_via is not None:
                iproute.default_route(ns, ep.route_via)
            for ip in ep.loopback:
                addr(ns, "lo", ip, 32)
            if ep.offloads_off:
                offloads_off(ns, "eth0")

    def teardown(self) -> list[str]:
        """Every namespace of this prefix and the management link; what was removed."""
        removed = [ns for ns in iproute.list_netns() if ns.startswith(f"{self.prefix}-") and iproute.del_netns(ns)]
        if iproute.del_link(self.mgmt_root_if):
            removed.append(self.mgmt_root_if)
        return removed

    def exec(self, name: str, *argv: str, check: bool = True) -> str:
        """`argv` in endpoint `name`'s namespace ("sw": the switch's); its output."""
        return run(list(argv), self.ns(name), check=check).stdout

    def rx_packets(self, name: str) -> int:
        return iproute.rx_packets(self.ns(name), "eth0")

    def set_link(self, name: str, up: bool) -> None:
        run(["ip", "link", "set", "eth0", "up" if up else "down"], self.ns(name))

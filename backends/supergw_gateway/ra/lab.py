"""A remote-access lab on one machine, for tests (every box its own network namespace):

    client i ─┐                      ┌─ wan0  gateway k  lan0 ── host k
    client j ─┴─ brc  [ net ]  brg ──┤
                                     └─ wan0  gateway m  lan0 ── host m

`net` routes between the clients' networks (brc: 10.77.0.0/24, and 10.76.0.0/24 to move to)
and the gateways' outside (brg: 10.78.0.0/24). It stands in for the outside switch: a public
address held by one gateway is routed to it; one held by several goes by the client's source
address (`route_client`), the way the switch pins a client. Names: `sgw-ra-<tag>-…`.

With `shared_lan` the gateways share one LAN (10.80.0.0/24, a bridge in host 0's namespace,
host 10.80.0.2, gateway k at 10.80.0.10+k), as behind the LAN switch, and the host routes each
gateway's pool to a gateway of the test's choice (`route_pool`), as the switch's
`client_pools` does: what a takeover test needs. `replicating_lab` builds that lab with the
gateways' state replication configured (a listener each, mutual TLS from a CA of its own), as the
takeover test and the replication benchmark use it; `take_down` removes it again.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supergw_gateway import netns
from supergw_gateway.charon import Retransmit
from supergw_gateway.config import GatewayConfig, parse_config
from supergw_gateway.executor import LocalExecutor
from supergw_gateway.pki import Leaf, issue, make_ca, make_demo_pki
from supergw_gateway.ra.client import ClientConfig
from supergw_gateway.ra.config import cluster_spi_plan
from supergw_gateway.runtime import Gateway

CLIENT_NET = ipaddress.IPv4Network("10.77.0.0/24")
MOVE_NET = ipaddress.IPv4Network("10.76.0.0/24")
OUTSIDE_NET = ipaddress.IPv4Network("10.78.0.0/24")
SERVICE_ID = "vpn.sgw.test"
WAN_DEV, LAN_DEV, CLIENT_DEV, HOST_DEV = "wan0", "lan0", "eth0", "eth0"
PSK = "sgw-ra-lab-site-to-site-0123456789"
# The outside router's table for gateway k's public address (source-routed clients).
TABLE_BASE = 100


@dataclass(frozen=True)
class LabGateway:
    """Gateway k: its public address, and the remote_access keys besides the lab's own."""

    public: ipaddress.IPv4Address
    remote_access: dict[str, Any] = field(default_factory=dict)


@dataclass
class RaLab:
    tag: str
    gateways: list[LabGateway]
    clients: int
    state_dir: Path
    client_dpd_s: int = 10
    client_retransmit: Retransmit = field(default_factory=lambda: Retransmit(tries=4, timeout_s=1.0, base=1.4))
    shared_lan: bool = False
    _pki: dict[str, Path] = field(default_factory=dict)

    # -- names and addresses ---------------------------------------------------------------
    @property
    def net_ns(self) -> str:
        return f"sgw-ra-{self.tag}-net"

    def gw_ns(self, k: int) -> str:
        return f"sgw-ra-{self.tag}-g{k}"

    def host_ns(self, k: int) -> str:
        return f"sgw-ra-{self.tag}-h{k}"

    def client_ns(self, i: int) -> str:
        return f"sgw-ra-{self.tag}-c{i}"

    def gw_name(self, k: int) -> str:
        return f"{self.tag}-g{k}"

    @property
    def probe_ns(self) -> str:
        return f"sgw-ra-{self.tag}-probe"

    def client_name(self, i: int) -> str:
        return f"{self.tag}-c{i}"

    def gw_wan(self, k: int) -> ipaddress.IPv4Address:
        return OUTSIDE_NET.network_address + 10 + k

    def lan(self, k: int) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network("10.80.0.0/24" if self.shared_lan else f"10.80.{k}.0/24")

    def gw_lan(self, k: int) -> ipaddress.IPv4Interface:
        net = self.lan(k)
        return ipaddress.IPv4Interface(f"{net.network_address + (10 + k if self.shared_lan else 1)}/{net.prefixlen}")

    def host_ip(self, k: int) -> ipaddress.IPv4Address:
        return self.lan(k).network_address + 2

    def pool(self, k: int) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"10.90.{k}.0/24")

    def client_address(self, i: int, net: ipaddress.IPv4Network = CLIENT_NET) -> ipaddress.IPv4Interface:
        return ipaddress.IPv4Interface(f"{net.network_address + 10 + i}/{net.prefixlen}")

    @staticmethod
    def router(net: ipaddress.IPv4Network) -> ipaddress.IPv4Address:
        return net.network_address + 1

    # -- building --------------------------------------------------------------------------
    def create(self) -> None:
        self.destroy()
        host = LocalExecutor()
        netns.create(self.net_ns)
        net = LocalExecutor(self.net_ns)
        self.add_router_client_side()
        net.run(["ip", "link", "add", "brg", "type", "bridge"])
        net.run(["ip", "addr", "add", f"{self.router(OUTSIDE_NET)}/{OUTSIDE_NET.prefixlen}", "dev", "brg"])
        net.run(["ip", "link", "set", "brg", "up"])
        for k, g in enumerate(self.gateways):
            netns.create(self.gw_ns(k))
            host.run(["ip", "link", "add", "name", f"g{k}", "netns", self.net_ns, "type", "veth",
                      "peer", "name", WAN_DEV, "netns", self.gw_ns(k)])
            net.run(["ip", "link", "set", f"g{k}", "master", "brg", "up"])
            # Up in the gateway's namespace too: a UML guest's NICs are raw sockets on them.
            LocalExecutor(self.gw_ns(k)).run(["ip", "link", "set", WAN_DEV, "up"])
            if self.shared_lan:
                self.add_shared_lan_port(k)
            else:
                self.add_lan_host(k)
        for public in {g.public for g in self.gateways}:
            owners = [k for k, g in enumerate(self.gateways) if g.public == public]
            if len(owners) == 1:
                net.run(["ip", "route", "replace", f"{public}/32", "via", str(self.gw_wan(owners[0]))])
            for k in owners:
                net.run(["ip", "route", "replace", f"{public}/32", "via", str(self.gw_wan(k)),
                         "table", str(TABLE_BASE + k)])
        for i in range(self.clients):
            self.add_client_link(i)

    def add_router_client_side(self) -> None:
        """In the router's namespace (which must exist): the clients' bridge brc with the
        router's addresses on the client networks, forwarding, and no way to the gateways' own
        addresses."""
        net = LocalExecutor(self.net_ns)
        net.run(["ip", "link", "add", "brc", "type", "bridge"])
        for n in (CLIENT_NET, MOVE_NET):
            net.run(["ip", "addr", "add", f"{self.router(n)}/{n.prefixlen}", "dev", "brc"])
        net.run(["ip", "link", "set", "brc", "up"])
        net.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"])
        # Like the outside switch, which forwards only the public addresses: the gateways' own
        # addresses are not reachable from the clients (else MOBIKE path probing could move a
        # client onto a gateway's WAN address, which the gateway lists in ADDITIONAL_*_ADDRESS).
        for n in (CLIENT_NET, MOVE_NET):
            net.run(["ip", "rule", "add", "from", str(n), "to", str(OUTSIDE_NET), "prohibit", "priority", "100"])

    def add_lan_host(self, k: int) -> None:
        """Host k's namespace on gateway k's LAN side (the gateway's namespace must exist)."""
        netns.create(self.host_ns(k))
        LocalExecutor().run(["ip", "link", "add", "name", LAN_DEV, "netns", self.gw_ns(k), "type", "veth",
                             "peer", "name", HOST_DEV, "netns", self.host_ns(k)])
        h = LocalExecutor(self.host_ns(k))
        h.run(["ip", "link", "set", HOST_DEV, "up"])
        h.run(["ip", "addr", "add", f"{self.host_ip(k)}/24", "dev", HOST_DEV])
        h.run(["ip", "route", "add", "default", "via", str(self.lan(k).network_address + 1)])

    def add_shared_lan_port(self, k: int) -> None:
        """Gateway k's lan0 on the shared LAN's bridge (host 0's namespace, made with the first),
        and the host's route to gateway k's pool through gateway k."""
        h = LocalExecutor(self.host_ns(0))
        if k == 0:
            netns.create(self.host_ns(0))
            h.run(["ip", "link", "add", "br0", "type", "bridge"])
            h.run(["ip", "addr", "add", f"{self.host_ip(0)}/{self.lan(0).prefixlen}", "dev", "br0"])
            h.run(["ip", "link", "set", "br0", "up"])
        LocalExecutor().run(["ip", "link", "add", "name", LAN_DEV, "netns", self.gw_ns(k), "type", "veth",
                             "peer", "name", f"g{k}", "netns", self.host_ns(0)])
        h.run(["ip", "link", "set", f"g{k}", "master", "br0", "up"])
        LocalExecutor(self.gw_ns(k)).run(["ip", "link", "set", LAN_DEV, "up"])
        self.route_pool(k, k)

    def route_pool(self, k: int, via: int) -> None:
        """Shared LAN: the host reaches gateway k's pool through gateway `via`."""
        LocalExecutor(self.host_ns(0)).run(["ip", "route", "replace", str(self.pool(k)), "via",
                                            str(self.gw_lan(via).ip)])

    def add_client_link(self, i: int) -> None:
        """Client i's namespace on the router's client bridge (brc)."""
        netns.create(self.client_ns(i))
        LocalExecutor().run(["ip", "link", "add", "name", f"c{i}", "netns", self.net_ns, "type", "veth",
                             "peer", "name", CLIENT_DEV, "netns", self.client_ns(i)])
        LocalExecutor(self.net_ns).run(["ip", "link", "set", f"c{i}", "master", "brc", "up"])

    def destroy(self) -> None:
        netns.delete(self.probe_ns)
        for i in range(self.clients):
            netns.delete(self.client_ns(i))
        for k in range(len(self.gateways)):
            netns.delete(self.gw_ns(k))
            netns.delete(self.host_ns(k))  # shared LAN: host 0 only; the others never exist
        netns.delete(self.net_ns)

    def route_client(self, address: ipaddress.IPv4Interface, k: int) -> None:
        """Packets from `address` to a shared public address go to gateway k (a pin; an
        earlier pin of the address is replaced)."""
        net = LocalExecutor(self.net_ns)
        prio = str(1000 + int(address.ip) % 30000)
        net.run(["ip", "rule", "del", "priority", prio], check=False)
        net.run(["ip", "rule", "add", "from", f"{address.ip}/32", "lookup", str(TABLE_BASE + k), "priority", prio])

    def add_probe(self) -> LocalExecutor:
        """A host on the gateways' outside segment (10.78.0.200), e.g. to ask ARP for IP_P."""
        ns = self.probe_ns
        netns.create(ns)
        LocalExecutor().run(["ip", "link", "add", "name", "probe", "netns", self.net_ns, "type", "veth",
                             "peer", "name", HOST_DEV, "netns", ns])
        LocalExecutor(self.net_ns).run(["ip", "link", "set", "probe", "master", "brg", "up"])
        p = LocalExecutor(ns)
        p.run(["ip", "link", "set", HOST_DEV, "up"])
        p.run(["ip", "addr", "add", f"{OUTSIDE_NET.network_address + 200}/{OUTSIDE_NET.prefixlen}", "dev", HOST_DEV])
        return p

    def path_down(self, i: int) -> None:
        """An outage the client does not see: its link stays up, the network drops it."""
        LocalExecutor(self.net_ns).run(["ip", "link", "set", f"c{i}", "down"])

    def path_up(self, i: int) -> None:
        LocalExecutor(self.net_ns).run(["ip", "link", "set", f"c{i}", "up"])

    # -- configs ---------------------------------------------------------------------------
    def pki(self) -> dict[str, Path]:
        if not self._pki:
            ids = [SERVICE_ID, *(f"{self.client_name(i)}.sgw.test" for i in range(self.clients))]
            self._pki = make_demo_pki(self.state_dir / "pki", ids)
        return self._pki

    def gateway_dict(self, k: int, **overrides: Any) -> dict[str, Any]:
        files = self.pki()
        g = self.gateways[k]
        ra: dict[str, Any] = {
            "public": {"address": str(g.public)},
            "pool": str(self.pool(k)),
            "spi": cluster_spi_plan(k).model_dump(),
            "auth": {"cacert": str(files["ca.crt"]), "cert": str(files[f"{SERVICE_ID}.crt"]),
                     "key": str(files[f"{SERVICE_ID}.key"]), "id": SERVICE_ID},
            **g.remote_access,
        }
        lan = self.lan(k)
        return {
            "name": self.gw_name(k),
            "namespace": self.gw_ns(k),
            "backend": "libipsec",
            "interfaces": [
                {"role": "lan", "device": LAN_DEV, "address": str(self.gw_lan(k))},
                {"role": "wan", "device": WAN_DEV, "address": f"{self.gw_wan(k)}/{OUTSIDE_NET.prefixlen}"},
            ],
            "routes": [{"destination": "0.0.0.0/0", "via": str(self.router(OUTSIDE_NET))}],
            "local": {"address": str(self.gw_wan(k)), "subnets": [str(lan)], "id": f"{self.gw_name(k)}.sgw.test"},
            # The site-to-site side exists in every gateway config; here nobody answers there.
            "remote": {"address": str(OUTSIDE_NET.network_address + 250), "subnets": [f"10.99.{k}.0/24"]},
            "auth": {"method": "psk", "psk": PSK},
            "initiate": False,
            "state_dir": str(self.state_dir / "gw"),
            "remote_access": ra,
            **overrides,
        }

    def gateway_config(self, k: int, **overrides: Any) -> GatewayConfig:
        return parse_config(self.gateway_dict(k, **overrides), f"ra lab {self.tag}/g{k}")

    def client_config(self, i: int, k: int) -> ClientConfig:
        files = self.pki()
        ident = f"{self.client_name(i)}.sgw.test"
        return ClientConfig(
            name=self.client_name(i), netns=self.client_ns(i), device=CLIENT_DEV,
            address=self.client_address(i), gateway=self.router(CLIENT_NET), server=self.gateways[k].public,
            server_id=SERVICE_ID, identity=ident, cacert=files["ca.crt"], cert=files[f"{ident}.crt"],
            key=files[f"{ident}.key"], subnets=(self.lan(k),), run_dir=self.state_dir / "clients" / self.client_name(i),
            dpd_delay_s=self.client_dpd_s, retransmit=self.client_retransmit,
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def replicating_lab(tag: str, gateways: int, public: ipaddress.IPv4Address, *, clients: int, state_dir: Path,
                    tls_dir: Path, ca_name: str,
                    remote_access: Callable[[int], dict[str, Any]] = lambda k: {}) -> RaLab:
    """A shared-LAN lab (not created yet) of `gateways` gateways sharing the public address, whose
    clients run without DPD (strongSwan's default). Each gateway replicates its remote-access SAs:
    a listener on a free local port and, for mutual TLS, a peer certificate named after it from
    the CA `ca_name` in `tls_dir` (made there unless it exists); `remote_access(k)` gives gateway
    k's other remote_access keys."""
    make_ca(tls_dir, ca_name)
    lab = RaLab(tag, [LabGateway(public) for _ in range(gateways)], clients=clients, state_dir=state_dir,
                client_dpd_s=0, shared_lan=True)
    for k in range(gateways):
        name = lab.gw_name(k)
        issue(tls_dir, Leaf("peer", name, name, (name,)))
        tls = {"cert": str(tls_dir / f"{name}.crt"), "key": str(tls_dir / f"{name}.key"), "ca": str(tls_dir / "ca.crt")}
        lab.gateways[k] = LabGateway(public, {**remote_access(k),
                                              "replication": {"listen": f"127.0.0.1:{free_port()}", "tls": tls}})
    return lab


def take_down(lab: RaLab, gws: Sequence[Gateway], progress: Callable[[str], object] = print) -> None:
    """Every gateway down (one that fails to go down is reported, the others still go down),
    then the lab's namespaces."""
    for gw in gws:
        try:
            gw.down()
        except Exception as exc:  # keep cleaning
            progress(f"cleanup {gw.cfg.name}: {exc}")
    lab.destroy()

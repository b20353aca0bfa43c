"""A two-site lab on one machine, for tests and benchmarks.

    host-a ── gw-a ══ WAN ══ gw-b ── host-b      (every box its own network namespace)

Every namespace and device is named `sgw-gw-<tag>-…`. Gateways are namespaces running
charon (libipsec/xfrm) or namespaces hosting a UML guest (backend uml).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supergw_gateway import netns
from supergw_gateway.config import Backend, GatewayConfig, parse_config
from supergw_gateway.executor import LocalExecutor

LAN_DEV, WAN_DEV, HOST_DEV = "sgw-gw-lan", "sgw-gw-wan", "sgw-gw-eth0"


@dataclass
class Site:
    key: str  # "a" or "b"
    lan: ipaddress.IPv4Network
    wan_ip: str

    @property
    def gw_lan_ip(self) -> str:
        return str(self.lan.network_address + 1)

    @property
    def host_ip(self) -> str:
        return str(self.lan.network_address + 2)


@dataclass
class Lab:
    tag: str
    backend: Backend
    state_dir: Path = Path("/run/sgw-gw")
    psk: str = "sgw-gw-lab-secret-0123456789"
    wan: ipaddress.IPv4Network = ipaddress.IPv4Network("198.51.100.0/24")
    sites: dict[str, Site] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sites = {
            "a": Site("a", ipaddress.IPv4Network("10.201.1.0/24"), "198.51.100.1"),
            "b": Site("b", ipaddress.IPv4Network("10.201.2.0/24"), "198.51.100.2"),
        }

    def gw_ns(self, k: str) -> str:
        return f"sgw-gw-{self.tag}-g{k}"

    def host_ns(self, k: str) -> str:
        return f"sgw-gw-{self.tag}-h{k}"

    def gw_name(self, k: str) -> str:
        return f"{self.tag}-{k}"

    def config_dict(self, k: str, **overrides: Any) -> dict[str, Any]:
        me, peer = self.sites[k], self.sites["b" if k == "a" else "a"]
        d: dict[str, Any] = {
            "name": self.gw_name(k),
            "namespace": self.gw_ns(k),
            "backend": self.backend.value,
            "interfaces": [
                {"role": "lan", "device": LAN_DEV, "address": f"{me.gw_lan_ip}/{me.lan.prefixlen}"},
                {"role": "wan", "device": WAN_DEV, "address": f"{me.wan_ip}/{self.wan.prefixlen}"},
            ],
            "local": {"address": me.wan_ip, "subnets": [str(me.lan)], "id": f"gw-{k}.sgw.test"},
            "remote": {"address": peer.wan_ip, "subnets": [str(peer.lan)], "id": f"gw-{'b' if k == 'a' else 'a'}.sgw.test"},
            "auth": {"method": "psk", "psk": self.psk},
            "initiate": k == "a",
            "state_dir": str(self.state_dir),
        }
        d.update(self.extra)
        d.update(overrides)
        return d

    def config(self, k: str, **overrides: Any) -> GatewayConfig:
        return parse_config(self.config_dict(k, **overrides), f"lab {self.tag}/{k}")

    def create(self) -> None:
        """Namespaces, veths and host addresses (gateway addresses are the gateway's job)."""
        self.destroy()
        for k in ("a", "b"):
            netns.create(self.gw_ns(k))
            netns.create(self.host_ns(k))
        host = LocalExecutor()
        host.run(["ip", "link", "add", "name", WAN_DEV, "netns", self.gw_ns("a"), "type", "veth",
                  "peer", "name", WAN_DEV, "netns", self.gw_ns("b")])
        for k, site in self.sites.items():
            host.run(["ip", "link", "add", "name", LAN_DEV, "netns", self.gw_ns(k), "type", "veth",
                      "peer", "name", HOST_DEV, "netns", self.host_ns(k)])
            for ns, dev in ((self.gw_ns(k), LAN_DEV), (self.gw_ns(k), WAN_DEV), (self.host_ns(k), HOST_DEV)):
                LocalExecutor(ns).run(["ip", "link", "set", dev, "up"])
            h = LocalExecutor(self.host_ns(k))
            h.run(["ip", "addr", "add", f"{site.host_ip}/{site.lan.prefixlen}", "dev", HOST_DEV])
            h.run(["ip", "route", "add", "default", "via", site.gw_lan_ip])

    def destroy(self) -> None:
        for k in ("a", "b"):
            netns.delete(self.gw_ns(k))
            netns.delete(self.host_ns(k))

    def host(self, k: str) -> LocalExecutor:
        return LocalExecutor(self.host_ns(k))

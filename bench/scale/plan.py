"""What bench/scale runs: the points (gateways x hosts), the one-site topology of each gateway
count (data for the emulation engine), and each point's simulated hosts.

The site is `make run`'s one-site system grown: N gateways, each with its own peer and
real strongSwan tunnel, their agents, the controller with its shipped defaults, K = 4096
buckets, a dual-stack LAN of a /15 (room for 65,536 simulated hosts beside the namespace
hosts and gateways), one namespace host for the failover probe and one remote host. The
switch serves P4Runtime on its management address, so the benchmark reads the switch's
tables from this machine's namespace (a stream-less session: it never arbitrates).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from supergw_proto.addresses import mac_offset

PREFIX = "sgw-scale"
FULL_GATEWAYS = (4, 8, 16, 32)
FULL_HOSTS = (1000, 5000, 20000, 50000)
QUICK_GATEWAYS = (4,)
QUICK_HOSTS = (1000,)
BUCKETS = 4096
DEVICE_ID = 840
GRPC_PORT = 9559

LAN = ipaddress.IPv4Network("10.64.0.0/15")
LAN6 = ipaddress.IPv6Network("fd00:64::/64")
GATEWAY_IP = LAN.network_address + 1
REMOTE = ipaddress.IPv4Network("10.66.0.0/24")
REMOTE6 = ipaddress.IPv6Network("fd00:66::/64")
WAN = ipaddress.IPv4Network("198.51.100.0/24")
MGMT = ipaddress.IPv4Network("10.255.64.0/24")
CONTROLLER_IP = MGMT.network_address + 2
# The simulated hosts of every point start here; each point has MACs of its own.
SIM_FIRST_IP = LAN.network_address + 256  # 10.64.1.0: past the namespace hosts and gateways
SIM_PORT = 200
PROBE_HOST = "h1"


@dataclass(frozen=True)
class Point:
    gateways: int
    hosts: int

    @property
    def label(self) -> str:
        return f"N={self.gateways} H={self.hosts}"


def points(gateways: tuple[int, ...], hosts: tuple[int, ...]) -> list[Point]:
    """Every (N, H), by N then H: one boot per gateway count."""
    return [Point(n, h) for n in gateways for h in hosts]


def p4runtime_addr() -> str:
    """Where the switch serves P4Runtime: its management address (the controller, in the switch's
    namespace, dials it there too)."""
    return f"{CONTROLLER_IP}:{GRPC_PORT}"


def sim_first_mac(index: int) -> str:
    """Host 0's MAC of the `index`-th set of simulated hosts: every set has its own 2^16 block."""
    return mac_offset("02:64:10:00:00:00", index << 16)


def sim_first_ip6() -> str:
    """Host 0's IPv6 address: its IPv4 address's twin in the LAN's /64, as the emulation gives it."""
    return str(LAN6.network_address + (int(SIM_FIRST_IP) - int(LAN.network_address)))


def topology(gateways: int, switch: str) -> dict[str, Any]:
    """The one-site topology (`kind: site`, topologies/schema.py) of `gateways` gateways."""
    if not 1 <= gateways <= 32:
        raise ValueError(f"{gateways} gateways: bench/scale runs 1..32")
    gws = []
    for i in range(1, gateways + 1):
        gws.append({
            "name": f"gw{i}", "port": 10 + i, "lan_ip": str(LAN.network_address + 100 + i),
            "mac": mac_offset("02:64:00:00:01:00", i), "wan_ip": str(WAN.network_address + i),
            "mgmt_ip": str(MGMT.network_address + 100 + i),  # .31-.33: the controller replicas' (HA)
            "peer": {"name": f"peer{i}", "wan_ip": str(WAN.network_address + 100 + i),
                     "lan_ip": str(REMOTE.network_address + 200 + i)},
        })
    return {
        "prefix": PREFIX,
        "switch": {"kind": switch, "device_id": DEVICE_ID, "grpc_addr": p4runtime_addr(), "cpu_port": 255},
        "lan": {"subnet": str(LAN), "gateway_ip": str(GATEWAY_IP), "subnet6": str(LAN6),
                "vmac_base": "02:5e:64:00:00:00", "buckets": BUCKETS},
        "hosts": [{"name": PROBE_HOST, "port": 1, "ip": str(LAN.network_address + 11), "mac": "02:64:00:00:00:11"}],
        "gateways": gws,
        "wan": {"subnet": str(WAN)},
        "remote": {"subnet": str(REMOTE), "subnet6": str(REMOTE6),
                   # Two remote hosts, returning through different peers: a failover probe uses the one
                   # whose return path does not cross the frozen gateway (faults.probe_pair).
                   "hosts": [{"name": "r1", "ip": str(REMOTE.network_address + 11), "via": "peer1"},
                             {"name": "r2", "ip": str(REMOTE.network_address + 12), "via": "peer2"}]},
        "mgmt": {"subnet": str(MGMT), "host_ip": str(MGMT.network_address + 1), "controller_ip": str(CONTROLLER_IP)},
        # The engine's own hostsim (one host, checked at boot); each point starts its own set.
        "simulated_hosts": {"count": 1, "port": SIM_PORT, "first_ip": str(SIM_FIRST_IP),
                            "first_mac": "02:64:0f:ff:00:00"},
    }


def write_topology(gateways: int, switch: str, directory: Path) -> Path:
    path = directory / f"scale-{gateways}.yaml"
    path.write_text(yaml.safe_dump(topology(gateways, switch), sort_keys=False))
    return path

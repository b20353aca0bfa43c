"""The tuning profile of the tuning paper §5, split by role and by knob group (groups.py).

Gateway (forwarding, encapsulating ESP): jumbo MTU where the path allows and MSS clamping
for the tunnel overhead (§5, §5.3); interrupt coalescing and NAPI deferral (§5.2); GRO/GSO/
TSO so each traversal of the IPsec path carries more bytes (§5); RPS and a larger backlog to
spread and absorb softirq work (§4 found softirq dominant); UDP socket buffers for
UDP-encapsulated ESP. TCP endpoints: socket buffers 87380/4194304/4194304, window scaling,
timestamps, SACK (§5.1), and a jumbo MTU where the path is declared to take it (§5.3).
IP forwarding is not a knob: a gateway that does not forward is broken, not untuned, so
`up` sets it unconditionally.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from supergw_gateway.tuning.groups import ALL_GROUPS, Group
from supergw_gateway.tuning.knobs import KnobSet

Role = Literal["gateway", "endpoint"]

TCP_BUF = "87380 4194304 4194304"  # §5.1: min, default, max
CORE_BUF_MAX = "4194304"
UDP_RMEM_DEFAULT = "4194304"
COALESCE_RX_USECS = "50"
NAPI_DEFER_HARD_IRQS = "2"
GRO_FLUSH_TIMEOUT_NS = "20000"
BACKLOG = "5000"
NETDEV_BUDGET = "600"
# Tunnel-mode ESP, AES-GCM: outer IPv4 20 + UDP (NAT-T/libipsec) 8 + ESP 8 + IV 8 + pad/trailer 2..5 + ICV 16.
ESP_OVERHEAD = 20 + 8 + 8 + 8 + 5 + 16
LIBIPSEC_TUN_MTU = 1400

# Sysctls that exist once per kernel: a network namespace cannot set them.
HOST_WIDE = frozenset({
    "net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.wmem_default",
    "net.core.netdev_max_backlog", "net.core.netdev_budget", "net.ipv4.udp_mem", "net.ipv4.tcp_mem",
    "net.core.rps_sock_flow_entries",
})


@dataclass(frozen=True)
class ProfileInput:
    role: Role
    where: str  # label of the executor: "netns X" or "uml guest Y"
    whole_kernel: bool  # True in a UML guest (or on a real box): host-wide knobs belong to it
    devices: list[str] = field(default_factory=list)
    cpus: int = 1
    libipsec: bool = False
    wan_device: str | None = None
    wan_mtu: int = 1500
    path_mtu: dict[str, int] = field(default_factory=dict)  # devices whose path allows a larger MTU
    host_wide: bool = False  # also set host-wide knobs on the host (shared by every namespace)
    groups: tuple[Group, ...] = ALL_GROUPS  # which knobs (tuning/groups.py)
    # A UML guest's NICs ride veths in the namespace around it: a larger MTU must be set
    # there too, or the veth drops the guest's big frames. The label of that namespace.
    outer: str | None = None


def mss_for(inp: ProfileInput) -> int:
    if inp.libipsec:
        return LIBIPSEC_TUN_MTU - 40
    # A declared jumbo path lets the tunnel carry jumbo packets; otherwise the configured
    # WAN MTU (clamping lower is always safe).
    wan_mtu = inp.path_mtu.get(inp.wan_device or "", inp.wan_mtu)
    return wan_mtu - ESP_OVERHEAD - 40


def build(inp: ProfileInput) -> KnobSet:
    ks = KnobSet()
    want = set(inp.groups)

    def sysctl(group: Group, key: str, value: str, why: str, floor: bool = False) -> None:
        extra = {"floor": "1"} if floor else {}
        if key in HOST_WIDE and not inp.whole_kernel:
            ks.add(group, "sysctl", value, why, "host" if inp.host_wide else inp.where,
                   key=key, where="host" if inp.host_wide else "nowhere", **extra)
        else:
            ks.add(group, "sysctl", value, why, inp.where, key=key, where="here", **extra)

    def device_mtu(dev: str, undeclared: bool) -> None:
        scope = f"device {dev} in {inp.where}"
        if dev not in inp.path_mtu:
            if undeclared:
                ks.add("mtu", "mtu", "jumbo", "§5.3 jumbo frames where the path allows", scope, dev=dev,
                       where="undeclared")
            return
        mtu = str(inp.path_mtu[dev])
        if inp.outer is not None:  # first the veth under the guest's NIC, so no frame is dropped
            ks.add("mtu", "mtu", mtu, "§5.3 jumbo frames: the veth carrying the UML guest's NIC",
                   f"device {dev} in {inp.outer}", dev=dev, want=mtu, where="outer", follows="here")
        ks.add("mtu", "mtu", mtu, "§5.3 jumbo frames where the path allows", scope, dev=dev, want=mtu, where="here")

    if inp.role == "endpoint":
        if "tcp" in want:
            for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
                sysctl("tcp", key, TCP_BUF, "§5.1 socket buffers")
            for key in ("net.ipv4.tcp_window_scaling", "net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack"):
                sysctl("tcp", key, "1", "§5.1 TCP extensions")
            sysctl("tcp", "net.core.rmem_max", CORE_BUF_MAX, "§5.1 socket buffer ceiling", floor=True)
            sysctl("tcp", "net.core.wmem_max", CORE_BUF_MAX, "§5.1 socket buffer ceiling", floor=True)
        if "mtu" in want:
            for dev in inp.path_mtu:
                device_mtu(dev, undeclared=False)
        return ks

    if "esp_socket" in want:
        why = "UDP-encapsulated ESP socket buffer"
        sysctl("esp_socket", "net.core.rmem_default", UDP_RMEM_DEFAULT, why, floor=True)
        sysctl("esp_socket", "net.core.rmem_max", CORE_BUF_MAX, why, floor=True)
        sysctl("esp_socket", "net.core.wmem_max", CORE_BUF_MAX, why, floor=True)
        sysctl("esp_socket", "net.ipv4.udp_rmem_min", "16384", why, floor=True)
    if "softirq" in want:
        sysctl("softirq", "net.core.netdev_max_backlog", BACKLOG, "§4/§5.2 softirq backlog", floor=True)
        sysctl("softirq", "net.core.netdev_budget", NETDEV_BUDGET, "§5.2 NAPI poll budget", floor=True)
    if "mtu" in want:
        ks.add("mtu", "mss-clamp", str(mss_for(inp)), "§5/§5.3 MSS clamped to the tunnel MTU", inp.where, where="here")
    rps_mask = format((1 << max(1, inp.cpus)) - 1, "x")
    for dev in inp.devices:
        scope = f"device {dev} in {inp.where}"
        if "offloads" in want:
            for feat in ("gro", "gso", "tso"):
                ks.add("offloads", "ethtool-feature", "on", "§5 more bytes per IPsec traversal", scope,
                       dev=dev, feature=feat, where="here")
        if "coalescing" in want:
            ks.add("coalescing", "ethtool-coalesce", COALESCE_RX_USECS, "§5.2 interrupt coalescing", scope,
                   dev=dev, param="rx-usecs", where="here")
            ks.add("coalescing", "sysfs", NAPI_DEFER_HARD_IRQS, "§5.2 NAPI: defer hard IRQs while polling", scope,
                   path=f"{dev}/napi_defer_hard_irqs", where="here")
            ks.add("coalescing", "sysfs", GRO_FLUSH_TIMEOUT_NS, "§5.2 NAPI: GRO flush timeout", scope,
                   path=f"{dev}/gro_flush_timeout", where="here")
        if "softirq" in want:
            ks.add("softirq", "sysfs", rps_mask, "§4 spread softirq over CPUs (RPS)", scope,
                   path=f"{dev}/queues/rx-0/rps_cpus", where="here")
        if "mtu" in want:
            device_mtu(dev, undeclared=True)
    return ks

"""The knob groups of the tuning profile: one per knob of the tuning paper (and per addition
of ours), so a config can ask for some and a benchmark can measure each on its own.

`GatewayGroup` is what a gateway's config may list under `tuning.knobs`; `EndpointGroup` is
what only TCP endpoints take (a gateway forwards TCP, it does not terminate it).
"""

from __future__ import annotations

from typing import Literal, get_args

GatewayGroup = Literal["coalescing", "mtu", "offloads", "softirq", "esp_socket"]
EndpointGroup = Literal["tcp", "mtu"]
Group = Literal["tcp", "coalescing", "mtu", "offloads", "softirq", "esp_socket"]

GATEWAY_GROUPS: tuple[GatewayGroup, ...] = get_args(GatewayGroup)
ENDPOINT_GROUPS: tuple[EndpointGroup, ...] = get_args(EndpointGroup)
ALL_GROUPS: tuple[Group, ...] = get_args(Group)

# What each group holds and where the paper stands on it: the text of the benchmark's table.
SECTION: dict[Group, str] = {
    "tcp": "§5.1 TCP stack of the endpoints: buffers 87380/4194304/4194304, window scaling, timestamps, SACK",
    "coalescing": "§5.2 interrupt coalescing and NAPI: rx-usecs, napi_defer_hard_irqs, gro_flush_timeout",
    "mtu": "§5.3 jumbo MTU on every hop that takes it, TCP MSS clamped to the tunnel's MTU",
    "offloads": "§5 more bytes per IPsec traversal: GRO, GSO, TSO",
    "softirq": "§4 softirq dominates: RPS over the CPUs, larger netdev backlog and NAPI budget",
    "esp_socket": "ours: UDP socket buffers for UDP-encapsulated ESP (libipsec's one ESP socket)",
}


def parse_groups(text: str) -> tuple[Group, ...]:
    """`a,b` or `all` -> the groups, in profile order; ValueError naming the unknown ones."""
    asked = [g.strip() for g in text.split(",") if g.strip()]
    if asked == ["all"]:
        return ALL_GROUPS
    unknown = [g for g in asked if g not in ALL_GROUPS]
    if unknown or not asked:
        raise ValueError(f"unknown knob group(s) {unknown or [text]}: choose from {', '.join(ALL_GROUPS)} or 'all'")
    return tuple(g for g in ALL_GROUPS if g in asked)

"""Fill the Tofino PRE's L2 exclusion (prune) table so floods skip their ingress port.

Run once after bf_switchd has loaded the supergw pipeline (needs the SDE), with the
device ports that carry traffic (those of the controller config's `ports:`):

    SUPERGW_PORTS=132,140,148,156 $SDE/run_bfshell.sh -b $PWD/p4src/tna/pre_prune.py

For every port p it writes XID(p) -> {p} into bfrt `$pre.prune`; FloodPruning in the P4
program sets a flood's level2_exclusion_id to XID(ingress port), so the PRE never makes
the copy that would go back out of it. The XID is the port's compact number
pipe * 72 + port-in-pipe (the prune table has one entry per port), from the 9-bit device
port pipe << 7 | port-in-pipe. Idempotent: an existing entry is modified.
"""

from __future__ import annotations

import os

PORTS_PER_PIPE = 72
PIPES = 4


def l2_xid(dev_port: int) -> int:
    """The L2 exclusion ID of a device port, as FloodPruning computes it."""
    pipe, port_in_pipe = dev_port >> 7, dev_port & 0x7F
    if not 0 <= dev_port < 512 or pipe >= PIPES or port_in_pipe >= PORTS_PER_PIPE:
        raise ValueError(f"{dev_port} is not a Tofino device port (pipe << 7 | 0..71, pipe 0..3)")
    return pipe * PORTS_PER_PIPE + port_in_pipe


def parse_ports(text: str) -> list[int]:
    """SUPERGW_PORTS: comma- or space-separated device ports."""
    ports = [int(p, 0) for p in text.replace(",", " ").split()]
    if not ports:
        raise ValueError("SUPERGW_PORTS is empty: list the device ports of the controller config")
    for p in ports:
        l2_xid(p)
    return ports


def program(pre: object, ports: list[int]) -> None:
    """Write the prune entries through bfrt_python's `bfrt.pre` node."""
    prune = getattr(pre, "prune")
    for p in ports:
        try:
            prune.entry(MULTICAST_L2_XID=l2_xid(p), DEV_PORT=[p]).push()
        except Exception:  # noqa: BLE001 - bfrt_python raises plain exceptions; retry as modify
            prune.mod(MULTICAST_L2_XID=l2_xid(p), DEV_PORT=[p])
        print(f"supergw: $pre.prune XID {l2_xid(p)} -> port {p}")


if "bfrt" in globals():  # inside bfshell's bfrt_python
    program(globals()["bfrt"].pre, parse_ports(os.environ.get("SUPERGW_PORTS", "")))

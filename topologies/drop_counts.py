"""A switch's drop counters by reason, read over P4Runtime (a Read needs no arbitration, so it
disturbs no controller): `python -m topologies.drop_counts ADDR DEVICE_ID` prints
{"REASON": packets, ...} as JSON. Run it where ADDR is reachable (the switch's namespace);
`unknown_port_drops(site)` does so for both switches of a remote-access site."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import TYPE_CHECKING

from finsy import P4CounterEntry

from supergw_p4rt.schema import load_schema
from supergw_p4rt.session import P4RuntimeSession
from supergw_proto import p4constants as pc
from topologies.paths import P4INFO, REPO

if TYPE_CHECKING:
    from topologies.site import Site


def read(addr: str, device_id: int) -> dict[str, int]:
    schema = load_schema(P4INFO)
    session = P4RuntimeSession(addr, device_id, 1, schema)
    try:
        ents = session.read([P4CounterEntry(pc.COUNTER_DROP_COUNTER)])
    finally:
        session.close()
    out: dict[str, int] = {}
    for e in ents:
        c = P4CounterEntry.decode(e, schema)
        if c.index is not None and c.index < len(pc.DropReason):
            out[pc.DropReason(c.index).name] = int(c.packet_count)
    return out


def unknown_port_drops(site: Site) -> int:
    """Frames the LAN and the outside switch dropped because their ingress port has no role (a
    fenced gateway's), read from the switch namespace, where both P4Runtime servers are reachable."""
    topo = site.topo
    if topo.remote_access is None:
        raise ValueError(f"site {site.prefix} has no outside switch")
    total = 0
    for addr, device in ((topo.p4runtime_addr, topo.switch.device_id),
                         (topo.outside_p4runtime_addr, topo.remote_access.outside.device_id)):
        out = subprocess.run(["ip", "netns", "exec", topo.switch_ns, sys.executable, "-m", "topologies.drop_counts",
                              addr, str(device)], capture_output=True, text=True, cwd=REPO, check=True, timeout=30)
        total += int(json.loads(out.stdout).get(pc.DropReason.UNKNOWN_PORT.name, 0))
    return total


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m topologies.drop_counts ADDR DEVICE_ID", file=sys.stderr)
        return 2
    print(json.dumps(read(argv[0], int(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

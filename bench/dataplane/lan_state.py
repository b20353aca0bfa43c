"""The P4Runtime state the controller holds for the benchmark LAN, written the way it writes it.

    python -m bench.dataplane.lan_state --addr A --device-id N --p4info F [--device-config F] --lan FILE

Run inside the switch's namespace. Pushes the pipeline, then what the controller's reconcile
and learning would have written by the time the LAN is in use: `settings` (with the
benchmark's bucket hash, `frames.BUCKET_HASH`), `port_roles`, the host flood group, the learn
digest config, every bucket assigned over the gateways by the controller's own initial
assignment (smooth weighted round robin, equal weights), and every host learned by the
controller's own `HostTable` (`mac_table`, `learned_sources` with the default ageing as idle
timeout, `host_ips`). A dual-stack LAN (`gateway_ip6`) also gets `nd_settings` (the gateway's
link-local and global addresses), the IPv6 learn digest config, and every host's IPv6 address
learned as the controller learns it (`learned_ip6s`, `host_ip6s`). The entities come from the
controller's builders, so names and values are the controller's. Prints `{"updates": n}` on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from finsy import P4ClientError, Switch, SwitchOptions

from bench.dataplane.frames import BUCKET_HASH
from supergw_controller.assignment import weighted_round_robin
from supergw_controller.config import TimingConfig
from supergw_controller.learning import HostTable
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.entities import Op, Update
from supergw_proto import p4constants as pc

ELECTION_ID = 100  # any: the benchmark's clients take turns, never at once


@dataclass(frozen=True)
class Gateway:
    name: str
    port: int
    mac: str


@dataclass(frozen=True)
class Lan:
    """The benchmark topology, handed over as JSON."""

    host_port: int
    gateways: list[Gateway]
    hosts: list[tuple[str, str]]  # (MAC, IPv4)
    gateway_ip: str
    vmac_base: str
    buckets: int
    # Dual stack: the gateway's (link-local, global) IPv6 addresses and each host's IPv6 address.
    gateway_ip6: tuple[str, str] | None = None
    host_ip6s: list[tuple[str, str]] = field(default_factory=list)  # (MAC, IPv6)

    @classmethod
    def from_json(cls, text: str) -> Lan:
        raw = json.loads(text)
        raw["gateways"] = [Gateway(**g) for g in raw["gateways"]]
        raw["hosts"] = [(str(mac), str(ip)) for mac, ip in raw["hosts"]]
        if raw.get("gateway_ip6") is not None:
            ll, gua = raw["gateway_ip6"]
            raw["gateway_ip6"] = (str(ll), str(gua))
        raw["host_ip6s"] = [(str(mac), str(ip6)) for mac, ip6 in raw.get("host_ip6s", [])]
        return cls(**raw)

    def to_json(self) -> str:
        return json.dumps({**vars(self), "gateways": [vars(g) for g in self.gateways]})

    def assignment(self) -> dict[int, Gateway]:
        """bucket -> gateway, as the controller assigns K buckets to equal gateways at start."""
        by_name = {g.name: g for g in self.gateways}
        spread = weighted_round_robin(range(self.buckets), dict.fromkeys(by_name, 1.0))
        return {b: by_name[name] for b, name in spread.items()}


def updates(lan: Lan) -> list[Update]:
    out = [
        Update(Op.MODIFY, ent.settings(lan.gateway_ip, lan.vmac_base, lan.buckets - 1, BUCKET_HASH)),
        Update(Op.INSERT, ent.port_role(lan.host_port, pc.PortRole.HOST)),
        *(Update(Op.INSERT, ent.port_role(g.port, pc.PortRole.GATEWAY)) for g in lan.gateways),
        Update(Op.INSERT, ent.flood_group([lan.host_port])),
        Update(Op.INSERT, ent.learn_digest()),
        *(Update(Op.INSERT, ent.bucket(b, g.port, g.mac)) for b, g in sorted(lan.assignment().items())),
    ]
    if lan.gateway_ip6 is not None:
        ll, gua = (ipaddress.IPv6Address(a) for a in lan.gateway_ip6)
        out += [Update(Op.MODIFY, ent.nd_settings(ll, gua)), Update(Op.INSERT, ent.learn_ip6_digest())]
    ageing_ns = int(TimingConfig.model_fields["ageing_s"].default * 1e9)
    table = HostTable({lan.host_port}, lan.gateway_ip, ip_wait_s=0, gateway_ip6s=frozenset(lan.gateway_ip6 or ()))
    for mac, ip in lan.hosts:
        out.extend(ent.host_update(w, ageing_ns) for w in table.learn(mac, lan.host_port, ip, now=0.0))
    for mac, ip6 in lan.host_ip6s:
        out.extend(ent.host_update(w, ageing_ns) for w in table.learn_ip6(mac, lan.host_port, ip6, now=0.0))
    return out


async def write(addr: str, device_id: int, p4info: Path, device_config: bytes, batch: list[Update]) -> None:
    # finsy pushes the pipeline when it has a device config; the eBPF target needs none, so
    # an empty one makes the P4Info authoritative (as in the controller's session).
    opts = SwitchOptions(p4info=p4info, p4blob=device_config, device_id=device_id, initial_election_id=ELECTION_ID)
    async with Switch("bench", addr, opts) as sw:
        await sw.write([+u.entity if u.op is Op.INSERT else ~u.entity for u in batch])


def parser_for(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """The options of every P4Runtime client of the benchmark: the switch and the LAN."""
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", required=True)
    parser.add_argument("--device-id", type=int, required=True)
    parser.add_argument("--p4info", type=Path, required=True)
    parser.add_argument("--lan", type=Path, required=True, help="JSON file of bench.dataplane.lan_state.Lan")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("python -m bench.dataplane.lan_state", __doc__)
    parser.add_argument("--device-config", type=Path, help="target config for the pipeline push (BMv2 JSON)")
    args = parser.parse_args(argv)
    try:
        lan = Lan.from_json(args.lan.read_text())
        batch = updates(lan)
        device_config = args.device_config.read_bytes() if args.device_config else b""
        asyncio.run(asyncio.wait_for(write(args.addr, args.device_id, args.p4info, device_config, batch), 60))
    except (KeyError, TypeError, ValueError, OSError) as exc:
        print(f"lan_state: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, (KeyError, TypeError, json.JSONDecodeError)) else 1
    except (P4ClientError, TimeoutError) as exc:
        print(f"lan_state: P4Runtime {args.addr}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"updates": len(batch)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

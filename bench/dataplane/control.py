"""P4Runtime side of the dataplane benchmark, run inside the switch's namespace.

    python -m bench.dataplane.control setup  --addr A --device-id N --p4info F --spec JSON
    python -m bench.dataplane.control move   --addr A --device-id N --p4info F --spec JSON --writes 200

`setup` pushes the pipeline and the entries that let host->gateway frames through
(settings, port roles, every bucket -> the gateway, the source MAC already learned).
`move` MODIFYs one bucket entry back and forth between two gateway ports and prints
the per-write latencies (send to Write reply) as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import grpc
from finsy import P4TableAction, P4TableEntry, P4TableMatch
from finsy.proto import p4r
from supergw_p4rt import INSERT, MODIFY, P4RuntimeClientError, P4RuntimeSession, load_schema
from supergw_proto import p4constants as p4c

from bench.dataplane.frames import BUCKET_HASH


@dataclass(frozen=True)
class Spec:
    """What the benchmark topology looks like, handed over as JSON."""

    host_port: int
    gateway_ports: list[int]
    gateway_macs: list[str]
    host_macs: list[str]
    gateway_ip: str
    vmac_base: str
    buckets: int
    role_host: int
    role_gateway: int


def _role(port: int, role: int) -> P4TableEntry:
    return P4TableEntry(
        p4c.TABLE_PORT_ROLES,
        match=P4TableMatch({p4c.MATCH_PORT_ROLES_PORT: port}),
        action=P4TableAction(p4c.ACTION_SET_PORT_ROLE, **{p4c.PARAM_SET_PORT_ROLE_ROLE: role}),
    )


def _bucket(bucket: int, port: int, mac: str) -> P4TableEntry:
    params = {p4c.PARAM_SET_GATEWAY_PORT: port, p4c.PARAM_SET_GATEWAY_GATEWAY_MAC: mac}
    return P4TableEntry(
        p4c.TABLE_BUCKETS,
        match=P4TableMatch({p4c.MATCH_BUCKETS_BUCKET: bucket}),
        action=P4TableAction(p4c.ACTION_SET_GATEWAY, **params),
    )


def _learned(mac: str, port: int) -> P4TableEntry:
    return P4TableEntry(
        p4c.TABLE_LEARNED_SOURCES,
        match=P4TableMatch({p4c.MATCH_LEARNED_SOURCES_SRC_MAC: mac, p4c.MATCH_LEARNED_SOURCES_PORT: port}),
        action=P4TableAction(p4c.ACTION_MARK_KNOWN),
    )


def setup_updates(session: P4RuntimeSession, spec: Spec) -> list[p4r.Update]:
    dispatch = {
        p4c.PARAM_SET_DISPATCH_CONFIG_GATEWAY_IP: spec.gateway_ip,
        p4c.PARAM_SET_DISPATCH_CONFIG_VMAC_BASE: spec.vmac_base,
        p4c.PARAM_SET_DISPATCH_CONFIG_BUCKET_MASK: spec.buckets - 1,
        p4c.PARAM_SET_DISPATCH_CONFIG_BUCKET_HASH: int(BUCKET_HASH),
    }
    settings = P4TableEntry(
        p4c.TABLE_SETTINGS, is_default_action=True, action=P4TableAction(p4c.ACTION_SET_DISPATCH_CONFIG, **dispatch)
    )
    roles = [_role(spec.host_port, spec.role_host)] + [_role(port, spec.role_gateway) for port in spec.gateway_ports]
    buckets = [_bucket(b, spec.gateway_ports[0], spec.gateway_macs[0]) for b in range(spec.buckets)]
    learned = [_learned(mac, spec.host_port) for mac in spec.host_macs]
    return session.updates(MODIFY, [settings]) + session.updates(INSERT, roles + buckets + learned)


def move(session: P4RuntimeSession, spec: Spec, writes: int, bucket: int) -> list[float]:
    """Alternate bucket `bucket` between the gateways; latency of each MODIFY in ms."""
    moves = [
        session.updates(MODIFY, [_bucket(bucket, port, mac)]) for port, mac in zip(spec.gateway_ports, spec.gateway_macs)
    ]
    for warmup in moves * 5:
        session.write(warmup)
    return [session.write(moves[(i + 1) % len(moves)]) * 1000.0 for i in range(writes)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dataplane.control")
    parser.add_argument("command", choices=("setup", "move"))
    parser.add_argument("--addr", required=True)
    parser.add_argument("--device-id", type=int, required=True)
    parser.add_argument("--p4info", type=Path, required=True)
    parser.add_argument("--spec", required=True, help="JSON of bench.dataplane.control.Spec")
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--bucket", type=int, default=0)
    parser.add_argument("--device-config", type=Path, help="target config for the pipeline push (BMv2 JSON)")
    args = parser.parse_args(argv)
    spec = Spec(**json.loads(args.spec))
    try:
        schema = load_schema(args.p4info, args.device_config.read_bytes() if args.device_config else b"")
        with P4RuntimeSession(args.addr, args.device_id, 100, schema, rpc_timeout=60.0) as session:
            session.become_primary()
            if args.command == "setup":
                session.set_pipeline()
                updates = setup_updates(session, spec)
                session.write(updates)
                print(json.dumps({"updates": len(updates)}))
            else:
                print(json.dumps({"latencies_ms": move(session, spec, args.writes, args.bucket)}))
    except (P4RuntimeClientError, KeyError, ValueError, OSError) as exc:
        print(f"P4Runtime: {exc}", file=sys.stderr)
        return 1
    except grpc.RpcError as exc:
        print(f"P4Runtime: {args.addr}: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

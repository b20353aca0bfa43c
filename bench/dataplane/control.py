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
import ipaddress
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import grpc
from finsy.proto import p4r
from supergw_proto import p4constants as p4c
from supergw_proto.addresses import mac_to_int
from bench.dataplane.frames import BUCKET_HASH
from supergw_p4rt import (
    INSERT,
    MODIFY,
    EntityBuilder,
    P4RuntimeClient,
    P4RuntimeClientError,
    load_p4info,
    pipeline_config,
    update,
)


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


def _role(entities: EntityBuilder, port: int, role: int) -> p4r.TableEntry:
    return entities.table_entry(p4c.TABLE_PORT_ROLES, {p4c.MATCH_PORT_ROLES_PORT: port},
                              p4c.ACTION_SET_PORT_ROLE, {p4c.PARAM_SET_PORT_ROLE_ROLE: role})


def _bucket(entities: EntityBuilder, bucket: int, port: int, mac: str) -> p4r.TableEntry:
    return entities.table_entry(p4c.TABLE_BUCKETS, {p4c.MATCH_BUCKETS_BUCKET: bucket}, p4c.ACTION_SET_GATEWAY,
                              {p4c.PARAM_SET_GATEWAY_PORT: port, p4c.PARAM_SET_GATEWAY_GATEWAY_MAC: mac_to_int(mac)})


def setup_updates(entities: EntityBuilder, spec: Spec) -> list[p4r.Update]:
    updates = [
        update(MODIFY, entities.table_entry(p4c.TABLE_SETTINGS, {}, p4c.ACTION_SET_DISPATCH_CONFIG, {
            p4c.PARAM_SET_DISPATCH_CONFIG_GATEWAY_IP: int(ipaddress.IPv4Address(spec.gateway_ip)),
            p4c.PARAM_SET_DISPATCH_CONFIG_VMAC_BASE: mac_to_int(spec.vmac_base),
            p4c.PARAM_SET_DISPATCH_CONFIG_BUCKET_MASK: spec.buckets - 1,
            p4c.PARAM_SET_DISPATCH_CONFIG_BUCKET_HASH: int(BUCKET_HASH),
        }, default=True)),
        update(INSERT, _role(entities, spec.host_port, spec.role_host)),
    ]
    for port in spec.gateway_ports:
        updates.append(update(INSERT, _role(entities, port, spec.role_gateway)))
    for b in range(spec.buckets):
        updates.append(update(INSERT, _bucket(entities, b, spec.gateway_ports[0], spec.gateway_macs[0])))
    for mac in spec.host_macs:
        updates.append(update(INSERT, entities.table_entry(
            p4c.TABLE_LEARNED_SOURCES,
            {p4c.MATCH_LEARNED_SOURCES_SRC_MAC: mac_to_int(mac), p4c.MATCH_LEARNED_SOURCES_PORT: spec.host_port},
            p4c.ACTION_MARK_KNOWN, {})))
    return updates


def move(client: P4RuntimeClient, entities: EntityBuilder, spec: Spec, writes: int, bucket: int) -> list[float]:
    """Alternate bucket `bucket` between the gateways; latency of each MODIFY in ms."""
    moves = [
        [update(MODIFY, _bucket(entities, bucket, port, mac))]
        for port, mac in zip(spec.gateway_ports, spec.gateway_macs)
    ]
    for warmup in moves * 5:
        client.write(warmup)
    return [client.write(moves[(i + 1) % len(moves)]) * 1000.0 for i in range(writes)]


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
        info = load_p4info(args.p4info)
        entities = EntityBuilder(info)
        with P4RuntimeClient(args.addr, args.device_id, election_low=100, rpc_timeout=60.0) as client:
            client.become_primary()
            if args.command == "setup":
                device_config = args.device_config.read_bytes() if args.device_config else b""
                client.set_pipeline(pipeline_config(info, device_config))
                updates = setup_updates(entities, spec)
                client.write(updates)
                print(json.dumps({"updates": len(updates)}))
            else:
                print(json.dumps({"latencies_ms": move(client, entities, spec, args.writes, args.bucket)}))
    except (P4RuntimeClientError, KeyError, ValueError, OSError) as exc:
        print(f"P4Runtime: {exc}", file=sys.stderr)
        return 1
    except grpc.RpcError as exc:
        print(f"P4Runtime: {args.addr}: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

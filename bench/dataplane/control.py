"""Timing bucket moves on a switch `lan_state` configured, run inside the switch's namespace.

    python -m bench.dataplane.control --addr A --device-id N --p4info F --lan FILE --bucket B --writes 200

MODIFYs the `buckets` entry of bucket B back and forth between the LAN's gateways (entries
from the controller's builder), 10 warm-up writes first, each update encoded before it is
timed, and prints the latency of every Write (send to reply, ms) as `{"latencies_ms": [...]}`
on stdout. The synchronous session times one RPC, without an event loop in between.
"""

from __future__ import annotations

import json
import sys

import grpc
from supergw_p4rt import MODIFY, P4RuntimeClientError, P4RuntimeSession, load_schema

from bench.dataplane.lan_state import ELECTION_ID, Lan, parser_for
from supergw_controller.southbound import entities as ent

WARMUP = 10


def move(session: P4RuntimeSession, lan: Lan, writes: int, bucket: int) -> list[float]:
    """Alternate bucket `bucket` between the gateways; latency of each MODIFY in ms."""
    moves = [session.updates(MODIFY, [ent.bucket(bucket, g.port, g.mac)]) for g in lan.gateways]
    for i in range(WARMUP):
        session.write(moves[i % len(moves)])
    return [session.write(moves[(WARMUP + i) % len(moves)]) * 1000.0 for i in range(writes)]


def main(argv: list[str] | None = None) -> int:
    parser = parser_for("python -m bench.dataplane.control", __doc__)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--bucket", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        lan = Lan.from_json(args.lan.read_text())
        if len(lan.gateways) < 2:
            raise ValueError(f"{args.lan}: a move needs two gateways, the LAN has {len(lan.gateways)}")
        with P4RuntimeSession(args.addr, args.device_id, ELECTION_ID, load_schema(args.p4info), rpc_timeout=60.0) as s:
            s.become_primary()
            print(json.dumps({"latencies_ms": move(s, lan, args.writes, args.bucket)}))
    except (P4RuntimeClientError, KeyError, TypeError, ValueError, OSError) as exc:
        print(f"control: {exc}", file=sys.stderr)
        return 1
    except grpc.RpcError as exc:
        print(f"control: P4Runtime {args.addr}: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

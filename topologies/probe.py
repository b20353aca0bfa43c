"""Small probes run *inside* a namespace (`ip netns exec NS python -m topologies.probe ...`).

    grpc ADDR            exit 0 when a P4Runtime Capabilities RPC to ADDR answers
    pipeline ADDR ID     exit 0 when device ID has a forwarding pipeline (a P4Info) set

A namespace's 127.0.0.1 is only reachable from inside it, hence a separate process.
"""

from __future__ import annotations

import argparse
import sys

import grpc
from finsy.proto import p4r, p4r_grpc


def _capabilities(addr: str, timeout: float) -> str:
    with grpc.insecure_channel(addr) as channel:
        reply = p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=timeout)
        return str(reply.p4runtime_api_version)


def _has_pipeline(addr: str, device_id: int, timeout: float) -> bool:
    with grpc.insecure_channel(addr) as channel:
        req = p4r.GetForwardingPipelineConfigRequest(
            device_id=device_id,
            response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE,
        )
        reply = p4r_grpc.P4RuntimeStub(channel).GetForwardingPipelineConfig(req, timeout=timeout)
        return reply.config.HasField("p4info") and len(reply.config.p4info.tables) > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.probe")
    sub = parser.add_subparsers(dest="what", required=True)
    g = sub.add_parser("grpc")
    g.add_argument("addr")
    p = sub.add_parser("pipeline")
    p.add_argument("addr")
    p.add_argument("device_id", type=int)
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args(argv)
    try:
        if args.what == "grpc":
            print(f"P4Runtime {_capabilities(args.addr, args.timeout)} at {args.addr}")
            return 0
        ok = _has_pipeline(args.addr, args.device_id, args.timeout)
        print("pipeline set" if ok else "no pipeline")
        return 0 if ok else 1
    except grpc.RpcError as exc:
        print(f"{exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

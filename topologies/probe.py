"""Small probes run *inside* a namespace (`ip netns exec NS python -m topologies.probe ...`).

    grpc ADDR            exit 0 when a P4Runtime Capabilities RPC to ADDR answers
    pipeline ADDR ID     exit 0 when device ID has a forwarding pipeline (a P4Info) set

`--cacert CA --cert CRT --key KEY` (before the probe's name): over mutual TLS, as the
controller dials a switch that requires client certificates (`make run TLS=1`).

A namespace's 127.0.0.1 is only reachable from inside it, hence a separate process.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import grpc
from finsy.proto import p4r, p4r_grpc


def _channel(addr: str, args: argparse.Namespace) -> grpc.Channel:
    if args.cacert is None:
        return grpc.insecure_channel(addr)
    creds = grpc.ssl_channel_credentials(
        root_certificates=args.cacert.read_bytes(),
        private_key=args.key.read_bytes() if args.key else None,
        certificate_chain=args.cert.read_bytes() if args.cert else None,
    )
    return grpc.secure_channel(addr, creds)


def _capabilities(addr: str, args: argparse.Namespace) -> str:
    with _channel(addr, args) as channel:
        reply = p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=args.timeout)
        return str(reply.p4runtime_api_version)


def _has_pipeline(addr: str, device_id: int, args: argparse.Namespace) -> bool:
    with _channel(addr, args) as channel:
        req = p4r.GetForwardingPipelineConfigRequest(
            device_id=device_id,
            response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE,
        )
        reply = p4r_grpc.P4RuntimeStub(channel).GetForwardingPipelineConfig(req, timeout=args.timeout)
        return reply.config.HasField("p4info") and len(reply.config.p4info.tables) > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.probe")
    parser.add_argument("--cacert", type=Path, help="TLS: the CA of the switch's certificate")
    parser.add_argument("--cert", type=Path, help="TLS: the client certificate")
    parser.add_argument("--key", type=Path, help="TLS: the client certificate's key")
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
            print(f"P4Runtime {_capabilities(args.addr, args)} at {args.addr}")
            return 0
        ok = _has_pipeline(args.addr, args.device_id, args)
        print("pipeline set" if ok else "no pipeline")
        return 0 if ok else 1
    except OSError as exc:  # a certificate file
        print(exc, file=sys.stderr)
        return 1
    except grpc.RpcError as exc:
        print(f"{exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

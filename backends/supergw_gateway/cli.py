"""supergw-gateway: command line of the gateway agent."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import sys
from pathlib import Path

from supergw_gateway.config import GatewayConfig, load_config
from supergw_gateway.errors import GatewayError
from supergw_gateway.tuning.groups import ALL_GROUPS



def listen_address(text: str) -> str:
    """argparse type for ADDRESS:PORT: a clear usage error instead of a traceback later."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not ADDRESS:PORT (port 0..65535)")
    try:
        ipaddress.ip_address(host.strip("[]") or "127.0.0.1")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {host!r} is not an IP address") from None
    return text

def _progress(msg: str) -> None:
    print(f"… {msg}", file=sys.stderr, flush=True)


def _cmd_validate(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    print(f"{a.config}: ok (gateway {cfg.name}, backend {cfg.backend.value}, namespace {cfg.netns})")
    if cfg.remote_access is not None:  # what the credential cache becomes (docs/remote-access.md)
        from supergw_gateway.ra.gateway import cache_mapping

        print("remote access, " + "\n".join(cache_mapping(cfg.remote_access).describe()))
    return 0


def _cmd_detect(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    from supergw_gateway.detect import choose_backend
    from supergw_gateway.executor import LocalExecutor

    backend, det = choose_backend(cfg.backend, LocalExecutor(cfg.netns))
    print(json.dumps({"backend": backend.value, "kernel_esp": det.kernel_esp, "detail": det.detail}, indent=2))
    return 0


def _cmd_up(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    from supergw_gateway.runtime import Gateway

    st = Gateway(cfg, _progress).up()
    print(f"{cfg.name}: up, backend {st.label} ({st.detection})")
    return 0


def _cmd_apply(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    from supergw_gateway.runtime import Gateway

    Gateway(cfg, _progress).apply_tunnel()
    print(f"{cfg.name}: tunnel config applied")
    return 0


def _cmd_down(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    from supergw_gateway.runtime import Gateway

    items = Gateway(cfg, _progress).down()
    failed = [i for i in items if i.status == "failed"]
    print(f"{cfg.name}: down" + (f"; {len(failed)} tuning knob(s) not restored (kept in the record, "
                                 "the next `down` retries)" if failed else ""))
    return 1 if failed else 0


def _cmd_status(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    from supergw_gateway.runtime import Gateway

    print(json.dumps(Gateway(cfg).status(), indent=2, default=str))
    return 0


def _cmd_tune(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    from supergw_gateway.tuning.cli import run_tune

    return run_tune(cfg, a)


def _cmd_agent(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    import asyncio

    from supergw_gateway.agent import run_agent

    asyncio.run(run_agent(cfg, health_listen=a.health))
    return 0


def _cmd_pki(a: argparse.Namespace) -> int:
    from supergw_gateway.pki import Leaf, make_pki, parse_leaf

    leaves = [Leaf("gateway", i, i, (i,)) for i in a.ids]
    for role in ("server", "client", "peer"):
        leaves += [parse_leaf(role, spec) for spec in getattr(a, role) or ()]
    if not leaves:
        raise GatewayError("nothing to issue: give gateway ids, or --server/--client/--peer (see --help)")
    files = make_pki(Path(a.out), leaves, a.ca_cn)
    print(json.dumps({k: str(v) for k, v in files.items()}, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="supergw-gateway", description="supergw IPsec gateway agent")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def with_config(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument("-c", "--config", required=True, type=Path, help="gateway YAML file")
        return p

    with_config("validate", "check a config file").set_defaults(fn=_cmd_validate)
    with_config("detect", "detect the ESP backend for the gateway's namespace").set_defaults(fn=_cmd_detect)
    with_config("up", "start charon (or the UML guest) and bring the tunnel up").set_defaults(fn=_cmd_up)
    with_config("apply", "re-apply the tunnel config over VICI (idempotent)").set_defaults(fn=_cmd_apply)
    with_config("down", "stop the gateway").set_defaults(fn=_cmd_down)
    with_config("status", "backend and SAs with counters").set_defaults(fn=_cmd_status)
    t = with_config("tune", "tuning profile from the tuning paper (`up` applies the config's `tuning` itself)")
    t.add_argument("action", nargs="?", default="plan", choices=["plan", "apply", "verify", "revert"],
                   help="default: plan (same as apply --dry-run)")
    t.add_argument("--role", choices=["gateway", "endpoint"], default="gateway")
    t.add_argument("--dry-run", action="store_true", help="with apply: only show the changes")
    t.add_argument("--state", type=Path, help="record (default: <state_dir>/<name>/tune-<role>.json; "
                   "`up`/`down` keep theirs apart in tuning.json)")
    t.add_argument("--netns", help="with --role endpoint: the TCP endpoint's namespace")
    t.add_argument("--mtu", action="append", metavar="DEV=N", help="the path behind DEV allows MTU N (jumbo)")
    t.add_argument("--host-wide", action="store_true", help="also set host-wide sysctls on the host")
    t.add_argument("--knobs", metavar="GROUP,...",
                   help="knob groups (default: the config's tuning.knobs; 'all'): " + ", ".join(ALL_GROUPS))
    t.set_defaults(fn=_cmd_tune)
    ag = with_config("agent", "report load to the controller and serve /health")
    ag.add_argument("--health", default="127.0.0.1:0", type=listen_address,
                    help="ADDRESS:PORT of the health endpoint")
    ag.set_defaults(fn=_cmd_agent)
    pk = sub.add_parser(
        "pki", help="a CA and the deployment's certificates (IKE, etcd, REST, P4Runtime) with strongSwan's pki",
        description="Issues into DIR, signed by DIR/ca.crt (made if missing); existing files are kept. "
        "See docs/deploy-linux.md for the certificates a deployment needs.")
    pk.add_argument("--out", required=True, metavar="DIR")
    pk.add_argument("--ca-cn", default="supergw CA", help="the CA's CN when it is made (default: %(default)s)")
    pk.add_argument("--server", action="append", metavar="NAME=SAN[,SAN]",
                    help="TLS server certificate (REST API, switch P4Runtime) for these addresses/names")
    pk.add_argument("--client", action="append", metavar="NAME",
                    help="TLS client certificate with CN NAME (the controller's etcd user; P4Runtime client)")
    pk.add_argument("--peer", action="append", metavar="NAME=SAN[,SAN]",
                    help="server and client certificate for these addresses/names: an etcd member, or a gateway's "
                         "state replication (NAME=NAME: the agents check each other's name)")
    pk.add_argument("ids", nargs="*", help="gateway IKE identities (used as CN and subjectAltName)")
    pk.set_defaults(fn=None, pki=True)
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if a.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if getattr(a, "pki", False):
            return _cmd_pki(a)
        cfg = load_config(a.config)
        return int(a.fn(cfg, a))
    except GatewayError as exc:
        print(f"supergw-gateway: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

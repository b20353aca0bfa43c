"""`supergw-controller --config FILE [--log-level LEVEL]`."""

from __future__ import annotations

import argparse
import asyncio
import sys

from supergw_controller.config import ConfigError, load_config
from supergw_controller.logsetup import setup_logging


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="supergw-controller", description="P4Runtime controller of the supergw dispatcher"
    )
    p.add_argument("--config", required=True, help="YAML config file (see controller/example-config.yaml)")
    p.add_argument(
        "--log-level", default="warning", choices=["debug", "info", "warning", "error"], help="default: warning"
    )
    p.add_argument("--check", action="store_true", help="validate the config and exit")
    args = p.parse_args(argv)
    setup_logging(args.log_level)
    try:
        config = load_config(args.config)
        if config.store.etcd is not None:
            from supergw_controller.stores import etcd_tls

            etcd_tls(config.store.etcd)  # the TLS files read and checked now: a bad one fails --check
    except ConfigError as exc:
        print(f"supergw-controller: {exc}", file=sys.stderr)
        return 2
    if args.check:
        print(f"{args.config}: OK ({len(config.gateways)} gateways, {config.buckets} buckets)")
        return 0
    from supergw_controller.app import ListenError, serve

    try:
        asyncio.run(serve(config, announce=lambda s: print(s, flush=True)))
    except (ListenError, ConfigError) as exc:
        print(f"supergw-controller: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. the state_db directory cannot be created
        print(f"supergw-controller: cannot start: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

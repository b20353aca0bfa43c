"""Run every benchmark in sequence: dataplane, controller, failover, gateway, ha, scaling, remote, scale.

Each runs as its own `python -m bench.<name>` process so that one failing or
missing benchmark neither hides the others nor leaks state into them. The exit
status is non-zero when any benchmark failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

BENCHMARKS = ("dataplane", "controller", "failover", "gateway", "ha", "scaling", "remote", "scale")
REPO = Path(__file__).resolve().parent.parent


def _run_one(name: str) -> str:
    if find_spec(f"bench.{name}.__main__") is None:
        return f"missing (no bench/{name}/__main__.py)"
    started = time.monotonic()
    print(f"== bench: {name}", flush=True)
    rc = subprocess.run([sys.executable, "-m", f"bench.{name}"], cwd=REPO).returncode
    took = time.monotonic() - started
    return f"ok in {took:.0f}s" if rc == 0 else f"FAILED (exit {rc}) after {took:.0f}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("only", nargs="*", metavar="NAME", help=f"benchmarks to run: {', '.join(BENCHMARKS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.only if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)} (choose from {', '.join(BENCHMARKS)})")
    chosen = args.only or list(BENCHMARKS)
    outcomes = {name: _run_one(name) for name in chosen}
    print("== bench summary")
    for name, outcome in outcomes.items():
        print(f"   {name:<10} {outcome}")
    print(f"   results in {REPO / 'bench' / 'results'}/")
    return 0 if all(o.startswith("ok") for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

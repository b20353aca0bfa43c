"""python -m sgwpkg build | lock [--check] (PYTHONPATH=packaging; the Makefile's `package` targets)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sgwpkg.run import BuildError
from sgwpkg.spec import SpecError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="sgwpkg", description="supergw's Debian packages and wheels")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build every package into build/packages (make package)")
    b.add_argument("--out", type=Path, help="output folder (default build/packages)")
    lk = sub.add_parser("lock", help="resolve packaging/locks/*.txt again (make package-lock)")
    lk.add_argument("--check", action="store_true", help="only say whether the locks are current")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "build":
            from sgwpkg.build import OUT, main as build_main

            return build_main(a.out or OUT)
        from sgwpkg.lockcmd import main as lock_main

        return lock_main(check=a.check)
    except (BuildError, SpecError) as exc:
        print(f"package: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

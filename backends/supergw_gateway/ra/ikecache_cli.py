"""supergw-ike-cache: IKE exchanges needed under credential caching, against the actual count.

    supergw-ike-cache [--lifetimes 1m,1h,8h] [--data-lifetimes 1M,20M] [--png fig6.png] [--json]
                      [--format auto|sessions|charon] [--conn NAME] [--key identity|address] FILE...

FILEs are supergw session logs (JSON lines, `ra-sessions.jsonl` of each gateway) or charon
logs; a client's connections are merged over all files. Definitions: ra/ikecache.py and
docs/remote-access.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from supergw_gateway.ra.ikecache import (
    DATA_LIFETIMES_B,
    TIME_LIFETIMES_S,
    Analysis,
    Connection,
    Key,
    TraceError,
    analyse,
    read_charon_log,
    read_session_log,
)

_UNITS_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_UNITS_B = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "ki": 2**10, "mi": 2**20, "gi": 2**30}


def _amounts(text: str, units: dict[str, int], what: str) -> list[float]:
    out = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*?)(?:B)?\s*", part)
        unit = m.group(2).lower() if m else None
        if m is None or unit not in units or float(m.group(1)) <= 0:
            raise argparse.ArgumentTypeError(
                f"{part.strip()!r} is not a positive {what} (e.g. {'90s, 5m, 8h, 1d' if what == 'duration' else '500k, 20M, 1G'})")
        out.append(float(m.group(1)) * units[unit])
    return sorted(set(out))


def durations(text: str) -> list[float]:
    return _amounts(text, _UNITS_S, "duration")


def byte_sizes(text: str) -> list[float]:
    return _amounts(text, _UNITS_B, "byte size")


def fmt_duration(s: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{s / size:g}{unit}"
    return f"{s:g}s"


def fmt_bytes(b: float) -> str:
    for unit, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if b >= size:
            return f"{b / size:g}{unit}B"
    return f"{b:g}B"


def looks_like_session_log(path: Path) -> bool:
    try:
        with path.open(errors="replace") as f:
            first = next((line for line in f if line.strip()), "")
    except OSError:
        return False
    return first.lstrip().startswith("{")


def load(paths: list[Path], fmt: str, conn: str | None, key: Key, year: int | None) -> tuple[list[Connection], bool]:
    """All connections, and whether their byte counts are known (session logs: yes)."""
    conns: list[Connection] = []
    bytes_known = True
    for p in paths:
        kind = fmt if fmt != "auto" else ("sessions" if looks_like_session_log(p) else "charon")
        if kind == "sessions":
            conns += read_session_log(p, key=key)
        else:
            conns += read_charon_log(p, conn=conn, key=key, year=year)
            bytes_known = False  # CHILD SAs still up at the end of a log are missing
    return conns, bytes_known


def pct(n: int, of: int) -> str:
    return f"{100.0 * n / of:5.1f}%" if of else "   - "


def table(a: Analysis) -> str:
    lines = [f"{a.connections} connections of {a.clients} clients; actual IKE exchanges (IKE_SA_INIT + IKE_AUTH): "
             f"{a.actual}", ""]
    cols = ("clocked", "clocked+reauth", "established")
    lines.append(f"{'lifetime':>10}  " + "  ".join(f"{c:>22}" for c in cols))
    for r in a.time_rows:
        lines.append(f"{fmt_duration(r.lifetime):>10}  " + "  ".join(
            f"{r.needed[c]:>14} ({pct(r.needed[c], a.actual)})" for c in cols))
    lines.append("")
    if a.data_rows:
        lines.append(f"{'data life':>10}  {'data':>22}")
        for r in a.data_rows:
            lines.append(f"{fmt_bytes(r.lifetime):>10}  {r.needed['data']:>14} ({pct(r.needed['data'], a.actual)})")
    else:
        lines.append("data lifetime: not computed (byte counts are incomplete in charon logs; use session logs)")
    return "\n".join(lines)


def plot(a: Analysis, out: Path, title: str) -> None:
    try:
        import matplotlib
    except ImportError:
        raise TraceError("--png needs matplotlib: pip install 'supergw-gateway[plot]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if a.data_rows else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.5), squeeze=False)
    ax = axes[0][0]
    hours = [r.lifetime / 3600 for r in a.time_rows]
    for col, style in (("clocked", "o-"), ("clocked+reauth", "x--"), ("established", "s-")):
        ax.plot(hours, [r.needed[col] for r in a.time_rows], style, label=col)
    ax.axhline(a.actual, color="k", linestyle=":", label=f"actual ({a.actual})")
    ax.set_xscale("log")
    ax.set_xlabel("lifetime (hours)")
    ax.set_ylabel("IKE exchanges needed")
    # Mid-connection reauthentication explodes for short lifetimes: keep the paper's curves readable.
    ax.set_ylim(0, max(1.0, 1.3 * a.actual))
    ax.legend()
    ax.set_title("time lifetimes")
    if a.data_rows:
        ax2 = axes[0][1]
        ax2.plot([r.lifetime / 1e6 for r in a.data_rows], [r.needed["data"] for r in a.data_rows], "d-", label="data")
        ax2.axhline(a.actual, color="k", linestyle=":", label=f"actual ({a.actual})")
        ax2.set_xscale("log")
        ax2.set_xlabel("data lifetime (MB)")
        ax2.set_ylim(bottom=0)
        ax2.legend()
        ax2.set_title("data lifetime")
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="supergw-ike-cache", description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("files", nargs="+", type=Path, help="session logs (JSON lines) and/or charon logs")
    ap.add_argument("--format", choices=["auto", "sessions", "charon"], default="auto")
    ap.add_argument("--lifetimes", type=durations, default=list(TIME_LIFETIMES_S),
                    help="clocked/established lifetimes, e.g. 90s,5m,8h,1d")
    ap.add_argument("--data-lifetimes", type=byte_sizes, default=list(DATA_LIFETIMES_B),
                    help="data lifetimes, e.g. 500k,20M,1G (k/M/G: powers of 10; Ki/Mi/Gi: of 2)")
    ap.add_argument("--key", choices=["identity", "address"], default="identity",
                    help="who a client is: its authenticated identity (the paper's username) or outer address")
    ap.add_argument("--conn", help="charon logs: only IKE SAs of this connection (e.g. ra-gw1)")
    ap.add_argument("--year", type=int, help="charon logs in syslog format: the year of their timestamps")
    ap.add_argument("--png", type=Path, help="write the plot (the paper's Fig. 6) here")
    ap.add_argument("--title", default="IKE exchanges needed with credential caching (cf. Shue et al., Fig. 6)")
    ap.add_argument("--json", action="store_true", help="print the analysis as JSON instead of a table")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    try:
        conns, bytes_known = load(a.files, a.format, a.conn, "address" if a.key == "address" else "identity", a.year)
    except TraceError as exc:
        print(f"supergw-ike-cache: error: {exc}", file=sys.stderr)
        return 2
    if not conns:
        print(f"supergw-ike-cache: error: no connections in {', '.join(map(str, a.files))} "
              "(a charon log needs 'IKE_SA ... established' lines with `ike_name = yes`; check --conn)", file=sys.stderr)
        return 2
    result = analyse(conns, a.lifetimes, a.data_lifetimes, bytes_known=bytes_known)
    print(json.dumps(result.as_dict(), indent=2) if a.json else table(result), flush=True)
    if a.png is not None:
        try:
            plot(result, a.png, a.title)
        except (TraceError, OSError) as exc:
            print(f"supergw-ike-cache: error: {exc}", file=sys.stderr)
            return 2
        print(f"plot written to {a.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

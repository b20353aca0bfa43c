"""Load the controller dashboard in headless Chromium: its DOM after the scripts ran, a screenshot.

Used by `test_ctl_dashboard.py`, and by hand against a running system (`make run`):

    .venv/bin/python controller/tests/integration/dashboard_browser.py \\
        --url http://10.255.60.2:8080 --token-file .run/config/api-token-readonly --out build/dashboard.png

prints what each plot shows (series with data, markers) and writes the PNG. Needs Debian's
`chromium`. The token reaches the page in the URL fragment (`#token=`), which the page
stores in sessionStorage and removes; it never goes to the server in a URL.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

PLOTS = ("plot-throughput", "plot-cpu", "plot-buckets")
# No network beyond the page, no first-run UI, a fresh profile every time.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def dashboard_url(base: str, token: str) -> str:
    return base.rstrip("/") + "/dashboard/#token=" + quote(token, safe="")


def run_chromium(url: str, *, screenshot: Path | None = None, size: tuple[int, int] = (1400, 1500), wait_ms: int = 8000) -> str:
    """The DOM after `wait_ms` of (virtual) time, or write a screenshot and return ''."""
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="sgw-chromium-") as profile:
        args = [exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                f"--virtual-time-budget={wait_ms}"]
        args += [f"--screenshot={screenshot}"] if screenshot is not None else ["--dump-dom"]
        r = subprocess.run([*args, url], capture_output=True, text=True, timeout=wait_ms / 1000 + 60)
    if r.returncode != 0:
        raise RuntimeError(f"chromium exited {r.returncode}: {r.stderr[-2000:]}")
    if screenshot is not None and not screenshot.exists():
        raise RuntimeError(f"chromium wrote no screenshot {screenshot}: {r.stderr[-2000:]}")
    return r.stdout


@dataclass
class Plot:
    series: dict[str, int] = field(default_factory=dict)  # gateway -> points in its longest solid line
    tunnel_series: dict[str, int] = field(default_factory=dict)  # gateway -> points, dashed tunnel lines
    markers: list[str] = field(default_factory=list)  # marker classes, e.g. "marker marker-dead"
    labels: list[str] = field(default_factory=list)  # the texts: axis ticks, marker labels


class _PlotParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.plots: dict[str, Plot] = {}
        self.error = ""
        self._in: str | None = None
        self._in_error = False
        self._text_open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg" and a.get("id") in PLOTS:
            self._in = a["id"]
            self.plots[self._in] = Plot()
        elif tag == "div" and a.get("id") == "error":
            self._in_error = True
        elif self._in is not None:
            p = self.plots[self._in]
            cls = a.get("class", "")
            if tag == "polyline":
                n = len(a.get("points", "").split())
                into = p.tunnel_series if "tunnel" in cls.split() else p.series
                gw = a.get("data-gateway", "?")
                into[gw] = max(into.get(gw, 0), n)
            elif tag == "line" and "marker" in cls.split():
                p.markers.append(cls)
            elif tag == "text":
                self._text_open = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._in = None
        elif tag == "div":
            self._in_error = False
        elif tag == "text":
            self._text_open = False

    def handle_data(self, data: str) -> None:
        if self._in_error:
            self.error += data
        elif self._in is not None and self._text_open:
            self.plots[self._in].labels.append(data)


def parse_plots(dom: str) -> tuple[dict[str, Plot], str]:
    """The plots found in a dumped DOM, and the page's error line."""
    p = _PlotParser()
    p.feed(dom)
    return p.plots, p.error.strip()


class _EventParser(HTMLParser):
    """The recent-events table: its header cells, then one list of cell texts per row."""

    def __init__(self) -> None:
        super().__init__()
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self._table = False
        self._cell: list[str] | None = None
        self._in_body = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div" and a.get("id") == "events":
            self._table = True
        elif self._table and tag == "tbody":
            self._in_body = True
        elif self._table and tag == "tr" and self._in_body:
            self.rows.append([])
        elif self._table and tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            text = "".join(self._cell).strip()
            (self.rows[-1] if self._in_body else self.header).append(text)
            self._cell = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table" and self._table:
            self._table = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse_events(dom: str) -> list[dict[str, str]]:
    """The rows of the page's recent-events table, each as {column header: cell text}."""
    p = _EventParser()
    p.feed(dom)
    return [dict(zip(p.header, row)) for row in p.rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="controller base URL, e.g. http://10.255.60.2:8080")
    ap.add_argument("--token-file", type=Path, required=True, help="a file holding an API token (read-only is enough)")
    ap.add_argument("--out", type=Path, default=Path("build/dashboard.png"), help="screenshot PNG to write")
    ap.add_argument("--wait-ms", type=int, default=8000, help="how long the page runs before the capture")
    args = ap.parse_args(argv)
    try:
        token = args.token_file.read_text().strip()
    except OSError as exc:
        print(f"cannot read the token: {exc}", file=sys.stderr)
        return 2
    url = dashboard_url(args.url, token)
    try:
        plots, error = parse_plots(run_chromium(url, wait_ms=args.wait_ms))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        run_chromium(url, screenshot=args.out.resolve(), wait_ms=args.wait_ms)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"dashboard capture failed: {exc}", file=sys.stderr)
        return 1
    if error:
        print(f"the page shows an error: {error}")
    for name in PLOTS:
        p = plots.get(name)
        if p is None:
            print(f"{name}: missing from the page")
            continue
        print(f"{name}: series {p.series} tunnel {p.tunnel_series} markers {len(p.markers)}")
    print(f"screenshot: {args.out}")
    return 0 if not error and all(plots.get(n) and plots[n].series for n in PLOTS) else 1


if __name__ == "__main__":
    sys.exit(main())

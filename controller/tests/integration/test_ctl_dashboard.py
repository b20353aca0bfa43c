"""The dashboard's time series from a real controller and switch: GET /history, then the page in Chromium.

Topology: 2 hosts, 2 stand-in gateways (namespaces owning 192.0.2.1 on lo). The hosts ping
through the switch; an operator move, a failover (g2's heartbeats stop) and g2's return
happen while the controller samples. Stand-in agents post reports whose tunnel counters
are their namespace's real eth0 byte counters, whose one CHILD SA is INSTALLED and whose
CPU is a fixed per-gateway value (no crypto runs here). The page part needs Debian's `chromium` and is skipped without it.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dashboard_browser import Plot, chromium, dashboard_url, parse_events, parse_plots, run_chromium
from sgwctl_harness import TOKEN, Controller, Heartbeats, Setup, StandInAgent, TopologySpec
from sgwctl_topo import REMOTE_IP, Endpoint
from supergw_proto import p4constants as pc
from supergw_proto.api import HistoryView
from supergw_proto.bucket import bucket_of
from supergw_proto.reports import GatewayReport
from supergw_proto.rest import ApiError

K = 16
TOPOLOGY = TopologySpec(tag="p", index=7, hosts=2, gateways=2)
CPU = {"g1": 35.0, "g2": 55.0}
RESULTS = Path(__file__).resolve().parents[3] / "build" / "test-results"


def eth0_bytes(ep: Endpoint) -> tuple[int, int]:
    out = ep.exec("cat", "/sys/class/net/eth0/statistics/rx_bytes", "/sys/class/net/eth0/statistics/tx_bytes").stdout
    rx, tx = (int(x) for x in out.split())
    return rx, tx


class Reports(StandInAgent):
    """Stand-in agents: a report per gateway not silenced every `interval` s."""

    def __init__(self, ctl: Controller, gateways: list[Endpoint], silenced: set[str], interval: float = 0.5) -> None:
        super().__init__(interval)
        self.ctl, self.gateways, self.silenced = ctl, gateways, silenced

    def tick(self) -> None:
        for g in self.gateways:
            if g.name in self.silenced:
                continue
            rx, tx = eth0_bytes(g)
            body = {
                "gateway": g.name, "timestamp": time.time(), "backend": "libipsec",
                "cpu_percent": CPU[g.name], "cpu_cores": 2, "softirq_percent": 0, "charon_cpu_percent": CPU[g.name],
                "tunnel_bytes_in": tx, "tunnel_bytes_out": rx, "tunnel_packets_in": 0, "tunnel_packets_out": 0,
                # The stand-in's "tunnel" is up: a controller that trusts SA state keeps using it.
                "sas": [{"name": "stand-in", "state": "INSTALLED", "established_s": 1, "bytes_in": tx,
                         "bytes_out": rx, "packets_in": 0, "packets_out": 0}],
            }
            try:
                self.ctl.agent(g.name).report(GatewayReport.model_validate(body))
            except ApiError:
                pass


def traffic(hosts: list[Endpoint], seconds: float) -> None:
    """Every host pings the remote side with 1200-byte payloads, 100 per second, all at once."""
    count = int(seconds * 100)
    threads = [
        threading.Thread(
            target=h.exec,
            args=("ping", "-n", "-q", "-c", str(count), "-i", "0.01", "-s", "1200", "-W", "1", REMOTE_IP),
            kwargs={"check": False, "timeout": seconds + 30},
        )
        for h in hosts
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def wait_for(what: str, cond: Any, timeout: float = 15) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what} not seen after {timeout}s")


@dataclass
class Run:
    ctl: Controller
    history: HistoryView
    g2_buckets_before: int


@pytest.fixture(scope="module")
def run(setup: Setup) -> Iterator[Run]:
    ctl = setup.controller("p-primary", api_port=18717)
    hosts, gws = setup.topo.hosts(), setup.topo.gateways()
    with Heartbeats([ctl], [g.name for g in gws]) as hb, Reports(ctl, gws, hb.silenced):
        ctl.start()
        traffic(hosts, 3)
        h1 = setup.topo.endpoints["h1"]
        b = bucket_of(h1.mac, K)
        other = "g2" if ctl.client.bucket(b).gateway == "g1" else "g1"
        ctl.client.move(b, other)
        traffic(hosts, 2)
        g2_before = ctl.client.gateway("g2").buckets
        hb.silenced.add("g2")
        wait_for("g2 dead", lambda: not ctl.client.gateway("g2").alive)
        traffic(hosts, 2)
        hb.silenced.discard("g2")
        wait_for("g2 back", lambda: ctl.client.gateway("g2").alive)
        time.sleep(2.5)  # two more samples after the return
        yield Run(ctl, ctl.client.history(limit=3600), g2_before)
    ctl.stop()


def test_history_samples_what_the_switch_and_agents_saw(run: Run) -> None:
    samples = run.history.samples
    assert run.history.interval_s == 1.0
    assert len(samples) >= 8, [s.ts for s in samples]
    assert all(b.ts > a.ts for a, b in zip(samples, samples[1:]))
    for s in samples:
        assert set(s.gateways) == {"g1", "g2"}
        assert sum(g.buckets for g in s.gateways.values()) == K, s
    # ~100 pings/s of 1242-byte frames per host: well above 20 kB/s on whoever owns them.
    assert max(sum(g.dispatch_bps for g in s.gateways.values()) for s in samples) > 20_000
    assert any((s.gateways["g1"].tunnel_out_bps or 0) > 20_000 for s in samples)
    assert {s.gateways["g1"].cpu_percent for s in samples} >= {CPU["g1"]}
    dead = [s for s in samples if s.gateways["g2"].state == "dead"]
    assert dead and all(s.gateways["g2"].buckets == 0 for s in dead), dead
    # Its reports stopped with its heartbeats: once they are stale the plot shows no CPU for it.
    assert any(s.gateways["g2"].cpu_percent is None for s in dead), dead


def test_history_marks_the_failover_the_moves_and_the_return(run: Run) -> None:
    markers = [m for s in run.history.samples for m in s.markers]
    kinds = [(m.kind, m.gateway, m.reason) for m in markers]
    assert ("gateway_dead", "g2", "dead") in kinds, kinds
    assert ("gateway_recovering", "g2", "recovering") in kinds, kinds
    moved = {m.reason: m.count for m in markers if m.kind == "moves"}
    assert moved.get("operator") == 1, moved
    assert moved.get("failover") == run.g2_buckets_before, moved
    dead_ts = next(m.ts for m in markers if m.kind == "gateway_dead")
    assert next(m.ts for m in markers if m.reason == "failover") >= dead_ts


def test_history_rejects_bad_queries(run: Run) -> None:
    # what the typed client cannot send, sent raw
    r = run.ctl.client.request("GET", "/api/v1/history", params={"since": "soon"})
    assert r.status_code == 422 and r.json()["detail"].startswith("query.since:"), r.text
    with pytest.raises(ApiError) as refused:
        run.ctl.client.history(limit=0)
    assert refused.value.status == 422 and refused.value.detail.startswith("query.limit:"), refused.value
    newest = run.history.samples[-1].ts
    later = run.ctl.client.history(since=newest).samples
    assert all(s.ts > newest for s in later), later  # only samples taken since (one a second)


@pytest.fixture(scope="module")
def dom(run: Run) -> str:
    """The dashboard's DOM after its scripts ran in headless Chromium."""
    if chromium() is None:
        pytest.skip("chromium not installed (apt-get install chromium)")
    return run_chromium(dashboard_url(run.ctl.url, TOKEN))


def test_dashboard_events_show_who(dom: str) -> None:
    events = parse_events(dom)
    assert events and all("who" in e for e in events), events
    # K = 16: the failover and the return add at most ~2K events, so the move is among the 50 shown.
    # The operator's move went through the API with the config's legacy token, named 'admin'.
    moves = [e for e in events if e["kind"] == "operator" and e["reason"] == "move"]
    assert moves and all(e["who"] == "admin" for e in moves), events
    # The failover is the core's own doing: no caller.
    assert any(e["reason"] == "failover" and e["who"] == "–" for e in events), events


def test_dashboard_plots_have_data_in_chromium(run: Run, dom: str, tmp_path: Path) -> None:
    url = dashboard_url(run.ctl.url, TOKEN)
    plots, error = parse_plots(dom)
    assert error == "", error
    assert set(plots) == {"plot-throughput", "plot-cpu", "plot-buckets"}, plots
    buckets: Plot = plots["plot-buckets"]
    assert buckets.series.get("g1", 0) >= 8 and buckets.series.get("g2", 0) >= 8, buckets
    assert max(plots["plot-throughput"].series.values()) >= 8, plots["plot-throughput"]
    assert plots["plot-throughput"].tunnel_series, plots["plot-throughput"]
    assert plots["plot-cpu"].series.get("g1", 0) >= 2, plots["plot-cpu"]
    for p in plots.values():
        assert "marker marker-dead" in p.markers and "marker marker-recovering" in p.markers, p.markers
        assert "marker marker-moves failover" in p.markers and "marker marker-moves operator" in p.markers, p.markers
        assert "g2" in p.labels, p.labels
    png = tmp_path / "dashboard.png"
    run_chromium(url, screenshot=png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if RESULTS.is_dir():
        shutil.copy(png, RESULTS / "dashboard.png")


def test_dashboard_hosts_come_a_page_at_a_time(dom: str) -> None:
    """The hosts section reads one page of GET /hosts and says how many there are of how many
    the switch holds (a site of 50,000 hosts is never drawn at once)."""
    info = re.search(r'<small id="hostinfo">(.*?)</small>', dom, re.S)
    assert info, "no hosts summary on the page"
    said = re.search(r"(\d+) of (\d+) hosts.*; (\d+) matching, (\d+) shown", info.group(1))
    assert said, info.group(1)
    total, capacity, matching, shown = map(int, said.groups())
    assert total >= 1 and capacity == pc.LEARNED_SOURCES_TABLE_SIZE and matching == shown == total, said.groups()
    rows = re.search(r'<tbody id="hostrows">(.*?)</tbody>', dom, re.S)
    assert rows and rows.group(1).count("<tr>") == shown

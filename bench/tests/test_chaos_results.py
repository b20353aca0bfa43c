"""bench/chaos's report and replay files from a synthetic run record."""

from __future__ import annotations

import json
from pathlib import Path

from bench.chaos.checker import Injected, Silence, Violation
from bench.chaos.loss import Judged
from bench.chaos.results import BAD_INPUT_TABLE, COVERAGE_TABLE, per_kind, rewrite_bad_input, write
from bench.chaos.runner import Record
from bench.chaos.schedule import Fault
from supergw_proto.badinput import Tally


def record(violations: list[Violation], log: Path) -> Record:
    faults = [Fault(0, 10.0, "gateway_freeze", "a", "agw1", 3.0, 0.0, None),
              Fault(1, 11.0, "leader_kill", "a", "leader", 5.0, 0.0, 0),
              Fault(2, 40.0, "gateway_freeze", "b", "bgw2", 2.0, 0.0, None),
              Fault(3, 50.0, "wan_delay", "a", "wan", 5.0, 100.0, None)]
    rec = Record(seed=5, minutes=1.0, schedule=faults)
    rec.injected = {0: Injected(faults[0], 10.0, 13.0, "agw1"), 1: Injected(faults[1], 11.0, 16.0, "c2"),
                    2: Injected(faults[2], 40.0, 42.0, "bgw2")}
    rec.recovery_s = {0: 0.3, 1: 0.9, 2: 0.5}
    rec.outcomes = {0: "agw1", 1: "c2", 2: "bgw2", 3: "wan (not injected: no sch_netem)"}
    rec.flows = ["ah1 -> bh1"]
    rec.sent, rec.answered = {"ah1 -> bh1": 3000}, {"ah1 -> bh1": 2950}
    rec.silences = [Silence("ah1 -> bh1", 10.0, 10.3, False)]
    rec.resources = {"sgw-a/controller-c1[10] rss_mb": [(0.0, 80.0), (5.0, 81.0)],
                     "sgw-a/controller-c1[11] rss_mb": [(20.0, 70.0)],
                     "sgw-a/controller-c1[10] tasks": [(0.0, 20.0), (5.0, 21.0)],
                     "sgw-a/switch[5] fds": [(0.0, 30.0)], "sgw-b/switch[6] fds": [(0.0, 31.0)]}
    rec.violations = violations
    rec.ended_at = 60.0
    rec.logs = [log]
    return rec


def test_per_kind_statistics(tmp_path: Path) -> None:
    rows = {r["kind"]: r for r in per_kind(record([], tmp_path / "x.log"))}
    assert rows["gateway_freeze"]["injected"] == 2
    assert rows["gateway_freeze"]["recovery_median_ms"] == 400.0
    assert rows["gateway_freeze"]["recovery_max_ms"] == 500.0
    assert rows["leader_kill"]["budget_ms"] == 1000


def test_report_and_replay_files(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "sgw-a"
    logs.mkdir(parents=True)
    (logs / "controller-c1.log").write_text("Traceback (most recent call last):\n")
    v = Violation("log", "controller-c1.log: Traceback (most recent call last):", 30.0)
    out = tmp_path / "results"
    replay = write(record([v], logs / "controller-c1.log"), "method", quick=True, out_dir=out)
    report = json.loads((out / "chaos.json").read_text())
    assert report["metrics"]["faults_injected"] == 3
    assert report["metric_details"]["faults_injected"]["note"].endswith("; not injected: #3 wan_delay (wan (not "
                                                                         "injected: no sch_netem))")
    assert report["metrics"]["invariant_violations"] == 1
    assert report["metrics"]["probes_lost"] == 50
    assert report["failures"][0]["invariant"] == "log"
    assert (out / "chaos.md").exists() and (out / "chaos.png").stat().st_size > 0
    labels = {s["label"] for s in report["series"]}
    assert {"sgw-a/controller-c1 RSS MB", "sgw-a/controller-c1 asyncio tasks", "all processes: fds"} <= labels
    history = json.loads((replay / "history.json").read_text())
    assert history["seed"] == 5 and [f["outcome"] for f in history["faults"]][:3] == ["agw1", "c2", "bgw2"]
    assert history["faults"][3]["started"] is None
    assert history["faults"][1]["within"] == 0 and history["faults"][1]["recovery_ms"] == 900.0
    assert (replay / "logs" / "sgw-a" / "controller-c1.log").exists()


def test_no_logs_copied_without_a_violation(tmp_path: Path) -> None:
    replay = write(record([], tmp_path / "none.log"), "method", quick=False, out_dir=tmp_path)
    assert not (replay / "logs").exists()


def tally(interface: str, variant: str, tried: int, **counts: int) -> Tally:
    t = Tally(interface, variant, crashes=counts.pop("crashes", 0), server_errors=counts.pop("server_errors", 0))
    for outcome, n in counts.items():
        t.count(outcome, n)
    return t


def test_bad_input_tallies_in_the_report(tmp_path: Path) -> None:
    tallies = tmp_path / "bad-input"
    tally("rest", "admin", 0, **{"2xx": 10, "4xx": 90}).write(tallies)
    tally("heartbeat-udp", "", 0, server_errors=0, crashes=1, **{"refused:malformed": 50}).write(tallies)
    out = tmp_path / "results"
    write(record([], tmp_path / "x.log"), "method", quick=True, out_dir=out, bad_input_dir=tallies)
    report = json.loads((out / "chaos.json").read_text())
    assert report["metrics"]["bad_inputs_tried"] == 150
    assert report["metrics"]["bad_input_crashes"] == 1  # the probe can fail: a crash is counted
    assert "heartbeat-udp/" in report["metric_details"]["bad_input_crashes"]["note"]
    table = {(r["interface"], r["variant"]): r for r in report["tables"][BAD_INPUT_TABLE]}
    assert table[("rest", "admin")]["outcomes"] == "4xx 90, 2xx 10"
    assert "## Bad input per interface" in (out / "chaos.md").read_text()


def test_no_tallies_is_said_not_zero(tmp_path: Path) -> None:
    out = tmp_path / "results"
    write(record([], tmp_path / "x.log"), "method", quick=True, out_dir=out, bad_input_dir=tmp_path / "none")
    details = json.loads((out / "chaos.json").read_text())["metric_details"]
    assert details["bad_input_crashes"]["value"] is None and "make unit" in details["bad_input_crashes"]["note"]


def test_rewrite_keeps_the_run_and_refreshes_the_tallies(tmp_path: Path) -> None:
    out = tmp_path / "results"
    write(record([], tmp_path / "x.log"), "the method", quick=True, out_dir=out, bad_input_dir=tmp_path / "none")
    before = json.loads((out / "chaos.json").read_text())
    tallies = tmp_path / "bad-input"
    tally("config-yaml", "gateway", 0, **{"refused": 7}).write(tallies)
    rewrite_bad_input(out, tallies)
    after = json.loads((out / "chaos.json").read_text())
    assert after["metrics"]["bad_inputs_tried"] == 7
    for key in ("faults_injected", "invariant_violations", "probes_lost"):
        assert after["metrics"][key] == before["metrics"][key]
    assert after["rows"] == before["rows"] and after["method"] == before["method"]
    assert after["series"] == before["series"] and after["rows_title"] == "Recovery per fault kind"


def test_loss_windows_coverage_and_charged_silences_in_the_report(tmp_path: Path) -> None:
    rec = record([], tmp_path / "x.log")
    rec.windows = [Judged("ah1 -> bh1", 0, 0.0, 10.0, 500, 2, 15.9, "base 1 %", 0),
                   Judged("ah1 -> bh1", 1, 10.0, 20.0, 500, 30, 60.0, "base 1 %, #0 gateway_freeze 500 ms", 1)]
    rec.carried_s = {"agw1": 60.0, "bgw1": 60.0, "agw2": 30.0}
    rec.charged = {0: [Silence("ah1 -> bh1", 10.0, 10.3, False)]}
    write(rec, "method", quick=True, out_dir=tmp_path)
    doc = json.loads((tmp_path / "chaos.json").read_text())
    m = doc["metrics"]
    assert m["loss_windows"] == 2 and m["loss_worst_of_allowance"] == 0.5 and m["loss_quiet_worst_pct"] == 0.4
    assert m["gateway_faults_on_flows"] == 2
    table = {r["gateway"]: r for r in doc["tables"][COVERAGE_TABLE]}
    assert table["agw1"]["gateway_faults"] == 1 and table["agw2"]["of_run_pct"] == 50.0
    history = json.loads((tmp_path / "chaos-replay" / "history.json").read_text())
    assert history["faults"][0]["charged"] == [{"flow": "ah1 -> bh1", "start": 10.0, "ms": 300.0}]
    assert history["faults"][0]["hit"] == "agw1"

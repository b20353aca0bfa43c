"""The failover benchmarks cannot hide a failure: a trial whose probe does not recover is
reported as failed (which trial, which flow, why), its gap runs to the end of the run, and the
benchmark exits 1; so does a soak with a spurious failover (whose, and why). The emulation is faked (the trials come from synthetic probe traces); the
benchmarks' own assembly, report and exit status are real."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench import probes
from bench.failover import __main__ as one_site
from bench.failover import two_site
from bench.gaps import FlowGap
from bench.probes import BenchError, fail_under_probe, read_probe
from bench.tests.traces import END, FAULT, RTT, answered_unless, ping_output, send

STOPPED = ping_output(answered_unless(lambda seq: seq > 100))  # answers stop for good at the failure
FAILED_OVER = ping_output(answered_unless(lambda seq: 101 <= seq <= 130))  # a 310 ms gap


def flow(out: str, name: str = "h1 -> r1") -> FlowGap:
    return read_probe(name, out, FAULT, 0.5)


def test_an_unreadable_probe_is_a_benchmark_error() -> None:
    with pytest.raises(BenchError, match="the probe h1 -> r1: .*sent nothing"):
        flow("ping: connect: Network is unreachable\n")


def _fake_probe(monkeypatch: pytest.MonkeyPatch, argv: list[str], entering: int) -> list[tuple[object, ...]]:
    """fail_under_probe's probe is `argv` (its output: the ping's), `entering` frames enter the
    gateway; returns the `inject` calls."""
    injected: list[tuple[object, ...]] = []
    monkeypatch.setattr(probes, "ping_probe", lambda netns, dst, count=0: subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    monkeypatch.setattr(probes, "frames_entering", lambda gateways, seconds=1.0: [entering])
    monkeypatch.setattr(probes, "inject", lambda *args: injected.append(args))
    return injected


def test_fail_under_probe_fails_the_gateway_under_the_probe_and_reads_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    trace = tmp_path / "ping.out"
    trace.write_text(FAILED_OVER)
    injected = _fake_probe(monkeypatch, ["cat", str(trace)], entering=100)
    monkeypatch.setattr("bench.probes.time.time", lambda: FAULT)
    site = object()
    got, t_fault = fail_under_probe(site, "kill", "gw2", [11, 12], "ns-h1", "10.61.0.11",  # type: ignore[arg-type]
                                    "h1 -> r1", timeout_s=5)
    assert injected == [(site, "kill", "gw2", [11, 12])] and t_fault == FAULT
    assert got.flow == "h1 -> r1" and got.recovered and got.gap_ms == pytest.approx(310.0)


def test_fail_under_probe_refuses_a_probe_that_misses_the_gateway_and_fails_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    injected = _fake_probe(monkeypatch, ["sleep", "30"], entering=3)
    with pytest.raises(BenchError, match=r"the probe h1 -> r1 does not enter gw2, .*\(3 frames in 1 s\)"):
        fail_under_probe(object(), "freeze", "gw2", [11, 12], "ns-h1", "10.61.0.11",  # type: ignore[arg-type]
                         "h1 -> r1", timeout_s=5)
    assert injected == []


class FakeOneSite:
    """Trials as OneSite.trial returns them; the freeze's probe never comes back."""

    def __init__(self, site: object) -> None:
        pass

    def trial(self, kind: str, round_: int, unrecoverable: bool = False) -> one_site.Trial:
        return one_site.trial_of(kind, round_, "gw2", flow(STOPPED if kind == "freeze" else FAILED_OVER), 280.0, 1.7)

    def soak(self, seconds: float) -> dict[str, Any]:
        return {"seconds": seconds, "failovers": 0, "dead_events": 0, "dead_detail": [], "heartbeats_rejected": {},
                "stale_events": 0, "stale_detail": [], "liveness_gaps": {}}


class FakeEmulation:
    @staticmethod
    def from_file(*args: object, **kwargs: object) -> FakeEmulation:
        return FakeEmulation()

    def site(self) -> None:
        return None


@contextmanager
def fake_running(emu: object, usable: object) -> Iterator[object]:
    yield emu


def test_one_site_fails_the_trial_whose_probe_never_comes_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("bench.report.RESULTS_DIR", tmp_path)
    monkeypatch.setattr(one_site, "OneSite", FakeOneSite)
    monkeypatch.setattr(one_site, "Emulation", FakeEmulation)
    monkeypatch.setattr(one_site, "running_or_booted", fake_running)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert one_site.main(["--quick"]) == 1
    doc = json.loads((tmp_path / "failover.json").read_text())
    assert doc["failures"] == [{"kind": "freeze", "trial": 0, "victim": "gw2", "flow": "h1 -> r1",
                                "problem": doc["failures"][0]["problem"]}]
    assert "no answer after the fault" in doc["failures"][0]["problem"]
    # the gap runs to the end of the run (about 4 s), never the 10 ms between the last replies
    assert doc["metrics"]["failover_freeze_ms"] == pytest.approx(1000 * (END - send(100) - RTT), abs=0.1)
    assert doc["metrics"]["failover_kill_ms"] == pytest.approx(310.0)
    assert doc["metrics"]["failover_not_recovered"] == 1
    assert doc["metrics"]["probe_lost"] == 400 + 30 + 30
    assert "## Failed trials" in (tmp_path / "failover.md").read_text()


def _two_site_trial(kind: str, a_to_b: str, b_to_a: str, both: str = FAILED_OVER) -> two_site.Trial:
    return two_site.Trial(kind, 0, "agw1", "bgw1", flow(a_to_b, "a1 -> b1"), flow(b_to_a, "b2 -> a2"),
                          flow(both, "a3 -> b3"), 290.0, 310.0, "partner down", 2.0)


def test_two_site_fails_the_flow_that_never_comes_back_and_measure_refuses_to_report_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    trials = [_two_site_trial("freeze", FAILED_OVER, STOPPED), _two_site_trial("kill", FAILED_OVER, FAILED_OVER)]
    monkeypatch.setattr("bench.report.RESULTS_DIR", tmp_path)
    monkeypatch.setattr(two_site, "run_trials", lambda *a, **k: (trials, None))
    assert two_site.main(["--quick", "--soak-s", "0"]) == 1
    doc = json.loads((tmp_path / "failover-two-site.json").read_text())
    assert [(f["kind"], f["direction"], f["flow"]) for f in doc["failures"]] == [("freeze", "b_to_a", "b2 -> a2")]
    assert doc["metrics"]["failover_freeze_b_to_a_ms"] > 3900 and doc["metrics"]["failover_not_recovered"] == 1
    with pytest.raises(BenchError, match=r"1 probe flow\(s\) did not recover: freeze trial 0 b_to_a b2 -> a2"):
        two_site.measure(1)
    trials.pop(0)
    assert two_site.measure(1)["failover_kill_ms"] == pytest.approx(310.0)


CLEAN_SOAK: dict[str, Any] = {"failovers": 0, "dead_events": 0, "dead_detail": [], "heartbeats_rejected": {},
                              "stale_events": 0, "stale_detail": [], "liveness_gaps": {}}
STALE_DETAIL = "gw3: the switch sent 12 frames of its buckets to gw1 (no liveness frame for 60 ms)"
SPURIOUS_SOAK = CLEAN_SOAK | {
    "failovers": 2, "dead_events": 1, "dead_detail": ["gw1: 3 heartbeats missed"],
    "stale_events": 1, "stale_detail": [STALE_DETAIL]}


class RecoveringOneSite(FakeOneSite):
    """Every trial's probe recovers; the soak is `SOAK`."""

    SOAK = CLEAN_SOAK

    def trial(self, kind: str, round_: int, unrecoverable: bool = False) -> one_site.Trial:
        return one_site.trial_of(kind, round_, "gw2", flow(FAILED_OVER), 280.0, 1.7)

    def soak(self, seconds: float) -> dict[str, Any]:
        return self.SOAK | {"seconds": seconds}


@pytest.mark.parametrize(("soak", "exit_code"), [(CLEAN_SOAK, 0), (SPURIOUS_SOAK, 1)], ids=["clean", "spurious"])
def test_one_site_fails_a_soak_with_a_spurious_failover_and_says_why(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, soak: dict[str, Any], exit_code: int) -> None:
    monkeypatch.setattr("bench.report.RESULTS_DIR", tmp_path)
    monkeypatch.setattr(one_site, "OneSite", type("Soaked", (RecoveringOneSite,), {"SOAK": soak}))
    monkeypatch.setattr(one_site, "Emulation", FakeEmulation)
    monkeypatch.setattr(one_site, "running_or_booted", fake_running)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert one_site.main(["--quick"]) == exit_code
    doc = json.loads((tmp_path / "failover.json").read_text())
    details = doc["metric_details"]
    clean = soak is CLEAN_SOAK
    for key in ("spurious_failovers_soak", "spurious_dataplane_failovers_soak"):
        assert details[key]["goal"] == 0 and details[key]["met"] is clean
    if clean:
        assert doc["failures"] == []
        return
    assert [f["problem"] for f in doc["failures"]] == [
        "spurious failover, the controller's: gw1: 3 heartbeats missed",
        "spurious failover, the controller's: 1 counted by /api/v1/status without a 'gateway dead' event in the soak",
        f"spurious failover, the switch's own: {STALE_DETAIL}"]
    md = (tmp_path / "failover.md").read_text()
    assert "**3 failed**" in md and "gw1: 3 heartbeats missed" in md and "gw3: the switch sent 12 frames" in md


@pytest.mark.parametrize("spurious", [False, True])
def test_two_site_fails_a_soak_with_a_spurious_failover_and_says_why(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spurious: bool) -> None:
    soak: dict[str, Any] = {"seconds": 10.0, "dead_events": 0, "stale_events": 0, "stale_detail": [],
                            "partner_down_events": 0, "detail": []}
    if spurious:
        soak |= {"dead_events": 1, "partner_down_events": 1, "detail": ["sgw-b: bgw2: partner down (3 beacons missed)"]}
    trials = [_two_site_trial("kill", FAILED_OVER, FAILED_OVER)]
    monkeypatch.setattr("bench.report.RESULTS_DIR", tmp_path)
    monkeypatch.setattr(two_site, "run_trials", lambda *a, **k: (trials, soak))
    assert two_site.main(["--quick"]) == (1 if spurious else 0)
    doc = json.loads((tmp_path / "failover-two-site.json").read_text())
    for key in ("spurious_failovers_soak_two_site", "spurious_dataplane_failovers_soak_two_site"):
        assert doc["metric_details"][key]["goal"] == 0
    assert doc["metric_details"]["spurious_failovers_soak_two_site"]["met"] is not spurious
    assert doc["metric_details"]["spurious_dataplane_failovers_soak_two_site"]["met"] is True
    assert doc["failures"] == ([{"kind": "soak", "problem": "spurious failover, the controller's: sgw-b: bgw2: "
                                                            "partner down (3 beacons missed)"}] if spurious else [])
    assert ("partner down (3 beacons missed)" in (tmp_path / "failover-two-site.md").read_text()) is spurious

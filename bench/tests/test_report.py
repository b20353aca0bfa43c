"""bench.report writes consistent JSON, markdown and PNG, and rejects bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.report import Metric, ReportError, Series, read_report, write_report


def test_writes_three_files_with_goal_and_ratio(tmp_path: Path) -> None:
    paths = write_report(
        "demo",
        {
            "pps": Metric(2_000_000.0, "pps", goal=1_000_000.0),
            "rtt_ms": Metric(10.0, "ms", goal=5.0, higher_is_better=False),
            "plain": 3,
            "missing": Metric(None, "pps", note="tool not installed"),
        },
        rows=[{"size": 64, "pps": 2e6}, {"size": 1400, "extra": "x|y"}],
        series=[Series("a", [64, 1400], [2e6, None], xlabel="bytes", ylabel="pps")],
        method="measured carefully",
        results_dir=tmp_path,
    )
    doc = json.loads(paths.json.read_text())
    assert doc["metrics"] == {"pps": 2e6, "rtt_ms": 10.0, "plain": 3.0, "missing": None}
    assert doc["metric_details"]["pps"]["ratio"] == 2.0
    assert doc["metric_details"]["pps"]["met"] is True
    assert doc["metric_details"]["rtt_ms"]["ratio"] == 0.5
    assert doc["metric_details"]["rtt_ms"]["met"] is False
    assert doc["metric_details"]["missing"]["met"] is None
    assert doc["metric_details"]["missing"]["note"] == "tool not installed"
    md = paths.markdown.read_text()
    assert "| goal | ratio |" in md
    assert "≥ 1,000,000" in md and "≤ 5" in md
    assert "tool not installed" in md and "measured carefully" in md
    assert "x\\|y" in md  # pipes in cells are escaped
    assert paths.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_failed_trials_are_in_the_json_and_right_under_the_metrics(tmp_path: Path) -> None:
    failure = {"trial": 2, "kind": "freeze", "flow": "h1 -> r1", "problem": "no answer after the fault"}
    paths = write_report("failing", {"gap_ms": Metric(4000.0, "ms", goal=500.0, higher_is_better=False)},
                         rows=[{"trial": 2}], method="how", failures=[failure], results_dir=tmp_path)
    assert json.loads(paths.json.read_text())["failures"] == [failure]
    md = paths.markdown.read_text()
    assert md.index("## Failed trials") < md.index("## Method") < md.index("## Samples")
    assert "**1 failed**" in md and "| 2 | freeze | h1 -> r1 | no answer after the fault |" in md
    quiet = write_report("passing", {"a": 1}, results_dir=tmp_path)
    assert json.loads(quiet.json.read_text())["failures"] == [] and "Failed" not in quiet.markdown.read_text()


def test_bar_plot_without_series(tmp_path: Path) -> None:
    paths = write_report("bars", {"a": Metric(1.0, goal=2.0), "b": None}, results_dir=tmp_path)
    assert paths.png.stat().st_size > 0


def test_zero_latency_is_infinite_ratio(tmp_path: Path) -> None:
    assert Metric(0.0, goal=5.0, higher_is_better=False).ratio() == math.inf
    paths = write_report("zero", {"lat": Metric(0.0, goal=5.0, higher_is_better=False)}, results_dir=tmp_path)
    assert json.loads(paths.json.read_text())["metric_details"]["lat"]["ratio"] == "inf"


def test_a_count_with_goal_zero_is_met_only_at_zero(tmp_path: Path) -> None:
    paths = write_report("zero-goal", {"spurious": Metric(1.0, "failovers", goal=0.0, higher_is_better=False),
                                       "clean": Metric(0.0, "failovers", goal=0.0, higher_is_better=False)},
                         results_dir=tmp_path)
    details = json.loads(paths.json.read_text())["metric_details"]
    assert (details["spurious"]["met"], details["spurious"]["ratio"]) == (False, 0.0)
    assert (details["clean"]["met"], details["clean"]["ratio"]) == (True, "inf")
    md = paths.markdown.read_text()
    assert "| `spurious` | 1 | failovers | ≤ 0 | 0 | no |" in md
    assert "| `clean` | 0 | failovers | ≤ 0 | ∞ | yes |" in md


@pytest.mark.parametrize(
    ("name", "metrics", "series", "message"),
    [
        ("Bad Name", {"a": 1}, [], "must be non-empty"),
        ("", {"a": 1}, [], "must be non-empty"),
        ("ok", {}, [], "no metrics"),
        ("ok", {"a": "fast"}, [], "expected a number"),
        ("ok", {"a": True}, [], "expected a number"),
        ("ok", {"a": float("nan")}, [], "not finite"),
        ("ok", {"a": Metric(1.0, goal=0.0)}, [], "positive"),
        ("ok", {"a": Metric(1.0, goal=-1.0, higher_is_better=False)}, [], "positive"),
        ("ok", {"a": 1}, [Series("s", [1, 2], [1])], "2 x values but 1 y values"),
    ],
)
def test_bad_input_is_rejected(
    tmp_path: Path, name: str, metrics: dict[str, object], series: list[Series], message: str
) -> None:
    with pytest.raises(ReportError, match=message):
        write_report(name, metrics, series=series, results_dir=tmp_path)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_read_report_refuses_what_it_did_not_write(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"name": "x"}')
    with pytest.raises(ReportError, match="not a report written by bench.report"):
        read_report(bad)

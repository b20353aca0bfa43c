"""bench/remote's `--only` merge: one part of a saved remote report replaced by a new run's,
the other parts kept as they were — rootless, on reports written here."""

from __future__ import annotations

import json
from pathlib import Path

from bench.remote.__main__ import IKE_PART, TAKEOVER_PART, Plan, PartReport, ReportPart, Results, merge_part
from bench.remote.measure import TransferRun
from bench.report import Metric, Series, write_report

PLAN = Plan([1], 2, [1], 3.0, 1, 2, 1, 20, 15.0, True)


def _saved(results_dir: Path) -> None:
    """A remote report with two parts, "a" and "b" (b's rows carry a `b_trial` key)."""
    write_report("remote", {"a_x": Metric(1.0, "s"), "b_x": Metric(2.0, "s"), "b_y": Metric(3.0, "s")},
                 [{"a_trial": 1, "v": 1}, {"b_trial": 1, "v": 2}], [Series("a", [1, 2], [3, 4])],
                 title="saved", method="the method\n\nb's old method", results_dir=results_dir,
                 rows_title="saved rows", failures=[{"trial": "a 1", "why": "a failed"}, {"trial": "b 1", "why": "b old"}],
                 tables={"a table": [{"k": 1}], "b table": [{"k": 2}]})


def _measure_b(res: Results) -> PartReport:
    res.failures.append({"trial": "b check", "why": "found while measuring"})
    return {"b_x": Metric(5.0, "s")}, [{"b_trial": 7, "v": 9}], {"b table (new)": [{"k": 3}]}


PART_B = ReportPart(("b_",), ("b",), _measure_b, lambda saved: saved.split("\n\nb's")[0] + "\n\nb's new method",
                    row_keys=("b_trial",), table_prefixes=("b table",))


def test_a_part_replaced_and_the_others_kept(tmp_path: Path) -> None:
    _saved(tmp_path)
    res = Results(failures=[{"trial": "b 1", "why": "b new"}])
    merge_part(PART_B, PLAN, res, tmp_path)
    doc = json.loads((tmp_path / "remote.json").read_text())
    assert doc["metrics"] == {"a_x": 1.0, "b_x": 5.0}  # b_y was b's and is not measured again: gone
    assert doc["rows"] == [{"a_trial": 1, "v": 1}, {"b_trial": 7, "v": 9}]
    assert doc["tables"] == {"a table": [{"k": 1}], "b table (new)": [{"k": 3}]}
    assert doc["failures"] == [{"trial": "a 1", "why": "a failed"}, {"trial": "b 1", "why": "b new"},
                               {"trial": "b check", "why": "found while measuring"}]
    assert doc["method"] == "the method\n\nb's new method"
    assert doc["title"] == "saved" and doc["rows_title"] == "saved rows"
    assert [s["label"] for s in doc["series"]] == ["a"]


def test_without_a_saved_report_the_whole_run_is_written(tmp_path: Path) -> None:
    res = Results()
    res.transfers[1] = [TransferRun(m, 1, 3.0, 100.0, 100.0, 0.2, 1.5, 0) for m in ("ipsec", "plain")]
    merge_part(PART_B, PLAN, res, tmp_path)
    doc = json.loads((tmp_path / "remote.json").read_text())
    assert doc["metrics"]["ipsec_mbit_s_n1_c1"] == 100.0 and "b_x" not in doc["metrics"]


def test_the_parts_own_what_their_runs_measure() -> None:
    # the takeover owns the failover trials and their control, the IKE-cost part the sessions, the
    # live cache and the IKE/ESP cost; neither owns the other's, nor the transfers
    assert "client_failover_s".startswith(TAKEOVER_PART.metric_prefixes)
    assert "control_no_takeover_recovered".startswith(TAKEOVER_PART.metric_prefixes)
    assert "ike_esp_cost_ratio".startswith(IKE_PART.metric_prefixes)
    assert "sessions_actual".startswith(IKE_PART.metric_prefixes)
    for other in ("ipsec_mbit_s_n1_c1", "ike_handshakes_per_s_n1", "client_drain_s", "move_disruptions"):
        assert not other.startswith(TAKEOVER_PART.metric_prefixes + IKE_PART.metric_prefixes), other
    assert not "ike_esp_cost_ratio".startswith(TAKEOVER_PART.metric_prefixes)
    assert not "client_failover_s".startswith(IKE_PART.metric_prefixes)
    assert "failover 1 (kill)".startswith(TAKEOVER_PART.trial_prefixes)
    assert "caching live 60 s".startswith(IKE_PART.trial_prefixes)
    assert not "drain".startswith(TAKEOVER_PART.trial_prefixes + IKE_PART.trial_prefixes)

"""The chaos report's bad-input part: what the bad-input tests of `make unit` tried at each
interface (REST per token, heartbeats, pair beacons, config YAML, the switch's streams) and
what came of it, read from their tallies (`supergw_proto.badinput`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.report import Metric
from supergw_proto.badinput import read_all

# The tallies' goal-0 counts, as the report's metric names.
GOAL_ZERO = {"crashes": "bad_input_crashes", "server_errors": "bad_input_server_errors",
             "state_changes_on_refusal": "bad_input_state_changes"}


def rows(tallies: list[Mapping[str, Any]]) -> list[dict[str, object]]:
    """One row per interface and variant, outcomes largest first."""
    out: list[dict[str, object]] = []
    for t in tallies:
        outcomes = sorted(t["outcomes"].items(), key=lambda kv: (-kv[1], kv[0]))
        out.append({"interface": t["interface"], "variant": t["variant"] or "—", "tried": t["tried"],
                    "outcomes": ", ".join(f"{k} {n}" for k, n in outcomes),
                    **{key: t[key] for key in GOAL_ZERO}})
    return out


def metrics(tallies: list[Mapping[str, Any]], directory: Path) -> dict[str, Metric]:
    """Inputs tried in all, and the three goal-0 counts summed over every interface."""
    if not tallies:
        why = f"no tallies in {directory}: `make unit` runs the bad-input tests that write them"
        return {"bad_inputs_tried": Metric(None, "inputs", note=why),
                **{name: Metric(None, "inputs", note=why) for name in GOAL_ZERO.values()}}
    newest = max(p.stat().st_mtime for p in directory.glob("*.json"))
    when = datetime.fromtimestamp(newest, timezone.utc).isoformat(timespec="minutes")
    interfaces = sorted({t["interface"] for t in tallies})
    out = {"bad_inputs_tried": Metric(float(sum(t["tried"] for t in tallies)), "inputs",
                                      note=f"{len(tallies)} tallies over {', '.join(interfaces)} "
                                           f"(the bad-input tests, newest {when}); per interface below")}
    for key, name in GOAL_ZERO.items():
        hit = [f"{t['interface']}/{t['variant']}" for t in tallies if t[key]]
        out[name] = Metric(float(sum(t[key] for t in tallies)), "inputs", higher_is_better=False,
                           note="goal 0" + (f"; at {', '.join(hit)}" if hit else ""))
    return out


def section(directory: Path) -> tuple[dict[str, Metric], list[dict[str, object]]]:
    """The metrics and the per-interface rows from the tallies in `directory`."""
    tallies = read_all(directory) if directory.is_dir() else []
    return metrics(tallies, directory), rows(tallies)

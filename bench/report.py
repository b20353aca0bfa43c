"""Shared benchmark report writer.

One call writes three files for a benchmark ``name`` into ``bench/results/``:

- ``<name>.json`` — machine readable: ``metrics`` (name -> value or null),
  ``metric_details`` (unit, goal, ratio, met, note per metric), ``failures`` (the trials
  that failed, e.g. a probe flow that did not recover, each saying which and why), ``rows``,
  ``series``, ``method`` and ``generated_at``.
- ``<name>.md`` — a markdown table ``metric | value | unit | goal | ratio | met | note``,
  the failed trials (when any), the method text and the rows as a second table.
- ``<name>.png`` — a matplotlib plot (Agg backend): the series when given,
  otherwise one bar per metric with a goal as its ratio to the goal.

Ratio convention: ``ratio >= 1`` always means "goal met". For a metric where
higher is better it is ``value / goal``; where lower is better, ``goal / value`` (a goal
of 0, a count that must stay 0: ratio 0 for any count above it, infinite at 0).

Usage::

    from bench.report import Metric, Series, write_report

    write_report(
        "dataplane",
        {"ebpf_pps_64": Metric(1.2e6, "pps", goal=1e6),
         "move_rtt_ms": Metric(0.8, "ms", goal=5, higher_is_better=False),
         "bmv2_pps_64": Metric(None, "pps", note="simple_switch_grpc not installed")},
        rows=[{"frame_bytes": 64, "pps": 1.2e6}],
        series=[Series("eBPF", x=[64, 1400], y=[1.2e6, 9e5])],
        method="How it was measured.",
    )
"""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


class ReportError(ValueError):
    """A report was asked for with input that cannot be written faithfully."""


@dataclass(frozen=True)
class Metric:
    """One measured number. ``value=None`` means not measured; say why in ``note``."""

    value: float | None
    unit: str = ""
    goal: float | None = None
    higher_is_better: bool = True
    note: str = ""

    def ratio(self) -> float | None:
        """Ratio to the goal, >= 1 when the goal is met; None without value or goal."""
        if self.value is None or self.goal is None:
            return None
        if self.higher_is_better:
            return self.value / self.goal
        if self.value == 0:
            return math.inf
        return self.goal / self.value

    def met(self) -> bool | None:
        ratio = self.ratio()
        return None if ratio is None else ratio >= 1.0


@dataclass(frozen=True)
class Series:
    """One line of the plot."""

    label: str
    x: Sequence[float]
    y: Sequence[float | None]
    xlabel: str = ""
    ylabel: str = ""


@dataclass(frozen=True)
class ReportPaths:
    json: Path
    markdown: Path
    png: Path
    extra: tuple[Path, ...] = field(default_factory=tuple)


MetricInput = Metric | float | int | None


def write_report(
    name: str,
    metrics: Mapping[str, MetricInput],
    rows: Sequence[Mapping[str, object]] = (),
    series: Sequence[Series] = (),
    *,
    title: str = "",
    method: str = "",
    log_y: bool = False,
    results_dir: Path | None = None,
    rows_title: str = "Samples",
    failures: Sequence[Mapping[str, object]] = (),
    tables: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
) -> ReportPaths:
    """Write ``<name>.json``, ``<name>.md`` and ``<name>.png``; return their paths.

    ``metrics`` values may be plain numbers (no unit, no goal) or :class:`Metric`.
    ``rows`` are table rows (all keys become columns, in first-seen order), under the
    markdown heading ``rows_title``. ``failures``: one mapping per failed trial (which trial,
    which flow, why), shown right under the metrics. ``tables``: further tables after the
    rows, each under its title.
    """
    _check_name(name)
    normalised = {key: _as_metric(key, value) for key, value in metrics.items()}
    if not normalised:
        raise ReportError(f"report {name!r}: no metrics given")
    for s in series:
        _check_series(name, s)
    out_dir = results_dir if results_dir is not None else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = ReportPaths(
        json=out_dir / f"{name}.json",
        markdown=out_dir / f"{name}.md",
        png=out_dir / f"{name}.png",
    )
    generated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    heading = title or name
    paths.json.write_text(
        json.dumps(
            _json_document(name, heading, normalised, rows, series, method, generated_at, failures,
                           rows_title, tables or {}),
            indent=2,
            default=str,
        )
        + "\n"
    )
    paths.markdown.write_text(
        _markdown(heading, normalised, rows, method, generated_at, rows_title, failures, tables or {})
    )
    _plot(paths.png, heading, normalised, series, log_y)
    return paths


@dataclass(frozen=True)
class SavedReport:
    """A report as its ``<name>.json`` holds it: what :func:`write_report` needs to write it
    again (with more metrics or tables) without rerunning the benchmark."""

    name: str
    title: str
    metrics: dict[str, Metric]
    rows: list[dict[str, object]]
    series: list[Series]
    method: str
    rows_title: str
    failures: list[dict[str, object]]
    tables: dict[str, list[dict[str, object]]]


def read_report(path: Path) -> SavedReport:
    """Read a report written by :func:`write_report`."""
    try:
        doc = json.loads(path.read_text())
        metrics = {
            key: Metric(d["value"], d["unit"], d["goal"], d["higher_is_better"], d["note"])
            for key, d in doc["metric_details"].items()
        }
        series = [Series(s["label"], s["x"], s["y"], s["xlabel"], s["ylabel"]) for s in doc["series"]]
        return SavedReport(doc["name"], doc["title"], metrics, doc["rows"], series, doc["method"],
                           doc.get("rows_title", "Samples"), doc["failures"], doc.get("tables", {}))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"{path}: not a report written by bench.report ({exc})") from exc


def _check_name(name: str) -> None:
    if not name or not set(name) <= _NAME_CHARS:
        raise ReportError(
            f"report name {name!r} must be non-empty lowercase letters, digits, '_' or '-'"
        )


def _as_metric(key: str, value: object) -> Metric:
    if isinstance(value, Metric):
        metric = value
    elif value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        metric = Metric(None if value is None else float(value))
    else:
        raise ReportError(f"metric {key!r}: expected a number, None or Metric, got {value!r}")
    if metric.value is not None and not math.isfinite(metric.value):
        raise ReportError(f"metric {key!r}: value {metric.value!r} is not finite")
    # A goal of 0 is a count that must stay 0 (spurious failovers, frames lost): met only at 0,
    # its ratio goal/value 0 otherwise and infinite at 0. Higher-is-better has no such reading.
    if metric.goal is not None and (not math.isfinite(metric.goal) or metric.goal < 0
                                    or (metric.goal == 0 and metric.higher_is_better)):
        raise ReportError(f"metric {key!r}: goal {metric.goal!r} must be a positive number "
                          "(or 0 where lower is better: a count that must stay 0)")
    return metric


def _check_series(name: str, s: Series) -> None:
    if len(s.x) != len(s.y):
        raise ReportError(
            f"report {name!r}: series {s.label!r} has {len(s.x)} x values but {len(s.y)} y values"
        )


def _json_document(
    name: str,
    title: str,
    metrics: Mapping[str, Metric],
    rows: Sequence[Mapping[str, object]],
    series: Sequence[Series],
    method: str,
    generated_at: str,
    failures: Sequence[Mapping[str, object]] = (),
    rows_title: str = "Samples",
    tables: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
) -> dict[str, object]:
    return {
        "name": name,
        "title": title,
        "generated_at": generated_at,
        "host": {"machine": platform.machine(), "kernel": platform.release()},
        "metrics": {key: m.value for key, m in metrics.items()},
        "metric_details": {
            key: {
                "value": m.value,
                "unit": m.unit,
                "goal": m.goal,
                "higher_is_better": m.higher_is_better,
                "ratio": _json_float(m.ratio()),
                "met": m.met(),
                "note": m.note,
            }
            for key, m in metrics.items()
        },
        "failures": [dict(f) for f in failures],
        "rows_title": rows_title,
        "rows": [dict(row) for row in rows],
        "tables": {title: [dict(row) for row in table] for title, table in (tables or {}).items()},
        "series": [
            {"label": s.label, "x": list(s.x), "y": list(s.y), "xlabel": s.xlabel, "ylabel": s.ylabel}
            for s in series
        ],
        "method": method,
    }


def _json_float(value: float | None) -> float | str | None:
    if value is not None and math.isinf(value):
        return "inf"
    return value


def _fmt(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞"
        if value == int(value) and abs(value) >= 1000:
            return f"{int(value):,}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _goal_text(m: Metric) -> str:
    if m.goal is None:
        return "—"
    return ("≥ " if m.higher_is_better else "≤ ") + _fmt(m.goal)


def _markdown(
    title: str,
    metrics: Mapping[str, Metric],
    rows: Sequence[Mapping[str, object]],
    method: str,
    generated_at: str,
    rows_title: str = "Samples",
    failures: Sequence[Mapping[str, object]] = (),
    tables: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
) -> str:
    host = platform.node() or "unknown host"
    lines = [
        f"# {title}",
        "",
        f"Generated {generated_at} on {host} (kernel {platform.release()}).",
        "",
        "| metric | value | unit | goal | ratio | met | note |",
        "|---|---:|---|---:|---:|:-:|---|",
    ]
    for key, m in metrics.items():
        ratio = m.ratio()
        lines.append(
            f"| `{key}` | {_fmt(m.value)} | {m.unit} | {_goal_text(m)} | "
            f"{'—' if ratio is None else _fmt(round(ratio, 3))} | {_fmt(m.met())} | {_fmt(m.note) if m.note else ''} |"
        )
    lines += ["", "Ratio ≥ 1 means the goal is met (value/goal, or goal/value where lower is better).", ""]
    if failures:
        lines += ["## Failed trials", "", f"**{len(failures)} failed**: the benchmark exited non-zero.", ""]
        lines += _table(failures)
    if method:
        lines += ["## Method", "", method.strip(), ""]
    if rows:
        lines += [f"## {rows_title}", ""] + _table(rows)
    for table_title, table in (tables or {}).items():
        lines += [f"## {table_title}", ""] + (_table(table) if table else ["(none)", ""])
    return "\n".join(lines)


def _table(rows: Sequence[Mapping[str, object]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |" for row in rows]
    return lines + [""]


def _plot(
    path: Path,
    title: str,
    metrics: Mapping[str, Metric],
    series: Sequence[Series],
    log_y: bool,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        if series:
            for s in series:
                xs = [x for x, y in zip(s.x, s.y) if y is not None]
                ys = [y for y in s.y if y is not None]
                ax.plot(xs, ys, marker="o", label=s.label)
            ax.set_xlabel(series[0].xlabel)
            ax.set_ylabel(series[0].ylabel)
            if log_y:
                ax.set_yscale("log")
            ax.legend()
        else:
            with_goal = {k: m for k, m in metrics.items() if m.ratio() is not None}
            shown = with_goal or {k: m for k, m in metrics.items() if m.value is not None}
            keys = list(shown)
            if with_goal:
                values = [min(float(m.ratio() or 0.0), 1e6) for m in shown.values()]
                ax.set_ylabel("ratio to goal (≥ 1 met)")
                ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
            else:
                values = [float(m.value or 0.0) for m in shown.values()]
                ax.set_ylabel("value")
            bars = ax.bar(keys, values, color=["tab:green" if v >= 1 or not with_goal else "tab:red" for v in values])
            ax.bar_label(bars, labels=[f"{v:.3g}" for v in values])
            ax.tick_params(axis="x", rotation=20)
            if log_y:
                ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)

"""scaling.png, drawn like the paper's figures: Fig. 4 (zero-loss throughput per N with its 95 %
interval and what the partition predicts, per frame size and ESP suite; the skewed control
beside it) and Fig. 5 (delivered throughput per second with loss and each gateway's CPU load,
one panel per run)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def draw(path: Path, fig4: Sequence[Mapping[str, Any]], fig5: Mapping[str, Sequence[Mapping[str, Any]]],
         site_a: Sequence[str], quota_percent: float, title: str) -> None:
    """`fig4`: rows (fig4.rows) with suite, frame_bytes, n, partition, quota_percent, t_pps, t_ci95,
    prediction; `fig5`: run label -> snapshot rows (fig5.snapshot_rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in fig4 if r.get("t_pps") is not None and r["quota_percent"] == quota_percent]
    frames = sorted({int(r["frame_bytes"]) for r in rows}, reverse=True) or [1408]
    runs = list(fig5) or ["not measured"]
    cols = max(len(frames), len(runs))
    fig, axes = plt.subplots(2, cols, figsize=(6.5 * cols, 9.5), squeeze=False)
    for col, frame in enumerate(frames):
        ax = axes[0][col]
        groups = sorted({(r["suite"], r["partition"]) for r in rows if r["frame_bytes"] == frame})
        ns = sorted({int(r["n"]) for r in rows if r["frame_bytes"] == frame})
        width = 0.8 / max(1, len(ns))
        for i, n in enumerate(ns):
            xs: list[float] = []
            ys: list[float] = []
            err: list[list[float]] = [[], []]
            pred: list[float | None] = []
            for j, (suite, layout) in enumerate(groups):
                r = next((r for r in rows if r["frame_bytes"] == frame and r["n"] == n and r["suite"] == suite
                          and r["partition"] == layout), None)
                if r is None:
                    continue
                mbps = float(r["t_pps"]) * frame * 8 / 1e6
                lo, hi = (float(x) for x in str(r["t_ci95"]).split("..")) if r.get("t_ci95") else (r["t_pps"],) * 2
                xs.append(j + (i - (len(ns) - 1) / 2) * width)
                ys.append(mbps)
                err[0].append(mbps - float(lo) * frame * 8 / 1e6)
                err[1].append(float(hi) * frame * 8 / 1e6 - mbps)
                one = next((x for x in rows if x["frame_bytes"] == frame and x["n"] == 1 and x["suite"] == suite
                            and x["partition"] == "even"), None)
                pred.append(float(one["t_pps"]) * float(r["prediction"]) * frame * 8 / 1e6 if one else None)
            bars = ax.bar(xs, ys, width, yerr=err, capsize=2, label=f"N = {n}")
            ax.bar_label(bars, fmt="%.3g", fontsize=7)
            ax.scatter([x for x, p in zip(xs, pred) if p is not None], [p for p in pred if p is not None],
                       marker="_", s=300, color="black", zorder=3, label="T(1) x partition's prediction" if i == 0 else None)
        ax.set_xticks(range(len(groups)), [f"{s} {layout}" for s, layout in groups], fontsize=8)
        ax.set_ylabel("zero-loss throughput, Mb/s per direction (95 % interval)")
        ax.set_title(f"Fig. 4 analogue, gateway-bound: {frame}-byte frames")
        ax.legend(fontsize=8)
    for col in range(len(frames), cols):
        axes[0][col].axis("off")
    for col, run in enumerate(runs):
        ax = axes[1][col]
        snaps = fig5.get(run, [])
        if not snaps:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
            continue
        ts = [float(r["t_s"]) for r in snaps]
        ax.bar(ts, [float(r["delivered_pps"]) / 2 for r in snaps], width=0.9, color="lightsteelblue",
               label="delivered, frames/s per direction")
        ax.plot(ts, [float(r["offered_pps"]) / 2 for r in snaps], color="grey", linewidth=0.8, label="offered")
        ax.set_xlabel("seconds since the load started (every loaded bucket on gateway 1)")
        ax.set_ylabel("frames/s per direction")
        right = ax.twinx()
        right.plot(ts, [float(r["loss_percent"]) for r in snaps], color="black", linestyle="--", label="loss %")
        for gw in site_a:
            right.plot(ts, [100.0 * float(r["cpu"].get(gw, 0.0)) / quota_percent for r in snaps],
                       label=f"{gw} CPU, % of its quota")
        right.set_ylabel("loss % / gateway CPU load (% of its quota)")
        ax.set_title(f"Fig. 5 analogue: {run}")
        handles, labels = ax.get_legend_handles_labels()
        rh, rl = right.get_legend_handles_labels()
        ax.legend(handles + rh, labels + rl, fontsize=7, loc="center right")
    for col in range(len(runs), cols):
        axes[1][col].axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

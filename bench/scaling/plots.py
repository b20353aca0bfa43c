"""scaling.png, drawn like the paper's figures: Fig. 4 (zero-loss throughput bars per N, per
frame size and ESP suite) and Fig. 5 (throughput bars per second with loss and per-gateway
CPU lines, once per redistribution policy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def draw(path: Path, fig4: Sequence[Mapping[str, Any]], fig5: Mapping[str, Sequence[Mapping[str, Any]]],
         site_a: Sequence[str], title: str) -> None:
    """`fig4`: rows with series (capacity | cpu), suite, frame_bytes, n, mbps: one group of bars per
    (series, suite); `fig5`: policy -> per-second rows with
    t_s, delivered_mbps, loss_percent, cpu (gateway -> % of a core)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frames = sorted({int(r["frame_bytes"]) for r in fig4}, reverse=True) or [1408]
    policies = list(fig5) or ["supergw"]
    cols = max(len(frames), len(policies))
    fig, axes = plt.subplots(2, cols, figsize=(6.5 * cols, 9), squeeze=False)
    def group(r: Mapping[str, Any]) -> str:
        return f"{r.get('series', '')}-capped {r['suite']}"

    suites = sorted({group(r) for r in fig4})
    for col, frame in enumerate(frames):
        ax = axes[0][col]
        ns = sorted({int(r["n"]) for r in fig4 if int(r["frame_bytes"]) == frame})
        width = 0.8 / max(1, len(ns))
        for i, n in enumerate(ns):
            values = [next((float(r["mbps"]) for r in fig4 if group(r) == s and int(r["frame_bytes"]) == frame
                            and int(r["n"]) == n), 0.0) for s in suites]
            xs = [j + (i - (len(ns) - 1) / 2) * width for j in range(len(suites))]
            bars = ax.bar(xs, values, width, label=f"N = {n}")
            ax.bar_label(bars, fmt="%.3g", fontsize=7)
        ax.set_xticks(range(len(suites)), suites)
        ax.set_ylabel("zero-loss throughput, Mb/s per direction")
        ax.set_title(f"Fig. 4 analogue: {frame}-byte frames")
        ax.legend(fontsize=8)
    for col in range(len(frames), cols):
        axes[0][col].axis("off")
    for col, policy in enumerate(policies):
        ax = axes[1][col]
        rows = fig5.get(policy, [])
        if not rows:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        ts = [float(r["t_s"]) for r in rows]
        ax.bar(ts, [float(r["delivered_mbps"]) for r in rows], width=0.8, color="lightsteelblue",
               label="delivered, Mb/s per direction")
        ax.set_xlabel("seconds since the load started (every flow on gateway 1)")
        ax.set_ylabel("throughput, Mb/s per direction")
        right = ax.twinx()
        right.plot(ts, [float(r["loss_percent"]) for r in rows], color="black", linestyle="--", label="loss %")
        for gw in site_a:
            right.plot(ts, [float(r["cpu"].get(gw, 0.0)) for r in rows], label=f"{gw} CPU % of a core")
        right.set_ylabel("loss % / gateway CPU (% of a core)")
        ax.set_title(f"Fig. 5 analogue: policy {policy}")
        handles = ax.get_legend_handles_labels()
        rh = right.get_legend_handles_labels()
        ax.legend(handles[0] + rh[0], handles[1] + rh[1], fontsize=7, loc="center right")
    for col in range(len(policies), cols):
        axes[1][col].axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

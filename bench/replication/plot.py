"""replication.png: the cost curve, one panel per kind of cost, each line one cost per SA against
the SAs on the primary gateway (log-log: a flat line is a total that grows linearly)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.replication.analysis import CURVES, LAG, PANELS, SWEEP, SizeRun, growth


def draw(path: Path, runs: Sequence[SizeRun], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in runs if r.phases]
    k = growth(done)
    fig, axes = plt.subplots(2, 3, figsize=(18, 10), squeeze=False)
    try:
        for ax, panel in zip(axes.flat, PANELS):
            curves = [c for c in CURVES if c.panel == panel]
            for c in curves:
                pts = [(r.sas, y) for r in done if (y := c.value(r)) is not None and y > 0]
                if pts:
                    kk = k.get(c.key)
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                            label=c.label + ("" if kk is None else f" (k={kk:.2f})"))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("SAs on the primary gateway")
            ax.set_ylabel(f"{curves[0].unit}" + ("" if panel in (LAG, SWEEP) else " per SA"))
            ax.set_title(panel)
            ax.grid(True, which="both", alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
            else:
                ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        for ax in list(axes.flat)[len(PANELS):]:
            ax.axis("off")
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)

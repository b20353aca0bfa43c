"""The gateway benchmark's figure: IPsec throughput gain of each tuning configuration over
the default, per backend (median, with the range of the per-round gains as error bars)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.gateway.tuning import Row


def plot_gains(path: Path, title: str, tables: Mapping[str, Sequence[Row]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs: list[str] = []
    for rows in tables.values():
        configs += [r.config for r in rows if r.config not in configs]
    width = 0.8 / max(1, len(tables))
    fig, ax = plt.subplots(figsize=(10, 4.8))
    try:
        for n, (backend, rows) in enumerate(tables.items()):
            by = {r.config: r for r in rows}
            xs, ys, lo, hi = [], [], [], []
            for i, c in enumerate(configs):
                r = by.get(c)
                if r is None or r.gain is None:
                    continue
                xs.append(i + (n - (len(tables) - 1) / 2) * width)
                ys.append(r.gain)
                lo.append(r.gain - r.gain_low if r.gain_low is not None else 0.0)
                hi.append(r.gain_high - r.gain if r.gain_high is not None else 0.0)
            bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=backend)
            ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=7, padding=2)
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
        ax.set_xticks(range(len(configs)), configs, rotation=20)
        ax.set_ylabel("IPsec throughput / default (median; bars: per-round range)")
        ax.set_title(title)
        ax.legend()
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)

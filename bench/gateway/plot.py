"""The gateway benchmark's figure: left, the IPsec gain of each tuning configuration over the
default per backend (mean of per-round ratios, error bars its 95 % interval); right, IPsec /
plain IP per write size for the default and the whole profile (the paper's sweep)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.gateway.stats import Interval
from bench.gateway.tuning import Row


def plot(path: Path, title: str, tables: Mapping[str, Sequence[Row]],
         ratios: Mapping[str, Mapping[str, Sequence[tuple[int, Interval | None]]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs: list[str] = []
    for rows in tables.values():
        configs += [r.config for r in rows if r.config not in configs]
    width = 0.8 / max(1, len(tables))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 4.8), gridspec_kw={"width_ratios": [3, 2]})
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
        ax.set_ylabel("IPsec throughput / default (bars: 95 % interval)")
        ax.set_title(title, fontsize=9)
        ax.legend()
        ax.grid(True, axis="y", alpha=0.3)
        for backend, by_config in ratios.items():
            for config, points in by_config.items():
                pts = [(size, q) for size, q in points if q is not None]
                if not pts:
                    continue
                bx.errorbar([s for s, _ in pts], [q.mean for _, q in pts],
                            yerr=[[q.mean - q.low for _, q in pts], [q.high - q.mean for _, q in pts]],
                            marker="o", capsize=3, label=f"{backend} {config}")
        bx.set_xscale("log", base=2)
        bx.set_xlabel("bytes per write (iperf3 -l)")
        bx.set_ylabel("IPsec / plain IP (95 % interval)")
        bx.set_title("the paper's sweep: IPsec against plain IP", fontsize=9)
        bx.legend(fontsize=7)
        bx.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)

#!/usr/bin/env python3
"""Plots a bench_copy JSON file: the cudamem/raw ratio of each measurement with its target.

    python3 tools/plot_bench.py docs/bench/bench_copy.json docs/bench/bench_copy.png

Needs matplotlib (pip install matplotlib); the test suite does not.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source: str, target: str) -> None:
    rows = json.load(open(source))
    names = [row["name"] for row in rows]
    ratios = [row["ratio"] for row in rows]
    colors = ["#999999" if row.get("target") is None else "#4c72b0" if row.get("pass") else "#c44e52" for row in rows]
    fig, ax = plt.subplots(figsize=(12, 0.4 * len(rows) + 1.5))
    # Bars grow from 1.0 (parity), so ratios below and above it both show; context rows far from
    # parity are cut at the edge of the axis with their value written there.
    low = max(0.8, min(ratios + [0.99]) - 0.03)
    high = min(1.2, max(ratios + [1.05]) + 0.03)
    ax.barh(names, [r - 1.0 for r in ratios], left=1.0, color=colors)
    for i, row in enumerate(rows):
        if row.get("target") is not None:
            ax.plot([row["target"]] * 2, [i - 0.4, i + 0.4], color="black", linewidth=2)
        where = min(max(row["ratio"], low + 0.005), high - 0.03)
        ax.text(where + 0.003, i, f'{row["ratio"]:.3f}', va="center", fontsize=8)
    ax.axvline(1.0, color="gray", linestyle=":")
    ax.set_xlim(low, high)
    ax.invert_yaxis()
    ax.set_xlabel("cudamem / raw CUDA (host cost: lower is better; bandwidth: higher is better); black: target")
    device = rows[0].get("device", "")
    ax.set_title(f"cudamem vs the raw runtime call, same run, {device}")
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

#!/usr/bin/env python3
"""Plots a benchmark's JSON file as a PNG.

    python3 tools/plot_bench.py docs/bench/bench_copy.json docs/bench/bench_copy.png    ratio to raw, with targets
    python3 tools/plot_bench.py docs/bench/bench_peers.json docs/bench/bench_peers.png  each library, side by side

bench_copy-style files (a list of rows) give one bar per measurement: the cudamem/raw ratio. bench_peers files (an
object with "rows") give one panel per measurement: a bar per library, cudamem's highlighted, the value written
beside it.

Needs matplotlib (pip install matplotlib); the test suite does not.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_peers(data: dict, target: str) -> None:
    measurements = []
    for row in data["rows"]:
        if row["measurement"] not in measurements:
            measurements.append(row["measurement"])
    columns = 3
    panels = (len(measurements) + columns - 1) // columns
    fig, axes = plt.subplots(panels, columns, figsize=(6 * columns, 2.6 * panels), squeeze=False)
    for ax, measurement in zip(axes.flat, measurements):
        rows = [r for r in data["rows"] if r["measurement"] == measurement]
        names = [r["library"] for r in rows]
        values = [r["median"] for r in rows]
        colors = ["#4c72b0" if n.startswith("cudamem") else "#999999" for n in names]
        ax.barh(names, values, color=colors)
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.3g}", va="center", fontsize=7)
        ax.invert_yaxis()
        better = rows[0]["better"]
        ax.set_title(f"{measurement} ({rows[0]['unit']}, {better} is better)", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.tick_params(axis="x", labelsize=7)
        if max(values) > 20 * max(min(values), 1e-9):
            ax.set_xscale("log")
    for ax in list(axes.flat)[len(measurements):]:
        ax.axis("off")
    fig.suptitle(f"cudamem beside the libraries a user would pick instead, same run: {data.get('device', '')}",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.985))  # the figure title keeps a band of its own
    fig.savefig(target, dpi=100)


def main(source: str, target: str) -> None:
    rows = json.load(open(source))
    if isinstance(rows, dict):
        plot_peers(rows, target)
        return
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

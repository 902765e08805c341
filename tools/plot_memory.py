#!/usr/bin/env python3
"""Draws a cudamem memory trace (trace_recorder's Chrome trace / Perfetto JSON) as a PNG: bytes in use over time,
one panel per device (a line per source) and one per stream.

    python3 tools/plot_memory.py memory_trace.json memory_trace.png

The curves are summed here from the "alloc" and "free" instant events, independently of the counters the recorder
also writes. A block freed on another stream than its allocation's counts there, as in the ledger. Needs matplotlib
(pip install matplotlib); the test suite does not.
"""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def curves(events, key):
    """Step curves (times in ms, MiB in use) per key(event), from the instant events in time order."""
    running = defaultdict(int)
    out = defaultdict(lambda: ([], []))
    for e in events:
        k = key(e)
        before = running[k]
        running[k] += e["args"]["bytes"] * (-1 if e["name"] == "free" else 1)
        times, values = out[k]
        times += [e["ts"] / 1000.0, e["ts"] / 1000.0]
        values += [before / 2**20, running[k] / 2**20]
    return out


def main(argv):
    if len(argv) != 3:
        print("usage: python3 tools/plot_memory.py TRACE.json OUT.png", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    instants = sorted((e for e in events if e.get("ph") == "i" and e.get("name") in ("alloc", "free")),
                      key=lambda e: e["ts"])
    if not instants:
        print(f"{argv[1]}: no allocation events", file=sys.stderr)
        return 1
    devices = sorted({e["args"]["device"] for e in instants})
    fig, axes = plt.subplots(len(devices) + 1, 1, figsize=(11, 3.2 * (len(devices) + 1)), squeeze=False)
    per_source = curves(instants, lambda e: (e["args"]["device"], e["args"]["source"]))
    per_device = curves(instants, lambda e: e["args"]["device"])
    for ax, device in zip(axes.flat, devices):
        times, values = per_device[device]
        ax.plot(times, values, color="black", linewidth=1.4, label="all sources")
        for (d, source), (t, v) in sorted(per_source.items()):
            if d == device and len(per_source) > 1:
                ax.plot(t, v, linewidth=0.9, label=source)
        ax.set_title(f"device {device}: bytes in use", fontsize=10)
        ax.set_ylabel("MiB")
        ax.legend(fontsize=8, loc="upper right")
    ax = axes.flat[len(devices)]
    for (device, stream), (t, v) in sorted(curves(instants, lambda e: (e["args"]["device"], e["args"]["stream"])).items()):
        ax.plot(t, v, linewidth=0.9, label=f"device {device}, stream {stream}")
    ax.set_title("per stream: bytes allocated minus freed there", fontsize=10)
    ax.set_ylabel("MiB")
    ax.set_xlabel("ms since the recorder opened")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    print(f"wrote {argv[2]}: {len(instants)} events, {len(devices)} device(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

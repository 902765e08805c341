#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_peers' second table: the caching allocators of CuPy and PyTorch as Python code uses them.

Context, not a like-for-like race: every figure includes the Python interpreter's own cost per call (measured
alone, as "empty loop", and printed beside them). The fair row for PyTorch's allocator is bench_peers' C++ one.
Each row: a repeated 1 MiB allocate + free on one stream, ns per pair, median of 15 interleaved blocks of 2000.

usage: bench/peers_python.py [--json FILE]
"""
import argparse
import json
import statistics
import sys
import time

PAIRS = 2000
BLOCKS = 15
MIB = 1 << 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rows = {}
    versions = {"python": sys.version.split()[0]}

    def empty():
        for _ in range(PAIRS):
            pass

    rows["empty loop (interpreter)"] = empty
    try:
        import cupy

        versions["cupy"] = cupy.__version__
        cupy_stream = cupy.cuda.Stream(non_blocking=True)
        pool = cupy.get_default_memory_pool()

        def cupy_pair():
            with cupy_stream:
                for _ in range(PAIRS):
                    memory = pool.malloc(MIB)
                    del memory

        rows["CuPy MemoryPool.malloc + free"] = cupy_pair
    except ImportError:
        print("cupy: not installed")
    try:
        import torch

        versions["torch"] = torch.__version__
        torch_stream = torch.cuda.Stream()

        def torch_raw_pair():
            handle = torch_stream.cuda_stream
            for _ in range(PAIRS):
                p = torch.cuda.caching_allocator_alloc(MIB, stream=handle)
                torch.cuda.caching_allocator_delete(p)

        def torch_empty_pair():
            with torch.cuda.stream(torch_stream):
                for _ in range(PAIRS):
                    t = torch.empty(MIB, dtype=torch.uint8, device="cuda")
                    del t

        rows["PyTorch caching_allocator_alloc + delete"] = torch_raw_pair
        rows["PyTorch torch.empty + del"] = torch_empty_pair
    except ImportError:
        print("torch: not installed")

    samples = {name: [] for name in rows}
    names = list(rows)
    for block in range(-2, BLOCKS):
        for k in range(len(names)):
            name = names[(k + block + 2) % len(names)]
            start = time.perf_counter_ns()
            rows[name]()
            elapsed = time.perf_counter_ns() - start
            if block >= 0:
                samples[name].append(elapsed / PAIRS)
    out = []
    print(f"{'1 MiB allocate + free, from Python':48} {'ns/pair':>10} {'spread':>8}")
    for name in names:
        values = sorted(samples[name])
        median = statistics.median(values)
        q1, q3 = values[len(values) // 4], values[(3 * len(values)) // 4]
        spread = (q3 - q1) / 2 / median if median else 0.0
        print(f"{name:48} {median:10.1f} {100 * spread:7.1f}%")
        out.append({"library": name, "median_ns": median, "q1": q1, "q3": q3})
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": out, "versions": versions}, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares the global loads and stores of two kernels: in a PTX file, and in a cubin's SASS where cuobjdump is
given. Passes when both kernels have the same non-empty sequence of load and store instructions (opcode and width)
and at least one of them is 128 bits wide.

usage: compare_access.py --ptx FILE [--cubin FILE --cuobjdump PATH] KERNEL_A KERNEL_B"""
import argparse
import re
import subprocess
import sys


def ptx_accesses(text, kernel):
    match = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\(", text)
    if not match:
        sys.exit(f"compare_access: kernel {kernel} not in the PTX")
    body = text[match.end():]
    end = re.search(r"^}", body, re.MULTILINE)
    body = body[: end.start()] if end else body
    return re.findall(r"\b((?:ld|st)\.global[\w.]*)", body)


def sass_accesses(text, kernel):
    sections = re.split(r"\n\s*Function : ", text)
    for section in sections[1:]:
        name, _, rest = section.partition("\n")
        if name.strip() == kernel:
            return re.findall(r"\b((?:LDG|STG)[\w.]*)", rest)
    sys.exit(f"compare_access: kernel {kernel} not in the SASS")


def compare(what, a, b, kernels, wide):
    print(f"{what}: {kernels[0]}: {' '.join(a)}")
    print(f"{what}: {kernels[1]}: {' '.join(b)}")
    if not a or a != b:
        sys.exit(f"compare_access: {what}: the two kernels' global accesses differ (or there are none)")
    if not any(wide(op) for op in a):
        sys.exit(f"compare_access: {what}: no 128-bit access: the span does not keep float4 loads whole")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ptx", required=True)
    parser.add_argument("--cubin")
    parser.add_argument("--cuobjdump")
    parser.add_argument("kernels", nargs=2)
    args = parser.parse_args()
    with open(args.ptx) as f:
        ptx = f.read()
    compare("PTX", ptx_accesses(ptx, args.kernels[0]), ptx_accesses(ptx, args.kernels[1]), args.kernels,
            lambda op: ".v4." in op and (op.endswith("32") or ".b32" in op))
    if args.cubin and args.cuobjdump:
        sass = subprocess.run([args.cuobjdump, "-sass", args.cubin], check=True, capture_output=True, text=True).stdout
        compare("SASS", sass_accesses(sass, args.kernels[0]), sass_accesses(sass, args.kernels[1]), args.kernels,
                lambda op: ".128" in op)
    else:
        print("SASS: cuobjdump not found; PTX compared only")


if __name__ == "__main__":
    main()

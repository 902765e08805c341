#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fetches the libraries bench_peers compares cudamem with, none of which cudamem depends on: RMM (librmm-cu13, with
# rapids-logger) and CCCL (nvidia-cuda-cccl), as wheels from the Python package index, unpacked into .peers/ (ignored
# by git). Prints the CMake option to configure the benchmarks with. PyTorch and CuPy are not fetched: bench_peers
# takes PyTorch's C++ headers from an installed torch, bench/peers_python.py uses the installed torch and cupy.
#
#   tools/fetch-peers.sh            download (where .peers/wheels lacks a wheel) and unpack
#   CUDAMEM_NO_DOWNLOAD=1 tools/fetch-peers.sh   unpack the wheels already in .peers/wheels (a machine offline)
#
# Then: cmake -S . -B build-bench -DCUDAMEM_BUILD_BENCH=ON -DCUDAMEM_PEERS_DIR=$PWD/.peers/unpacked
set -euo pipefail
cd "$(dirname "$0")/.."
peers=.peers
wheels=(librmm-cu13==26.10.0 rapids-logger==0.3.0 nvidia-cuda-cccl==13.3.5.0.6)
mkdir -p "$peers/wheels"
if [ "${CUDAMEM_NO_DOWNLOAD:-0}" != 1 ]; then
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$peers/wheels" "${wheels[@]}"
fi
shopt -s nullglob
found=("$peers"/wheels/*.whl)
[ ${#found[@]} -gt 0 ] || { echo "fetch-peers.sh: no wheels in $peers/wheels" >&2; exit 1; }
rm -rf "$peers/unpacked"
mkdir -p "$peers/unpacked"
for wheel in "${found[@]}"; do
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$peers/unpacked"
done
echo "fetch-peers.sh: unpacked ${#found[@]} wheels into $peers/unpacked"
echo "-DCUDAMEM_PEERS_DIR=$PWD/$peers/unpacked"

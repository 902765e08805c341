#!/usr/bin/env bash
# Installs what the test suite needs and is missing (Debian's catch2), then configures, builds and
# runs the whole suite. On a machine without a GPU the gpu tests report "skipped", never "passed".
# This is the README's test command and what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
dpkg -s catch2 >/dev/null 2>&1 || missing+=(catch2)
command -v doxygen >/dev/null 2>&1 || missing+=(doxygen)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}"
fi
export PATH="/usr/local/cuda/bin:$PATH"
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"

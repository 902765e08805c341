#!/usr/bin/env bash
# compile_time.sh: what including cudamem costs nvcc. Compiles three translation units that differ
# only in their first #include (the same kernel and the same main follow):
#   raw      <cuda_runtime.h>
#   cudamem  <cudamem/cudamem.hpp>            (the umbrella header: everything but interop/)
#   thrust   <thrust/device_vector.h>         (for context)
# each with `nvcc -std=c++20 -arch=$NVCC_ARCH -c`: one untimed warm-up, then the median of $REPS
# wall-clock timings. Reports cudamem/raw against the target (<= 2.2) and thrust/raw for context.
#
# usage: bench/compile_time.sh [--json FILE]
# env:   NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), NVCC_ARCH (default sm_90),
#        REPS (default 3), TARGET (default 2.2)
# Needs no GPU. Exit status: 0 when it ran (PASS or FAIL is in the output and the JSON), 1 when nvcc
# is missing or a file fails to compile, 2 on a usage error.
set -euo pipefail

usage() { echo "usage: $0 [--json FILE]" >&2; exit 2; }

json_path=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) [[ $# -ge 2 ]] || usage; json_path="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage ;;
  esac
done

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
include_dir="$(cd "$script_dir/../include" && pwd)"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
arch="${NVCC_ARCH:-sm_90}"
reps="${REPS:-3}"
target="${TARGET:-2.2}"
[[ -x "$nvcc" ]] || { echo "compile_time.sh: nvcc not found (set NVCC)" >&2; exit 1; }
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "compile_time.sh: REPS must be a positive integer" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The body every variant shares: a kernel and a main that launches it through the plain runtime
# API, so that the only difference between the files is the header they include first.
body='
__global__ void scale(float* data, float factor, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) data[i] *= factor;
}

int main() {
  constexpr int count = 1 << 20;
  float* data = nullptr;
  if (cudaMalloc(&data, count * sizeof(float)) != cudaSuccess) return 1;
  scale<<<(count + 255) / 256, 256>>>(data, 2.0f, count);
  const bool ok = cudaDeviceSynchronize() == cudaSuccess;
  cudaFree(data);
  return ok ? 0 : 1;
}'

names=(raw cudamem thrust)
headers=("<cuda_runtime.h>" "<cudamem/cudamem.hpp>" "<thrust/device_vector.h>")
for i in "${!names[@]}"; do
  printf '#include %s\n%s\n' "${headers[$i]}" "$body" > "$work/${names[$i]}.cu"
done

now_ns() { date +%s%N; }

# Seconds (3 decimals) of one compile of $1.cu; the compiler's output goes to $work/$1.log.
compile_once() {
  local name="$1" start stop
  start=$(now_ns)
  if ! "$nvcc" -std=c++20 -arch="$arch" -I"$include_dir" -c "$work/$name.cu" -o "$work/$name.o" \
       > "$work/$name.log" 2>&1; then
    echo "compile_time.sh: $name.cu failed to compile:" >&2
    cat "$work/$name.log" >&2
    exit 1
  fi
  stop=$(now_ns)
  awk -v ns=$((stop - start)) 'BEGIN { printf "%.3f", ns / 1e9 }'
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A result
for name in "${names[@]}"; do compile_once "$name" > /dev/null; done  # warm-up: caches, page cache
# Interleave the variants round by round, so that load on the machine falls on all of them alike.
declare -A samples
for ((rep = 0; rep < reps; rep++)); do
  for name in "${names[@]}"; do samples[$name]+="$(compile_once "$name") "; done
done
for name in "${names[@]}"; do
  # shellcheck disable=SC2086  # word splitting of the sample list is intended
  result[$name]=$(median ${samples[$name]})
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
cudamem_ratio=$(ratio "${result[cudamem]}" "${result[raw]}")
thrust_ratio=$(ratio "${result[thrust]}" "${result[raw]}")
passed=$(awk -v r="$cudamem_ratio" -v t="$target" 'BEGIN { print (r <= t) ? "true" : "false" }')
verdict=$([[ $passed == true ]] && echo PASS || echo FAIL)

echo "nvcc compile time: $("$nvcc" --version | tail -n 1), -std=c++20 -arch=$arch -c, median of $reps after 1 warm-up"
printf '%-10s %-28s %10s %8s\n' variant include seconds "x raw"
for i in "${!names[@]}"; do
  name=${names[$i]}
  printf '%-10s %-28s %10s %8s\n' "$name" "${headers[$i]}" "${result[$name]}" "$(ratio "${result[$name]}" "${result[raw]}")"
done
echo
echo "compile-time cudamem/raw ratio $cudamem_ratio (target <= $target): $verdict"
echo "compile-time thrust/raw ratio $thrust_ratio (context)"

if [[ -n "$json_path" ]]; then
  cat > "$json_path" <<EOF
[
  {"name": "compile time: cudamem.hpp vs cuda_runtime.h", "unit": "s", "raw": ${result[raw]}, "cudamem": ${result[cudamem]}, "ratio": $cudamem_ratio, "better": "lower", "target": $target, "pass": $passed, "arch": "$arch", "reps": $reps},
  {"name": "compile time: thrust/device_vector.h vs cuda_runtime.h", "unit": "s", "raw": ${result[raw]}, "thrust": ${result[thrust]}, "ratio": $thrust_ratio, "better": "lower", "target": null, "pass": null, "arch": "$arch", "reps": $reps}
]
EOF
  echo "wrote $json_path"
fi

#!/usr/bin/env bash
# compile_time.sh: what using cudamem costs nvcc, against the same code written on the CUDA runtime alone.
# Two pairs of translation units (bench/compile_time/*.cu) and a context row, each compiled as a user would:
#   nvcc -std=c++20 -arch=$NVCC_ARCH -O2 -c FILE
#   program  raw_program.cu      <cuda_runtime.h>: cudaMallocAsync, cudaMemcpyAsync, cudaMemsetAsync, a fill kernel,
#                                a kernel on a pitched pointer, a hand-written free list
#            cudamem_program.cu  <cudamem/cudamem.hpp>: a buffer, stream-ordered copy, fill_bytes and fill, a kernel
#                                on a pitched view, a caching pool                          target: <= 1.5 x raw
#   kernels  raw_kernels.cu      two kernels on raw pointers
#            cudamem_kernels.cu  the same kernels on span and the pitched view, including only the view headers
#                                (<cudamem/span.hpp> and <cudamem/pitched_span.hpp>, else <cudamem/pitched.hpp>)
#                                                                                           target: <= 1.1 x raw
#   sketch   cudamem_program.cu again, against bench/compile_time/sketch/cudamem/cudamem.hpp, which stands in for the
#            umbrella: the view layer and result<T> as they are, the rest only declared, as a separately compiled
#            core would leave it. Compared with raw_program.cu; no target (it measures a design, not the library).
# One untimed warm-up of each file, then $REPS rounds, interleaved (raw, cudamem, raw, cudamem, ...), so that load
# on the machine falls on both alike. The figure compared is the median CPU time (user + sys) of the whole nvcc
# process tree (cudafe++, cicc, ptxas, gcc), which a shared, loaded machine disturbs far less than wall time; the
# median wall time is printed too.
#
# usage: bench/compile_time.sh [--json FILE]
# env:   NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), NVCC_ARCH (default sm_90), REPS (default 5),
#        PROGRAM_TARGET (default 1.5), KERNELS_TARGET (default 1.1)
# Needs no GPU. Exit status: 0 when every target is met; 1 when one is missed (FAIL in the output, "pass": false in
# the JSON); 2 on a usage error; 3 when nvcc is missing or a file fails to compile (the sketch too: it uses a few
# internals, detail::bytes_of and error's constructors, which a refactor must keep it compiling against).
set -euo pipefail

usage() { echo "usage: $0 [--json FILE]" >&2; exit 2; }

json_path=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) [[ $# -ge 2 ]] || usage; json_path="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage ;;
  esac
done

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
include_dir="$(cd "$script_dir/../include" && pwd)"
source_dir="$script_dir/compile_time"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
arch="${NVCC_ARCH:-sm_90}"
reps="${REPS:-5}"
declare -A target=([program]="${PROGRAM_TARGET:-1.5}" [kernels]="${KERNELS_TARGET:-1.1}")
[[ -x "$nvcc" ]] || { echo "compile_time.sh: nvcc not found (set NVCC)" >&2; exit 3; }
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "compile_time.sh: REPS must be a positive integer" >&2; exit 2; }
flags=(-std=c++20 "-arch=$arch" -O2 -c)
if [[ -f "$include_dir/cudamem/pitched_span.hpp" ]]; then pitched_header="cudamem/pitched_span.hpp"
else pitched_header="cudamem/pitched.hpp"; fi  # cudamem_kernels.cu picks it with __has_include

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One compile of $1.cu (the sketch row: see below); prints "cpu wall" in seconds. cpu: user + sys of the children of a subshell that ran only
# nvcc (bash's `times`; nvcc waits for each of its phases, so their times are included).
# The sketch row compiles cudamem_program.cu with the sketch's directory first on the include path.
compile_once() {
  local name="$1" start stop cpu source="$source_dir/$1.cu" includes=(-I"$include_dir")
  if [[ $name == sketch_program ]]; then
    source="$source_dir/cudamem_program.cu"
    includes=(-I"$source_dir/sketch" "${includes[@]}")
  fi
  start=$(date +%s%N)
  if ! (
    "$nvcc" "${flags[@]}" "${includes[@]}" "$source" -o "$work/$name.o" > "$work/$name.log" 2>&1 || exit 1
    times > "$work/$name.times"
  ); then
    echo "compile_time.sh: $name failed to compile:" >&2
    cat "$work/$name.log" >&2
    exit 3
  fi
  stop=$(date +%s%N)
  # The second line of `times` is the children's: "XmY.YYYs XmZ.ZZZs" (user, sys).
  cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.3f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
        "$work/$name.times")
  awk -v cpu="$cpu" -v ns=$((stop - start)) 'BEGIN { printf "%s %.3f", cpu, ns / 1e9 }'
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

pairs=(program kernels)
files=()
for pair in "${pairs[@]}"; do files+=("raw_$pair" "cudamem_$pair"); done
files+=(sketch_program)
for name in "${files[@]}"; do compile_once "$name" > /dev/null; done  # warm-up: page cache, nvcc's own files
declare -A cpu_samples wall_samples
for ((rep = 0; rep < reps; rep++)); do
  for name in "${files[@]}"; do
    sample=$(compile_once "$name")  # an assignment, so that a failed compile stops the script (set -e)
    read -r cpu wall <<< "$sample"
    cpu_samples[$name]+="$cpu "
    wall_samples[$name]+="$wall "
  done
done
declare -A cpu wall
for name in "${files[@]}"; do
  # shellcheck disable=SC2086  # word splitting of the sample lists is intended
  cpu[$name]=$(median ${cpu_samples[$name]})
  # shellcheck disable=SC2086
  wall[$name]=$(median ${wall_samples[$name]})
done

echo "nvcc compile time: $("$nvcc" --version | tail -n 1)"
echo "flags: nvcc ${flags[*]}; median of $reps interleaved rounds after 1 warm-up; view header: <$pitched_header>"
printf '%-28s %10s %10s\n' file "cpu s" "wall s"
for name in "${files[@]}"; do
  label="$name.cu"
  [[ $name == sketch_program ]] && label="cudamem_program.cu, sketch"
  printf '%-28s %10s %10s\n' "$label" "${cpu[$name]}" "${wall[$name]}"
done
echo
failed=0
declare -A cpu_ratio wall_ratio passed
for pair in "${pairs[@]}"; do
  cpu_ratio[$pair]=$(ratio "${cpu[cudamem_$pair]}" "${cpu[raw_$pair]}")
  wall_ratio[$pair]=$(ratio "${wall[cudamem_$pair]}" "${wall[raw_$pair]}")
  passed[$pair]=$(awk -v r="${cpu_ratio[$pair]}" -v t="${target[$pair]}" 'BEGIN { print (r <= t) ? "true" : "false" }')
  verdict=PASS
  [[ ${passed[$pair]} == true ]] || { verdict=FAIL; failed=1; }
  echo "compile-time $pair cudamem/raw ratio ${cpu_ratio[$pair]} CPU (target <= ${target[$pair]}), wall ${wall_ratio[$pair]}: $verdict"
done
sketch_ratio=$(ratio "${cpu[sketch_program]}" "${cpu[raw_program]}")
sketch_wall_ratio=$(ratio "${wall[sketch_program]}" "${wall[raw_program]}")
echo "compile-time sketch (the program against a declared-only core) /raw ratio $sketch_ratio CPU, wall $sketch_wall_ratio: no target"

if [[ -n "$json_path" ]]; then
  {
    echo "["
    for pair in "${pairs[@]}"; do
      printf '  {"name": "compile time: %s, cudamem vs cuda_runtime.h", "unit": "s (CPU)", "raw": %s, "cudamem": %s, "ratio": %s, "raw_wall": %s, "cudamem_wall": %s, "wall_ratio": %s, "better": "lower", "target": %s, "pass": %s, "arch": "%s", "reps": %s, "flags": "%s", "view_header": "%s"}%s\n' \
        "$pair" "${cpu[raw_$pair]}" "${cpu[cudamem_$pair]}" "${cpu_ratio[$pair]}" "${wall[raw_$pair]}" \
        "${wall[cudamem_$pair]}" "${wall_ratio[$pair]}" "${target[$pair]}" "${passed[$pair]}" "$arch" "$reps" \
        "nvcc ${flags[*]}" "$pitched_header" ","
    done
    printf '  {"name": "compile time: program against a declared-only core (sketch), vs cuda_runtime.h", "unit": "s (CPU)", "raw": %s, "cudamem": %s, "ratio": %s, "raw_wall": %s, "cudamem_wall": %s, "wall_ratio": %s, "better": "lower", "target": null, "pass": null, "arch": "%s", "reps": %s, "flags": "%s"}\n' \
      "${cpu[raw_program]}" "${cpu[sketch_program]}" "$sketch_ratio" "${wall[raw_program]}" "${wall[sketch_program]}" \
      "$sketch_wall_ratio" "$arch" "$reps" "nvcc ${flags[*]}"
    echo "]"
  } > "$json_path"
  echo "wrote $json_path"
fi
exit $failed

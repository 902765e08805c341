#!/usr/bin/env bash
# Runs on a machine with a GPU: configure, build, the whole CTest suite, compute-sanitizer
# (memcheck with leak check, racecheck, synccheck, initcheck), the examples and the benchmarks.
# Logs go to $OUT (default ./gpu-out). Catch2 2 comes from .deps (../shared/tools/stage-gpu-deps).
# Usage: tools/gpu-suite.sh [all|tests|sanitize|bench]...   (default: all)
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
steps=${*:-all}
want() { [[ " $steps " == *" all "* || " $steps " == *" $1 "* ]]; }
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpus.txt" 2>&1
note "gpus: $(tr '\n' ';' <"$OUT/gpus.txt")"

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/.deps/usr" -DCUDAMEM_BUILD_BENCH=ON \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
start=$(date +%s)
cmake --build "$BUILD" -j"$JOBS" -- -k >"$OUT/build.log" 2>&1
note "build: rc=$? in $(( $(date +%s) - start )) s"
grep -E "error|warning" "$OUT/build.log" | head -40

if want tests; then
  (cd "$BUILD" && ctest -j4 --output-on-failure >"$OUT/ctest.log" 2>&1)
  note "ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")"
  grep -E "Skipped|Failed|\*\*\*" "$OUT/ctest.log" | head -20 | tee -a "$summary"
  for source in examples/*.cu examples/*.cpp; do
    example=$(basename "${source%.*}")
    "$BUILD/examples/$example" >"$OUT/example_$example.log" 2>&1
    note "example $example: rc=$? $(tail -1 "$OUT/example_$example.log")"
  done
fi

if want sanitize; then
  sanitize() {  # tool, log name, binary and arguments
    local tool=$1 name=$2
    shift 2
    timeout "${SAN_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 99 "${SAN_EXTRA[@]}" "$@" >"$OUT/san_$name.log" 2>&1
    note "sanitizer $name: rc=$? $(grep -E '=+ (ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY)|hazard' "$OUT/san_$name.log" | tr '\n' ' ') $(grep -E 'test cases|All tests passed' "$OUT/san_$name.log" | tr '\n' ' ')"
  }
  # The misuse tests provoke CUDA API errors on purpose (a 1 PiB allocation, a double registration,
  # a capture query); memcheck would count each one, so API-error reports are off: memory errors,
  # leaks and kernel faults are still reported.
  SAN_EXTRA=(--leak-check full --report-api-errors no)
  sanitize memcheck memcheck_gpu "$BUILD/tests/gpu_tests" "~[multi_gpu]"
  sanitize memcheck memcheck_ptds "$BUILD/tests/gpu_tests_ptds"
  sanitize memcheck memcheck_gpp "$BUILD/tests/gpp_end_to_end"
  SAN_EXTRA=()
  sanitize racecheck racecheck_gpu "$BUILD/tests/gpu_tests" "~[large]~[multi_gpu]"
  sanitize synccheck synccheck_gpu "$BUILD/tests/gpu_tests" "~[large]~[multi_gpu]"
  sanitize initcheck initcheck_gpu "$BUILD/tests/gpu_tests" "~[large]~[multi_gpu]"
  SAN_EXTRA=(--leak-check full --report-api-errors no)
  CUDAMEM_TEST_MIN_DEVICES=2 sanitize memcheck memcheck_multi_gpu "$BUILD/tests/gpu_tests" "[multi_gpu]"
fi

if want bench; then
  if [ -x "$BUILD/bench/bench_copy" ]; then
    "$BUILD/bench/bench_copy" --json "$OUT/bench_copy.json" >"$OUT/bench_copy.log" 2>&1
    note "bench_copy: rc=$?"
    tail -12 "$OUT/bench_copy.log" | tee -a "$summary"
  fi
  if [ -x bench/compile_time.sh ]; then
    bench/compile_time.sh --json "$OUT/compile_time.json" >"$OUT/compile_time.log" 2>&1
    note "compile_time: rc=$? $(tail -3 "$OUT/compile_time.log" | tr '\n' ' ')"
  fi
fi
exit 0

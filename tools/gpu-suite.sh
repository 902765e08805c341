#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The GPU suite, for a machine with a GPU: configure and build (benchmarks included), then the
# whole CTest suite and the examples, compute-sanitizer (memcheck with leak check, racecheck,
# synccheck, initcheck) and the benchmarks. It exits non-zero when any step fails, so a CI job can
# run it as it is; the summary says which.
#
#   tools/gpu-suite.sh [all|tests|sanitize|bench]...     (default: all)
#
# Environment: BUILD (build directory, default build-gpu), OUT (logs, default $BUILD/gpu-suite),
# JOBS (parallel jobs), SAN_TIMEOUT (seconds per sanitizer run, default 240). Extra CMake
# arguments go in CMAKE_ARGS (e.g. CMAKE_ARGS="-DCMAKE_PREFIX_PATH=/opt/catch2").
# The build is for the GPUs present (cmake/cudamemArchitectures.cmake) unless
# CMAKE_CUDA_ARCHITECTURES is given in CMAKE_ARGS.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-$BUILD/gpu-suite}
JOBS=${JOBS:-$(nproc)}
steps=${*:-all}
want() { [[ " $steps " == *" all "* || " $steps " == *" $1 "* ]]; }
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
failures=()
failed() { failures+=("$1"); note "FAILED: $1"; }

if nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpus.txt" 2>&1; then
  note "gpus: $(tr '\n' ';' <"$OUT/gpus.txt")"
else
  failed "nvidia-smi: no GPU or no driver ($(head -1 "$OUT/gpus.txt"))"
fi

# shellcheck disable=SC2086  # CMAKE_ARGS is a list of arguments
if ! cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCUDAMEM_BUILD_TESTS=ON -DCUDAMEM_BUILD_EXAMPLES=ON \
     -DCUDAMEM_BUILD_BENCH=ON ${CMAKE_ARGS:-} >"$OUT/configure.log" 2>&1; then
  tail -40 "$OUT/configure.log"
  failed "configure (see $OUT/configure.log)"
  exit 1
fi
start=$(date +%s)
cmake --build "$BUILD" -j"$JOBS" -- -k >"$OUT/build.log" 2>&1
build_rc=$?
note "build: rc=$build_rc in $(($(date +%s) - start)) s"
if [ $build_rc -ne 0 ]; then
  grep -E "error|warning" "$OUT/build.log" | head -40
  failed "build (see $OUT/build.log)"
fi

if want tests; then
  ctest --test-dir "$BUILD" -j4 --output-on-failure --no-tests=error >"$OUT/ctest.log" 2>&1
  ctest_rc=$?
  note "ctest: rc=$ctest_rc $(grep -E 'tests passed|tests failed' "$OUT/ctest.log")"
  grep -E "Skipped|Failed|\*\*\*" "$OUT/ctest.log" | head -20 | tee -a "$summary"
  [ $ctest_rc -eq 0 ] || failed "ctest (see $OUT/ctest.log)"
  for source in examples/*.cu examples/*.cpp; do
    example=$(basename "${source%.*}")
    "$BUILD/examples/$example" >"$OUT/example_$example.log" 2>&1
    rc=$?
    note "example $example: rc=$rc $(tail -1 "$OUT/example_$example.log")"
    [ $rc -eq 0 ] || failed "example $example"
  done
fi

if want sanitize; then
  sanitize() {  # tool, log name, binary and arguments
    local tool=$1 name=$2 rc
    shift 2
    # --target-processes all: the [ipc] tests start child processes of the test binary, checked as well.
    timeout "${SAN_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 99 --target-processes all \
      "${SAN_EXTRA[@]}" "$@" \
      >"$OUT/san_$name.log" 2>&1
    rc=$?
    note "sanitizer $name: rc=$rc $(grep -E '=+ (ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY)|hazard' "$OUT/san_$name.log" | tr '\n' ' ') $(grep -E 'test cases|All tests passed' "$OUT/san_$name.log" | tr '\n' ' ')"
    # 77: the test binary found too few devices (the multi-GPU run on a one-GPU machine).
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || failed "sanitizer $name (see $OUT/san_$name.log)"
  }
  # The misuse tests provoke CUDA API errors on purpose (a 1 PiB allocation, a double registration,
  # a capture query); memcheck would count each one, so API-error reports are off: memory errors,
  # leaks and kernel faults are still reported.
  SAN_EXTRA=(--leak-check full --report-api-errors no)
  # [concurrent] tests need a kernel running beside the host, which serialized launches prevent.
  # [oom] tests fill the device and compare each figure of the failure with CUDA's own; under memcheck
  # the tool's own device memory and tracking move where the device runs out (a 1 GiB request the pool
  # refused was then granted through a buffer), so they run without it (racecheck and synccheck run them).
  sanitize memcheck memcheck_gpu "$BUILD/tests/gpu_tests" "~[multi_gpu]~[concurrent]~[oom]"
  sanitize memcheck memcheck_ptds "$BUILD/tests/gpu_tests_ptds"
  sanitize memcheck memcheck_gpp "$BUILD/tests/gpp_end_to_end"
  SAN_EXTRA=()
  sanitize racecheck racecheck_gpu "$BUILD/tests/gpu_tests" "~[large]~[multi_gpu]~[concurrent]"
  sanitize synccheck synccheck_gpu "$BUILD/tests/gpu_tests" "~[large]~[multi_gpu]~[concurrent]"
  # initcheck cannot see writes another process made: memory an [ipc] test imports reads as uninitialized.
  sanitize initcheck initcheck_gpu "$BUILD/tests/gpu_tests" "~[large]~[multi_gpu]~[concurrent]~[ipc]"
  SAN_EXTRA=(--leak-check full --report-api-errors no)
  CUDAMEM_TEST_MIN_DEVICES=2 sanitize memcheck memcheck_multi_gpu "$BUILD/tests/gpu_tests" "[multi_gpu]~[nccl]"
fi

if want bench; then
  for source in bench/bench_*.cu; do
    bench=$(basename "${source%.cu}")
    if [ ! -x "$BUILD/bench/$bench" ]; then
      failed "$bench was not built"
      continue
    fi
    "$BUILD/bench/$bench" --json "$OUT/$bench.json" >"$OUT/$bench.log" 2>&1
    rc=$?
    note "$bench: rc=$rc"
    sed -n '/ratio .* (target/,$p' "$OUT/$bench.log" | tee -a "$summary"
    # 77: too few devices for this benchmark (two-GPU benchmarks on a one-GPU machine).
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || failed "$bench (see $OUT/$bench.log)"
  done
  if [ -x bench/compile_time.sh ]; then
    bench/compile_time.sh --json "$OUT/compile_time.json" >"$OUT/compile_time.log" 2>&1
    rc=$?
    note "compile_time: rc=$rc $(grep -E 'ratio .* \(target' "$OUT/compile_time.log" | tr '\n' ' ')"
    # A missed target is a failed step: the script exits 1 then; a FAIL line counts even where the exit status does not.
    if [ $rc -ne 0 ] || grep -q ': FAIL$' "$OUT/compile_time.log"; then failed "compile_time (see $OUT/compile_time.log)"; fi
  fi
fi

if [ ${#failures[@]} -gt 0 ]; then
  note "gpu-suite: ${#failures[@]} step(s) failed: $(IFS=';'; echo "${failures[*]}")"
  exit 1
fi
note "gpu-suite: every step passed (logs in $OUT)"

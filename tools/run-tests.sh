#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's test command, and what CI runs (.ci/run): configures, builds and runs the whole
# test suite in build/ (or $BUILD_DIR), whatever an earlier configure of that directory chose
# (tests and examples are always switched on), and fails when no test was found. Without a GPU
# the gpu tests report "skipped", never "passed".
#
#   tools/run-tests.sh [ctest arguments]     e.g. tools/run-tests.sh -L host
#
# What it needs: CMake >= 3.25, a C++20 host compiler, the CUDA toolkit (nvcc: $CUDACXX, else
# nvcc on PATH, else /usr/local/cuda/bin/nvcc), Python 3 and Catch2 (3, or 2.13). Optional:
# doxygen (api_docs test), clang-format-19 (format test), clang with libFuzzer (fuzz tests), Conan 2
# (Conan package test), DLPack headers (DLPack interop tests); their tests report "skipped" without them.
# On Debian 12 it installs what is missing with apt-get, and Conan from PyPI into a virtual
# environment in the build directory, each after saying what (and asking, when run from a terminal).
# CUDAMEM_NO_INSTALL=1 installs nothing. Elsewhere it lists what is missing and how to get it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
say() { echo "run-tests.sh: $*"; }

# --- the CUDA compiler: the user's choice first; never put a toolkit ahead of it on PATH -------
if [ -n "${CUDACXX:-}" ]; then
  nvcc_path=$CUDACXX
elif command -v nvcc >/dev/null 2>&1; then
  nvcc_path=$(command -v nvcc)
elif [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc_path=/usr/local/cuda/bin/nvcc
  export CUDACXX=$nvcc_path  # CMake and FindCUDAToolkit both honour it
else
  nvcc_path=""
fi

# --- what is missing ------------------------------------------------------------------------
is_debian12=$( (. /etc/os-release 2>/dev/null && [ "${ID:-}" = debian ] && [ "${VERSION_ID:-}" = 12 ]) && echo 1 || echo 0)
missing_required=()  # "what|Debian package|how elsewhere"
missing_optional=()

# Catch2 as CMake finds it (3, or 2.13), not as a package manager lists it.
catch2_found() {
  local probe
  probe=$(mktemp -d)
  cat >"$probe/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(probe LANGUAGES NONE)
find_package(Catch2 3 QUIET)
if(NOT Catch2_FOUND)
  find_package(Catch2 2.13 QUIET)
endif()
if(NOT Catch2_FOUND)
  message(FATAL_ERROR "no Catch2")
endif()
EOF
  local rc=0
  cmake -S "$probe" -B "$probe/build" >/dev/null 2>&1 || rc=1
  rm -rf "$probe"
  return $rc
}

if ! command -v cmake >/dev/null 2>&1; then
  missing_required+=("CMake >= 3.25|cmake|https://cmake.org/download/ or pip install cmake")
  missing_required+=("Catch2 3, or 2.13 (not looked for without CMake)|catch2|your system's Catch2 package")
fi
command -v python3 >/dev/null 2>&1 || missing_required+=("Python 3|python3|your system's python3 package")
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
  missing_required+=("a C++20 compiler (g++ 12 or later)|g++|your system's g++ package")
if [ -z "$nvcc_path" ]; then
  missing_required+=("the CUDA toolkit (nvcc): set CUDACXX or put nvcc on PATH|-|https://developer.nvidia.com/cuda-downloads")
fi
if command -v cmake >/dev/null 2>&1 && ! catch2_found; then
  missing_required+=("Catch2 3, or 2.13|catch2|Ubuntu 24.04: apt-get install catch2; or build Catch2 3 and set CMAKE_PREFIX_PATH")
fi
command -v doxygen >/dev/null 2>&1 || missing_optional+=("doxygen (api_docs test)|doxygen")
[ -f /usr/include/dlpack/dlpack.h ] || [ -f /usr/local/include/dlpack/dlpack.h ] ||
  missing_optional+=("DLPack headers (DLPack interop tests)|libdlpack-dev")
if ! tools/format.sh --check /dev/null >/dev/null 2>&1; then
  missing_optional+=("clang-format 19 (format test)|clang-format-19")
fi
# The fuzz tests: a clang that links libFuzzer (Debian 12: clang-14 with its runtime library).
fuzz_probe=$(mktemp -d)
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$fuzz_probe/f.cpp"
fuzz_cxx=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$fuzz_cxx" ] || ! "$fuzz_cxx" -fsanitize=fuzzer "$fuzz_probe/f.cpp" -o "$fuzz_probe/f" >/dev/null 2>&1; then
  missing_optional+=("clang with libFuzzer (fuzz tests)|clang-14 libclang-rt-14-dev")
fi
rm -rf "$fuzz_probe"
if [ "$is_debian12" = 1 ] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  missing_optional+=("Python venv (to install Conan for the Conan package test)|python3-venv")
fi

# --- install on Debian 12, or say what is missing elsewhere --------------------------------
package_of() { local package; package=$(cut -d'|' -f2 <<<"$1"); [ "$package" = "-" ] || echo "$package"; }
required_packages=()
optional_packages=()
for entry in "${missing_required[@]}"; do
  package=$(package_of "$entry") && [ -n "$package" ] && required_packages+=("$package")
done
for entry in "${missing_optional[@]}"; do
  package=$(package_of "$entry") && [ -n "$package" ] && read -r -a split <<<"$package" && optional_packages+=("${split[@]}")
done
packages=("${required_packages[@]}" "${optional_packages[@]}")
if [ ${#packages[@]} -gt 0 ] && [ "$is_debian12" = 1 ] && [ "${CUDAMEM_NO_INSTALL:-0}" != 1 ] &&
   [ "${CUDAMEM_APT_DONE:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
  say "this Debian 12 machine lacks: ${packages[*]}"
  say "installing them with apt-get (CUDAMEM_NO_INSTALL=1 installs nothing)"
  answer=y
  if [ -t 0 ]; then
    read -r -p "run-tests.sh: install ${packages[*]} now? [Y/n] " answer || answer=n
  fi
  case "${answer:-y}" in
    [Yy]*)
      sudo=""
      [ "$(id -u)" -eq 0 ] || sudo=sudo
      apt_quiet() {  # apt-get's output only when it fails
        local log rc=0
        log=$(mktemp)
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq "$@" >"$log" 2>&1 || rc=$?
        [ $rc -eq 0 ] || tail -20 "$log"
        rm -f "$log"
        return $rc
      }
      apt_quiet update || true
      # Required and optional packages apart: an optional one that cannot be had must not stop the rest.
      for group in required optional; do
        declare -n list="${group}_packages"
        [ ${#list[@]} -gt 0 ] || continue
        if apt_quiet install -y --no-install-recommends "${list[@]}"; then
          say "installed: ${list[*]}"
        else
          say "apt-get could not install: ${list[*]}"
        fi
      done ;;
    *) say "nothing installed" ;;
  esac
  # Look again: what is still missing decides below.
  exec env CUDAMEM_APT_DONE=1 "$PWD/tools/run-tests.sh" "$@"
fi
if [ ${#missing_optional[@]} -gt 0 ]; then
  for entry in "${missing_optional[@]}"; do
    say "optional, not found: $(cut -d'|' -f1 <<<"$entry"): its test will report skipped"
  done
fi
if [ ${#missing_required[@]} -gt 0 ]; then
  say "cannot run the tests; missing:"
  for entry in "${missing_required[@]}"; do
    echo "  - $(cut -d'|' -f1 <<<"$entry"): $(cut -d'|' -f3 <<<"$entry")"
  done
  exit 2
fi

# --- Conan (from PyPI, into the build directory) for the Conan package test -----------------
mkdir -p "$build"
conan_venv="$(cd "$build" && pwd)/conan-venv"
if [ -z "${CUDAMEM_CONAN:-}" ]; then
  if command -v conan >/dev/null 2>&1 && conan --version 2>/dev/null | grep -q "version 2\."; then
    CUDAMEM_CONAN=$(command -v conan)
  else
    if [ ! -x "$conan_venv/bin/conan" ] && [ "$is_debian12" = 1 ] && [ "${CUDAMEM_NO_INSTALL:-0}" != 1 ]; then
      # Like the apt-get packages above: said first, and asked first when run from a terminal.
      say "Conan 2 is missing (for the Conan package tests): it can be installed from PyPI into $conan_venv"
      answer=y
      if [ -t 0 ]; then
        read -r -p "run-tests.sh: install Conan 2 from PyPI into $conan_venv now? [Y/n] " answer || answer=n
      fi
      case "${answer:-y}" in
        [Yy]*)
          say "installing Conan 2 from PyPI into $conan_venv"
          python3 -m venv "$conan_venv" >/dev/null 2>&1 &&
            "$conan_venv/bin/python" -m pip install -q --disable-pip-version-check 'conan>=2,<3' >/dev/null 2>&1 ||
            say "could not install Conan: the Conan package tests will report skipped" ;;
        *) say "Conan not installed" ;;
      esac
    fi
    if [ -x "$conan_venv/bin/conan" ]; then CUDAMEM_CONAN=$conan_venv/bin/conan; fi
  fi
fi

[ -n "${CUDAMEM_CONAN:-}" ] || say "optional, not found: Conan 2 (package_conan tests): they will report skipped"

# --- configure, build, test -----------------------------------------------------------------
say "nvcc: $nvcc_path; build directory: $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCUDAMEM_BUILD_TESTS=ON -DCUDAMEM_BUILD_EXAMPLES=ON \
  -DCUDAMEM_BUILD_DOCS=ON ${CUDAMEM_CONAN:+-DCUDAMEM_CONAN_EXECUTABLE="$CUDAMEM_CONAN"}
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j"$jobs" "$@"

#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Formats cudamem's C++ and CUDA sources with clang-format 19 and the committed .clang-format.
#
#   tools/format.sh            rewrite the files in place
#   tools/format.sh --check    change nothing; list the files that differ and exit 1 (the test suite
#                              runs this as the `format` test)
#   tools/format.sh [--check] FILE...   only these files
#
# The files: *.hpp, *.h, *.cpp, *.cu and *.cuh under include/, tests/, examples/, bench/ and
# docs/snippets/; not single_include/ (generated from include/ by tools/amalgamate.py).
# clang-format 19 is looked up as $CLANG_FORMAT, clang-format-19, then clang-format (if it is 19).
# Without it the script says how to get it and exits 77 (the test reports "skipped").
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi

major_of() { "$1" --version 2>/dev/null | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p' | head -1; }
tool=""
for candidate in "${CLANG_FORMAT:-}" clang-format-19 clang-format; do
  [ -n "$candidate" ] || continue
  command -v "$candidate" >/dev/null 2>&1 || continue
  if [ "$(major_of "$candidate")" = "19" ]; then
    tool=$candidate
    break
  fi
done
if [ -z "$tool" ]; then
  echo "format.sh: clang-format 19 not found (Debian 12 and Ubuntu 24.04: apt-get install clang-format-19;" \
       "or set CLANG_FORMAT): formatting not checked" >&2
  exit 77
fi

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(find include tests examples bench docs/snippets -type f \
    \( -name '*.hpp' -o -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | LC_ALL=C sort)
fi

if [ $check -eq 0 ]; then
  "$tool" -i --style=file "${files[@]}"
  echo "format.sh: formatted ${#files[@]} files with $tool"
  exit 0
fi

differ=()
for file in "${files[@]}"; do
  if ! "$tool" --style=file "$file" | cmp -s - "$file"; then
    differ+=("$file")
  fi
done
if [ ${#differ[@]} -gt 0 ]; then
  echo "format.sh: ${#differ[@]} of ${#files[@]} files are not formatted as .clang-format says:" >&2
  printf '  %s\n' "${differ[@]}" >&2
  echo "run tools/format.sh (clang-format 19) and commit the result" >&2
  exit 1
fi
echo "format.sh: ${#files[@]} files formatted as .clang-format says ($tool)"

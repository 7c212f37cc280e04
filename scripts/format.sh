#!/usr/bin/env bash
# Applies .clang-format to the tracked C++/CUDA sources (git ls-files *.cpp *.h *.cu *.cuh), in place.
# Usage: scripts/format.sh [PATH...]   (default: every tracked source; paths limit it to those files/folders)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/format-files.sh
mapfile -t files < <(format_files "$@")
[ ${#files[@]} -eq 0 ] && { echo "format: no C++/CUDA files"; exit 0; }
"$CLANG_FORMAT" -i --style=file "${files[@]}"
echo "format: ${#files[@]} file(s) formatted with $("$CLANG_FORMAT" --version | head -n1)"

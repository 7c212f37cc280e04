#!/usr/bin/env bash
# CI check: every tracked C++/CUDA source is formatted by .clang-format. Prints each file that is not, with the
# diff clang-format would apply (first 40 lines per file), and exits 1; exit 0 when all are formatted, exit 2
# when clang-format is missing (scripts/bootstrap.sh installs it). Fix with scripts/format.sh.
# Usage: scripts/format-check.sh [PATH...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/format-files.sh
mapfile -t files < <(format_files "$@")
bad=0
for f in "${files[@]}"; do
  if ! "$CLANG_FORMAT" --style=file "$f" | cmp -s - "$f"; then
    echo "format-check: $f is not formatted:"
    "$CLANG_FORMAT" --style=file "$f" | diff -u "$f" - | head -n 40 || true
    bad=$((bad + 1))
  fi
done
if [ $bad -gt 0 ]; then
  echo "format-check: $bad of ${#files[@]} file(s) need scripts/format.sh"
  exit 1
fi
echo "format-check: ${#files[@]} file(s) formatted"

# Sourced by scripts/format.sh and scripts/format-check.sh: picks clang-format (CLANG_FORMAT, else clang-format,
# else the newest clang-format-N on PATH; exits 2 when there is none) and lists the tracked C++/CUDA sources.
if [ -z "${CLANG_FORMAT:-}" ]; then
  CLANG_FORMAT=$(command -v clang-format || compgen -c clang-format- | grep -E '^clang-format-[0-9]+$' | sort -t- -k3 -n | tail -n1 || true)
fi
if [ -z "$CLANG_FORMAT" ] || ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "clang-format not found: run scripts/bootstrap.sh (Debian package clang-format) or set CLANG_FORMAT" >&2
  exit 2
fi
format_files() {  # format_files [PATH...]: tracked *.cpp *.h *.cu *.cuh under the paths (default: everywhere)
  git ls-files -- "${@:-.}" | grep -E '\.(cpp|h|cu|cuh)$' || true
}

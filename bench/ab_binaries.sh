#!/usr/bin/env bash
# Two Vortex binaries on the same commands, alternated A,B,A,B in one call: `vortex bench block --block 24` and
# `vortex bench run --steps 12` (canonical h3 shape unless EXTRA overrides it), each round writing its evidence
# under OUT_DIR/{a,b}/round<i>/. Prints the block-total p50 and per-step p50 of every round and the median of the
# rounds' B/A ratios (1.00 = the same speed).
# CONFIG, BACKEND, BLOCK, REPS (default h3, cuda, 24, 20) choose the workload, e.g. CONFIG=h3-tiny BACKEND=cpu
# BLOCK=1 for a smoke run on the CPU.
#   bash bench/ab_binaries.sh OLD_VORTEX NEW_VORTEX OUT_DIR [ROUNDS (default 3)] [EXTRA bench args...]
# Example (the restructure's A/B): bash bench/ab_binaries.sh OLD_BUILD/bin/vortex build/bin/vortex out/ab 3 (OLD_BUILD: a build of the baseline commit)
set -euo pipefail
a=${1:?usage: ab_binaries.sh OLD_VORTEX NEW_VORTEX OUT_DIR [ROUNDS] [EXTRA...]}
b=${2:?usage: ab_binaries.sh OLD_VORTEX NEW_VORTEX OUT_DIR [ROUNDS] [EXTRA...]}
out=${3:?usage: ab_binaries.sh OLD_VORTEX NEW_VORTEX OUT_DIR [ROUNDS] [EXTRA...]}
rounds=${4:-3}
shift $(($# < 4 ? $# : 4))
extra=("$@")
for v in "$a" "$b"; do [ -x "$v" ] || { echo "error: no vortex binary at $v" >&2; exit 2; }; done
common=(--config "${CONFIG:-h3}" --backend "${BACKEND:-cuda}" --switches fused "${extra[@]}")
# The p50 a bench prints: "block total  p10 p50 p90" (block) and "per step p50 X ms" (run).
block_p50() { awk '/^block total/ {print $4}' "$1"; }
step_p50() { sed -n 's/.*per step p50 \([0-9.]*\) ms.*/\1/p' "$1"; }
results=()
for i in $(seq 1 "$rounds"); do
  for side in a b; do
    v=$a
    [ "$side" = b ] && v=$b
    d="$out/$side/round$i"
    mkdir -p "$d"
    echo "[ab] round $i $side: $v" >&2
    "$v" bench block "${common[@]}" --block "${BLOCK:-24}" --reps "${REPS:-20}" --evidence-dir "$d" >"$d/block.txt"
    "$v" bench run "${common[@]}" --steps 12 --evidence-dir "$d" >"$d/run.txt"
    results+=("$i $side $(block_p50 "$d/block.txt") $(step_p50 "$d/run.txt")")
  done
done
table=$(printf '%s\n' "${results[@]}")
echo "$table" | awk '
  { blk[$1 "," $2] = $3; stp[$1 "," $2] = $4; n = ($1 > n ? $1 : n) }
  END {
    printf "%-6s %14s %14s %14s %14s\n", "round", "A block ms", "B block ms", "A step ms", "B step ms"
    for (i = 1; i <= n; ++i)
      printf "%-6d %14.3f %14.3f %14.1f %14.1f\n", i, blk[i ",a"], blk[i ",b"], stp[i ",a"], stp[i ",b"]
  }'
# Median of the per-round B/A ratios (portable awk: the ratios sorted by sort(1)).
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
ratios() { echo "$table" | awk -v col="$1" '{ x[$1 "," $2] = $col; n = ($1 > n ? $1 : n) }
  END { for (i = 1; i <= n; ++i) printf "%.6f\n", x[i ",b"] / x[i ",a"] }'; }
echo "B/A median ratio: block p50 $(ratios 3 | median), 12-step per-step p50 $(ratios 4 | median) ($rounds rounds)"

#!/usr/bin/env python3
"""Prints docs/tokenizer.md's throughput table from tokenizer_bench evidence rows (ranges over the runs).
Usage: bench/tokenizer_table.py benchmarks/2026-12-01-cpu-tokenizer.jsonl"""
import json
import sys
from collections import defaultdict

LABELS = {"prompt_100k": "100 KB corpus prompt", "corpus_text": "corpus, ordinary strings",
          "corpus_runs": "corpus, 2-3 KB single-character runs", "corpus": "whole corpus"}


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    by = defaultdict(list)
    for r in rows:
        by[r["workload"].split()[1]].append(r)
    loads = [r["loadavg_1min"] for r in rows]
    commits = sorted({r["commit"] for r in rows})
    print(f"{len(rows) // len(by)} runs, commits {', '.join(commits)}, 1-minute load {min(loads):.1f}-{max(loads):.1f}")
    print()
    print("| workload | strings | bytes | MB/s at p50 | MB/s at p10 | ids vs HF |")
    print("|---|---|---|---|---|---|")
    for key in ("prompt_100k", "corpus_text", "corpus_runs", "corpus"):
        rs = by[key]
        p50 = [r["mb_per_s"] for r in rs]
        p10 = [r["mb_per_s_at_p10"] for r in rs]
        ok = "same" if all(r["check"].endswith("pass") for r in rs) else "DIFF"
        print(f"| {LABELS[key]} | {rs[0]['strings']} | {rs[0]['bytes']:,} | {min(p50):.1f}-{max(p50):.1f} | "
              f"{min(p10):.1f}-{max(p10):.1f} | {ok} |")


if __name__ == "__main__":
    main()

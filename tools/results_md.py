#!/usr/bin/env python3
"""Generates docs/results.md from the evidence files under benchmarks/ (docs/evidence.md), byte for byte the same
on every run over the same files: nothing in it is typed by hand.

Timing rows (schema vortex-evidence-1): per (workload, impl, config) the current row, i.e. the latest by time_utc
(ties: file path, then line), with its p50 (p10-p90), the same-run baseline and its p50, the ratio
(ms_p50 / baseline p50; alternating A/B rows: the median per-pair ratio), the SM clock and the file:line.
Accuracy rows: latent deviation (vortex-deviation-1), per-op NVFP4 deviation (vortex-nvfp4-deviation-1) and the
identity gates (vortex-gate-1), the latest per label/op/pair.
Usage: tools/results_md.py [--check] [--root REPO]   (--check: exit 1, with a diff, when docs/results.md is stale)
Standard library only.
"""
import difflib
import json
import os
import sys

TIMING = "vortex-evidence-1"
SECTIONS = [  # (title, workload prefix); the first matching prefix wins, the last entry catches the rest
    ("Transformer block, step and run (`vortex bench`)", ("block ", "step ", "run ")),
    ("A/B on one block (`vortex bench ab`, alternating pairs)", ("ab ",)),
    ("Attention: cuDNN SDPA", ("sdpa",)),
    ("Attention: Sage2", ("sage2_attention",)),
    ("GEMMs (cuBLASLt, `gemm_bench bench`)", ("gemm_",)),
    ("NVFP4 producers (`nvfp4_bench`)", ("nvfp4 ",)),
    ("Serving (`bench/serve_canonical.py`)", ("serve ",)),
    ("Tokenizer (`tokenizer_bench`, CPU)", ("tokenize ",)),
    ("PyTorch peer (`scripts/peer_torch.py`)", ("peer ",)),
    ("Other", ("",)),
]


def load(root):
    """Every JSON object of every .jsonl under root/benchmarks, with its file (relative) and line number."""
    rows = []
    bench = os.path.join(root, "benchmarks")
    for dirpath, dirs, files in os.walk(bench):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".jsonl"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path) as f:
                for i, line in enumerate(f, 1):
                    if line.strip():
                        r = json.loads(line)
                        r["_where"] = (rel, i)
                        rows.append(r)
    return rows


def order(r):
    return (r.get("time_utc") or "", r["_where"])


def latest(rows, key):
    cur = {}
    for r in sorted(rows, key=order):
        cur[key(r)] = r
    return [cur[k] for k in sorted(cur, key=lambda k: tuple(str(x) for x in k))]


def cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def ms(x):
    return "-" if x is None else f"{x:.3f}"


def where(r):
    return f"`{r['_where'][0]}:{r['_where'][1]}`"


def timing_table(rows):
    out = []
    current = latest(rows, lambda r: (r.get("workload", ""), r.get("impl", ""), r.get("config", "")))
    for title, prefixes in SECTIONS:
        sec = []
        for r in current:
            first = next(t for t, ps in SECTIONS if any(str(r.get("workload", "")).startswith(p) for p in ps))
            if first == title:
                sec.append(r)
        if not sec:
            continue
        out += [f"## {title}", "",
                "| workload | impl | config | p50 ms (p10-p90) | baseline (same run) | baseline p50 ms | ratio | SM MHz "
                "| commit | evidence |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for r in sec:
            spread = f"{ms(r.get('ms_p50'))} ({ms(r.get('ms_p10'))}-{ms(r.get('ms_p90'))})"
            ratio = "-" if r.get("ratio") is None else f"{r['ratio']:.3f}"
            clk = (r.get("clocks_mhz") or {}).get("sm") or "-"
            commit = (r.get("commit") or "-") + ("+dirty" if r.get("dirty") else "")
            out.append(f"| {cell(r.get('workload', ''))} | {cell(r.get('impl', ''))} | {cell(r.get('config') or '-')} | "
                       f"{spread} | {cell(r.get('baseline') or '-')} | {ms(r.get('baseline_ms_p50'))} | {ratio} | "
                       f"{clk} | {commit} | {where(r)} |")
        out.append("")
    return out


def accuracy_tables(rows):
    out = []
    dev = latest([r for r in rows if r.get("schema") == "vortex-deviation-1"], lambda r: (r["label"],))
    if dev:
        out += ["## Latent deviation from the BF16 program (`scripts/compare_latents.py`)", "",
                "| comparison | video rel-L2 | video cosine | audio rel-L2 | audio cosine | evidence |", "|---|---|---|---|---|---|"]
        for r in dev:
            v, a = r.get("video_latents", {}), r.get("audio_latents", {})
            out.append(f"| {cell(r['label'])} | {v.get('rel_l2', 0):.3e} | {v.get('cosine', 0):.6f} | "
                       f"{a.get('rel_l2', 0):.3e} | {a.get('cosine', 0):.6f} | {where(r)} |")
        out.append("")
    ops = latest([r for r in rows if r.get("schema") == "vortex-nvfp4-deviation-1"],
                 lambda r: (r.get("variant", ""), r.get("block", 0), r["op"]))
    if ops:
        out += ["## NVFP4 per-op deviation from the BF16 program (`nvfp4_deviation`)", "",
                "| variant | op | scope | rel-L2 | cosine | max abs | evidence |", "|---|---|---|---|---|---|---|"]
        for r in ops:
            out.append(f"| {cell(r.get('variant', ''))} | {cell(r['op'])} | {cell(r.get('scope', ''))} | "
                       f"{r['rel_l2']:.3e} | {r['cosine']:.6f} | {r['max_abs']:.3e} | {where(r)} |")
        out.append("")
    gates = latest([r for r in rows if r.get("schema") == "vortex-gate-1"], lambda r: (r.get("a", ""), r.get("b", "")))
    if gates:
        out += ["## Identity gates (`vortex gate`: B's bytes == A's)", "",
                "| A | B | checks identical | pass | commit | evidence |", "|---|---|---|---|---|---|"]
        for r in gates:
            checks = r.get("checks", [])
            same = sum(1 for c in checks if c.get("identical"))
            commit = (r.get("commit") or "-") + ("+dirty" if r.get("dirty") else "")
            out.append(f"| {cell(r.get('a', ''))} | {cell(r.get('b', ''))} | {same}/{len(checks)} | "
                       f"{'yes' if r.get('pass') else 'NO'} | {commit} | {where(r)} |")
        out.append("")
    return out


def render(root):
    rows = load(root)
    timing = [r for r in rows if r.get("schema") == TIMING]
    head = [
        "# Measured results",
        "",
        "<!-- Generated by tools/results_md.py from benchmarks/**/*.jsonl: do not edit by hand. Regenerate with",
        "     `python3 tools/results_md.py`; the test results_md_up_to_date fails when this file is stale. -->",
        "",
        "Every figure below is a row of an evidence file (schema: `docs/evidence.md`), named in the last column as",
        "`file:line`. For each workload, implementation and configuration the table shows the latest row. Times are",
        "milliseconds: the p50 over the row's repetitions, with p10-p90 beside it (`-` where the tool recorded only a",
        "median). The baseline is the one measured in the same run (`-`: none was), and the ratio is the row's p50",
        "over the baseline's (below 1: faster than the baseline; for `vortex bench ab` rows, the median of the",
        "per-pair ratios). SM MHz is the clock sampled right after the timed work.",
        "",
        f"{len(timing)} timing rows in {len({r['_where'][0] for r in timing})} files.",
        "",
    ]
    return "\n".join(head + timing_table(timing) + accuracy_tables(rows)).rstrip("\n") + "\n"


def main(argv):
    check = "--check" in argv
    root = argv[argv.index("--root") + 1] if "--root" in argv else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = render(root)
    path = os.path.join(root, "docs", "results.md")
    if check:
        old = open(path).read() if os.path.exists(path) else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), "docs/results.md",
                                                       "generated"))
            print("docs/results.md is stale: run python3 tools/results_md.py and commit it", file=sys.stderr)
            return 1
        return 0
    with open(path, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

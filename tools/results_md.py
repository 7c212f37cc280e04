#!/usr/bin/env python3
"""Generates docs/results.md from the evidence files under benchmarks/ (docs/evidence.md), byte for byte the same
on every run over the same files: nothing in it is typed by hand.

Timing rows (schema vortex-evidence-1): per (workload, impl, config) the current row, i.e. the latest by time_utc
(ties: file path, then line), with its p50 (p10-p90), the same-run baseline and its p50, the ratio
(ms_p50 / baseline p50; alternating A/B rows: the median per-pair ratio), the SM clock and the file:line.
Accuracy rows: latent deviation (vortex-deviation-1), per-op NVFP4 deviation (vortex-nvfp4-deviation-1) and the
identity gates (vortex-gate-1), the latest per label/op/pair.
It also writes the README's table of modes (between the `results:modes` markers): per mode, the latest block-24
row and the latest latent deviation after 1 and 12 steps.
Usage: tools/results_md.py [--check] [--root REPO]   (--check: exit 1, with a diff, when docs/results.md or the
README's table is stale)
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


# README modes: (shown name, the block row's config, the deviation label's prefix or None for the reference).
MODES = [
    ("bf16 (the reference program, default; on sm_90 its attention runs the owned kernel)",
     "fused_norm_modulate=1,fused_gate_add=1,attention=bf16-owned,precision=bf16", None),
    ("bf16 + `--attention sdpa` (cuDNN)", "fused_norm_modulate=1,fused_gate_add=1,attention=sdpa,precision=bf16",
     "bf16, owned BF16 attention"),
    ("bf16 + `--attention sage2`", "fused_norm_modulate=1,fused_gate_add=1,attention=sage2,precision=bf16",
     "bf16 + Sage2 attention"),
    ("`--precision fp8` + `--attention sage2`", "fused_norm_modulate=1,fused_gate_add=1,attention=sage2,precision=fp8",
     "fp8 + Sage2 attention"),
    ("`--precision fp8` + `--attention sage2` + `fused_q_quantize=1` (the fastest mode on sm_90)",
     "fused_norm_modulate=1,fused_gate_add=1,attention=sage2,precision=fp8,fused_q_quantize=1",
     "fp8 + Sage2 attention (fused Q quantize)"),
    ("`--precision fp8`", "fused_norm_modulate=1,fused_gate_add=1,attention=sdpa,precision=fp8", "fp8 (per-tensor"),
    ("`--precision nvfp4`", "fused_norm_modulate=1,fused_gate_add=1,attention=sdpa,precision=nvfp4",
     "nvfp4 (W4A4"),
    ("`--precision nvfp4-weight-only`",
     "fused_norm_modulate=1,fused_gate_add=1,attention=sdpa,precision=nvfp4-weight-only", "nvfp4-weight-only"),
]
BLOCK_WORKLOAD = "block h3 1344x768x124f S=37810"
# Switches that newer tools name at their off value and older rows leave out: the same program either way.
IMPLIED_OFF = {"fused_q_quantize": "0", "fp8_gate_epilogue": "0"}


def normalize_config(config):
    parts = [p for p in str(config).split(",") if p]
    return ",".join(p for p in parts if IMPLIED_OFF.get(p.split("=", 1)[0]) != p.split("=", 1)[-1])


README_BEGIN = "<!-- results:modes:begin (generated by tools/results_md.py; do not edit) -->"
README_END = "<!-- results:modes:end -->"


def readme_table(rows):
    timing = latest([r for r in rows if r.get("schema") == TIMING and r.get("workload") == BLOCK_WORKLOAD],
                     lambda r: (r.get("config", ""),))
    block = {}
    for r in sorted(timing, key=order):  # the latest row per normalized config wins
        block[normalize_config(r.get("config", ""))] = r
    dev = latest([r for r in rows if r.get("schema") == "vortex-deviation-1"], lambda r: (r["label"],))
    out = ["| mode | block 24 p50 ms (p10-p90) | video latents rel-L2 vs bf16, 1 step | after 12 steps | evidence |",
           "|---|---|---|---|---|"]
    for name, config, prefix in MODES:
        b = block.get(normalize_config(config))
        files = []
        spread = "-"
        if b is not None:
            spread = f"{b['ms_p50']:.1f} ({b['ms_p10']:.1f}-{b['ms_p90']:.1f})"
            files.append(where(b))
        steps, chosen = {}, {}
        if prefix is None:
            steps = {"1": "reference", "12": "reference"}
        else:
            for r in sorted(dev, key=order):  # the latest row per step count wins
                label = r["label"]
                if not label.startswith(prefix):
                    continue
                n = "12" if label.rstrip().endswith(("12 steps", "12 step")) else "1" if label.rstrip().endswith(
                    ("1 step", "1 steps")) else None
                if n is None:
                    continue
                chosen[n] = r
            for n in sorted(chosen):
                steps[n] = f"{chosen[n]['video_latents']['rel_l2']:.1e}"
                files.append(where(chosen[n]))
        out.append(f"| {name} | {spread} | {steps.get('1', '-')} | {steps.get('12', '-')} | {', '.join(files) or '-'} |")
    return out


def render_readme(root, rows):
    path = os.path.join(root, "README.md")
    text = open(path).read()
    if README_BEGIN not in text or README_END not in text:
        raise SystemExit(f"README.md lacks the markers {README_BEGIN!r} / {README_END!r}")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    return head + README_BEGIN + "\n" + "\n".join(readme_table(rows)) + "\n" + README_END + tail


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
    outputs = [("docs/results.md", render(root)), ("README.md", render_readme(root, load(root)))]
    stale = 0
    for rel, text in outputs:
        path = os.path.join(root, rel)
        old = open(path).read() if os.path.exists(path) else ""
        if old == text:
            continue
        if check:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), rel, "generated"))
            print(f"{rel} is stale: run python3 tools/results_md.py and commit it", file=sys.stderr)
            stale = 1
        else:
            with open(path, "w") as f:
                f.write(text)
    return stale


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Converts timing evidence in the older shapes to the one schema (docs/evidence.md), in place, once.

Older shapes, all still present in the committed benchmarks/ before the conversion:
  1. {"environment": {...}, "row": {...}}   gemm_bench, sage2_bench, sdpa_bench (environment from the CUDA runtime:
     sm and cuda as integers, "driver" the driver API version, clocks null);
  2. {"bench": "nvfp4", "device": ..., "results": [...]}   nvfp4_bench (a median per row, no p10/p90, no commit);
  3. {"schema": "vortex.bench.v1", ...}   an early flat row (sdpa);
  4. "vortex-evidence-1" rows written before the schema gained config / baseline / baseline_ms_p50 / ratio.
Every value is carried over; what the old tool did not record stays null (never invented): p10/p90 of the
nvfp4 rows, the commit of the nvfp4 runs, clocks of the gemm rows. A converted row names its old shape in
"converted_from". Rows in other schemas (gate, deviation) and already-converted rows are left byte for byte.
Usage: tools/convert_evidence.py [--check] [DIR=benchmarks]   (--check: exit 1 if a file would change)
"""
import json
import os
import sys

SCHEMA = "vortex-evidence-1"
FIELDS = ("schema", "commit", "dirty", "time_utc", "gpu", "sm", "driver", "cuda", "clocks_mhz", "workload", "impl",
          "config", "n", "ms_p10", "ms_p50", "ms_p90", "ms_p95", "baseline", "baseline_ms_p50", "ratio")


def sm_name(sm):
    return f"sm_{sm}" if isinstance(sm, int) else (sm or "")


def cuda_name(v):
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) else (v or "")


def complete(r):
    for k in FIELDS:
        r.setdefault(k, None)
    if r["config"] is None:
        r["config"] = ""
    return r


def from_env_row(o):
    env, row = o["environment"], dict(o["row"])
    r = {"schema": SCHEMA, "commit": env.get("commit"), "dirty": env.get("dirty"), "time_utc": env.get("time_utc"),
         "gpu": env.get("gpu", ""), "sm": sm_name(env.get("sm")), "driver": env.get("driver_version", ""),
         "cuda": cuda_name(env.get("cuda")), "clocks_mhz": env.get("clocks_mhz"),
         "converted_from": "environment/row"}
    for k in ("sm_count", "cublaslt_version"):
        if k in env:
            r[k] = env[k]
    if isinstance(env.get("driver"), int):
        r["cuda_driver_api"] = env["driver"]
    if row.get("workload") == "sage2_attention":
        row.pop("workload")
        part = row.pop("part")
        ml = row.pop("mainloop")
        r["workload"] = f"sage2_attention S={row['seq_len']} H={row['num_heads']} D={row['head_dim']} {part}"
        r["impl"] = f"vortex sage2 {ml}"
        r["config"] = f"mainloop={ml} inputs={row.pop('inputs', 'random')}"
        r["part"] = part
        sdpa = row.pop("cudnn_sdpa_ms_p50_same_run", 0) or 0
        row.pop("ratio_vs_sdpa", None)  # sdpa / sage2; the schema's ratio is its inverse, recomputed below
        if sdpa > 0 and part != "quantize":
            r["baseline"] = "cudnn_sdpa bf16 (same inputs, same run)"
            r["baseline_ms_p50"] = sdpa
            r["ratio"] = row["ms_p50"] / sdpa
        clk = row.pop("sm_clock_mhz_after_sage2", None)
        if clk:
            r["clocks_mhz"] = {"sm": clk, "mem": None}
    elif str(row.get("workload", "")).startswith("gemm_"):
        r["workload"] = row.pop("workload")
        r["impl"] = row.pop("impl")
        r["config"] = f"m={row['m']} n={row['n']} k={row['k']}"
        row["n"], row["n_cols"] = row.pop("n_reps"), row["n"]  # "n" is the repetition count in the schema
    else:  # sdpa_bench
        r["workload"] = f"sdpa S={row['seq_len']} H={row['num_heads']} D={row['head_dim']}"
        r["impl"] = row.pop("impl")
        r["config"] = row.pop("plan", "")
        row.pop("workload", None)
        peer = row.pop("baseline", None)
        if peer:  # a figure typed in by hand, not measured in this run: not a baseline
            r["reference_not_same_run"] = {"what": peer, "ms_p50": row.pop("baseline_ms_p50", None)}
            row.pop("ratio", None)
    r.update(row)
    return complete(r)


def from_nvfp4(o):
    out = []
    for res in o["results"]:
        name = res["name"]
        case, _, variant = name.partition("/")
        r = {"schema": SCHEMA, "commit": None, "dirty": None, "time_utc": None, "gpu": o.get("device", ""),
             "sm": "", "driver": "", "cuda": "", "clocks_mhz": None, "workload": f"nvfp4 {case} S={o['rows']}",
             "impl": "vortex nvfp4 producer " + (variant or "(default)"), "config": f"reps={o['reps']}",
             "n": o.get("reps"), "ms_p10": None, "ms_p50": res["ms"], "ms_p90": None, "ms_p95": None,
             "converted_from": "nvfp4_bench results (median only)"}
        unfused = res.get("unfused_ms", 0) or 0
        base = res.get("baseline_ms", 0) or 0
        if unfused > 0:
            r.update(baseline="unfused: the op's kernel + nvfp4_quantize (same run)", baseline_ms_p50=unfused,
                     ratio=res["ms"] / unfused)
        elif base > 0:
            r.update(baseline="variant 0 (same run)", baseline_ms_p50=base, ratio=res["ms"] / base)
        for k in ("bytes", "gb_s", "check"):
            if k in res:
                r[k] = res[k]
        for k in ("amax_ms", "pack_ms", "unfused_ms"):
            if k in res:
                r[k + "_p50"] = res[k]
        if "baseline_ms" in res:
            r["variant0_ms_p50"] = res["baseline_ms"]
        out.append(complete(r))
    return out


def from_flat(o):
    r = dict(o)
    old = r.get("schema")
    r["schema"] = SCHEMA
    if old != SCHEMA:
        r["converted_from"] = old
        r["sm"] = sm_name(r.get("sm"))
        r["cuda"] = cuda_name(r.get("cuda"))
        if "not re-measured" in str(r.get("baseline", "")):
            r["reference_not_same_run"] = {"what": r.pop("baseline"), "ms_p50": r.pop("baseline_ms_p50", None)}
            r.pop("ratio", None)
    if "switches" in r and not r.get("config"):
        r["config"] = r.pop("switches")
    elif "config" not in r and r.get("threads") is not None:
        r["config"] = f"threads={r['threads']}"
    return complete(r)


def convert_line(line):
    o = json.loads(line)
    if "environment" in o and "row" in o:
        return [from_env_row(o)]
    if o.get("bench") == "nvfp4" and "results" in o:
        return from_nvfp4(o)
    if o.get("schema") in (SCHEMA, "vortex.bench.v1"):
        r = from_flat(o)
        return None if r == o else [r]
    return None  # another record kind (gate, deviation): unchanged


def gemm_baselines(rows):
    """gemm_bench timed BF16 and FP8 of each shape in one run without naming a baseline: an FP8 row's
    same-run baseline is the BF16 row of its shape and run (same file, commit and time)."""
    bf16 = {(r["workload"], r["commit"], r["time_utc"]): r["ms_p50"] for r in rows
            if r.get("converted_from") == "environment/row" and r.get("impl") == "cublaslt_bf16" and r.get("ms_p50")}
    for r in rows:
        key = (r.get("workload"), r.get("commit"), r.get("time_utc"))
        if (r.get("converted_from") == "environment/row" and str(r.get("workload", "")).startswith("gemm_")
                and r.get("impl") != "cublaslt_bf16" and key in bf16 and r.get("ms_p50")):
            r.update(baseline="cublaslt_bf16 (same shape, same run)", baseline_ms_p50=bf16[key],
                     ratio=r["ms_p50"] / bf16[key])


def convert_file(path):
    with open(path) as f:
        lines = f.read().splitlines()
    out, changed = [], False  # out: the original line (str) or a converted row (dict)
    for line in lines:
        if not line.strip():
            continue
        rows = convert_line(line)
        if rows is None:
            out.append(line)
        else:
            changed = True
            out.extend(rows)
    gemm_baselines([r for r in out if isinstance(r, dict)])
    text = [r if isinstance(r, str) else json.dumps(r, sort_keys=True, separators=(",", ":")) for r in out]
    return changed, "".join(l + "\n" for l in text)


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    root = args[0] if args else "benchmarks"
    stale = []
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if not name.endswith(".jsonl"):
                continue
            path = os.path.join(dirpath, name)
            changed, text = convert_file(path)
            if not changed:
                continue
            stale.append(path)
            if not check:
                with open(path, "w") as f:
                    f.write(text)
    for p in stale:
        print(("needs conversion: " if check else "converted: ") + p)
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

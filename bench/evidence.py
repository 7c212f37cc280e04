"""Evidence rows for the Python benchmark scripts (docs/evidence.md): the one percentile definition, the run
environment (commit, GPU, driver, SM/memory clocks from nvidia-smi) and the JSONL writer. The C++ twin is
src/profiling/evidence.h; both are tested against hand-computed values (tests/tools/evidence_py_test.py,
tests/core/evidence_test.cpp). Standard library only, so it runs wherever the scripts do.
"""
import datetime
import json
import math
import os
import subprocess

SCHEMA = "vortex-evidence-1"
QUANTILES = (0.10, 0.50, 0.90, 0.95)


def quantile(samples, q):
    """Linear interpolation between closest ranks (numpy's default `linear` method): the sorted samples
    x[0..n-1] are placed at positions 0..n-1 and the q-quantile is read at position q * (n - 1)."""
    if not samples:
        raise ValueError("quantile of an empty sample")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside [0, 1]")
    s = sorted(samples)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def percentiles(samples):
    """{ms_p10, ms_p50, ms_p90, ms_p95, n} of timings in milliseconds."""
    return {"ms_p10": quantile(samples, 0.10), "ms_p50": quantile(samples, 0.50), "ms_p90": quantile(samples, 0.90),
            "ms_p95": quantile(samples, 0.95), "n": len(samples)}


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def command_output(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def clocks_mhz():
    """SM and memory clocks now (sample them right after the timed work: they move with load)."""
    out = command_output(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader,nounits"]).splitlines()
    try:
        sm, mem = (int(x) for x in out[0].split(","))
        return {"sm": sm, "mem": mem}
    except (IndexError, ValueError):
        return {"sm": 0, "mem": 0}


def environment(gpu="", sm="", cuda=""):
    """commit, dirty, gpu, sm, driver, cuda of this run. `gpu`, `sm` and `cuda` come from the caller's device
    query (empty on CPU runs); the commit is the repository's HEAD where the script runs."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    commit = command_output(["git", "-C", repo, "rev-parse", "--short=12", "HEAD"]) or "unknown"
    status = command_output(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"])
    driver = command_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).split("\n")[0] if gpu else ""
    return {"commit": commit, "dirty": bool(status) if commit != "unknown" else None, "gpu": gpu, "sm": sm,
            "driver": driver, "cuda": cuda}


def row(env, workload, impl, timings_ms, config="", baseline=None, baseline_ms_p50=None, ratio=None, **extra):
    """One evidence row. `baseline` names the same-run baseline (its impl and config) and `baseline_ms_p50` is
    its p50; ratio defaults to ms_p50 / baseline_ms_p50 (below 1: faster than the baseline)."""
    stats = percentiles(timings_ms)
    if ratio is None and baseline_ms_p50:
        ratio = stats["ms_p50"] / baseline_ms_p50
    r = {"schema": SCHEMA, **env, "time_utc": utc_now(), "clocks_mhz": clocks_mhz() if env.get("gpu") else
         {"sm": 0, "mem": 0}, "workload": workload, "impl": impl, "config": config, **stats, "baseline": baseline,
         "baseline_ms_p50": baseline_ms_p50, "ratio": ratio}
    r.update(extra)
    return r


def append_jsonl(path, rows):
    """Appends rows (one JSON object a line, keys sorted) to `path`; never rewrites existing lines."""
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")

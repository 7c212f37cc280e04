#!/usr/bin/env python3
"""Residency benchmark (docs/memory.md): canonical h3 `vortex generate` runs (1344x768, 124 frames, S = 37,810,
synthetic weights, 100 synthetic text rows) one after another in one session. Per run: nvidia-smi sampled every
200 ms (peak device memory), the child's peak RSS (os.wait4), every stderr line timestamped (load stages), and
run.json's step times, timings and latent sha256. Runs (name: extra flags):
  per_step    --adaln-weights device --switches adaln_ahead=0  (the per-step AdaLN program, projections resident)
  ahead       (defaults: tables ahead of sampling, projections in host memory)
  vram24/32/48 --max-vram N (the last blocks stream from host memory when the rest does not fit)
  fp8, fp8_vram24  --precision fp8, resident / --max-vram 24
Writes OUT_DIR/residency.jsonl (a row per run: commit, gpu, clocks, step times, p50 after the first step, ratio to
the resident run of the same precision, whether the latents equal per_step's) and OUT_DIR/<run>.log; prints a table.
Usage: residency_bench.py VORTEX OUT_DIR [--steps N] [--runs a,b,...] [--timeout S]
"""
import argparse
import json
import os
import tempfile
import statistics
import subprocess
import sys
import threading
import time

RUNS = {
    "per_step": ["--adaln-weights", "device", "--switches", "adaln_ahead=0"],
    "ahead": [],
    "vram24": ["--max-vram", "24"],
    "vram32": ["--max-vram", "32"],
    "vram48": ["--max-vram", "48"],
    "fp8": ["--precision", "fp8"],
    "fp8_vram24": ["--precision", "fp8", "--max-vram", "24"],
}


def smi(query):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"unavailable: {e}"


def run_one(vortex, name, extra, steps, out, timeout):
    d = os.path.join(tempfile.mkdtemp(prefix=f"residency_{name}_"), "run")  # latents stay out of OUT_DIR
    cmd = [vortex, "generate", "--config", "h3", "--synthetic", "--backend", "cuda", "--width", "1344", "--height",
           "768", "--frames", "124", "--steps", str(steps), "--synthetic-text", "100", "--out", d] + extra
    sampler = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms",
                                "200"], stdout=subprocess.PIPE, text=True)
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killer = threading.Timer(timeout, proc.kill)  # a run past its time ends; its row says so
    killer.start()
    lines = []
    for line in proc.stdout:
        lines.append((time.time() - t0, line.rstrip("\n")))
    _, status, usage = os.wait4(proc.pid, 0)
    killer.cancel()
    wall = time.time() - t0
    sampler.terminate()
    samples = [int(x) for x in sampler.communicate()[0].split() if x.strip().isdigit()]
    with open(os.path.join(out, name + ".log"), "w") as f:
        f.write(" ".join(cmd) + "\n")
        for t, l in lines:
            f.write(f"{t:8.2f} {l}\n")
    row = {"run": name, "args": " ".join(extra), "exit_status": os.waitstatus_to_exitcode(status), "wall_seconds": wall,
           "peak_gpu_mib_nvidia_smi": max(samples) if samples else None,
           "host_peak_rss_gb": round(usage.ru_maxrss / 1e6, 2),
           "stages": [[round(t, 2), l.replace("vortex generate: ", "")] for t, l in lines
                      if l.startswith("vortex generate:") and ": note:" not in l]}
    try:
        m = json.load(open(os.path.join(d, "run.json")))
        t = m["timing"]
        s = t["step_seconds"]
        row.update({
            "step_seconds": s,
            "step_p50_after_first": statistics.median(s[1:]) if len(s) > 1 else s[0],
            "load_weights_seconds": t["load_weights_seconds"],
            "adaln_tables_seconds": t.get("adaln_tables_seconds"),
            "prepare_seconds": t["prepare_seconds"],
            "sampling_seconds": t["sampling_seconds"],
            "total_seconds": t["total_seconds"],
            "video_latents_sha256": m["outputs"]["video_latents.safetensors"]["sha256"],
            "audio_latents_sha256": m["outputs"]["audio_latents.safetensors"]["sha256"],
            "adaln_weights": m["request"].get("adaln_weights"),
        })
    except Exception as e:  # noqa: BLE001 - the run failed; its log says why
        row["error"] = repr(e)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vortex")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs", default="per_step,ahead,vram24,fp8,fp8_vram24,vram32")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    common = {"commit": os.environ.get("VORTEX_COMMIT", "unknown"), "dirty": os.environ.get("VORTEX_DIRTY", "unknown"),
              "gpu": smi("name"), "clocks_max_sm_mhz": smi("clocks.max.sm"), "steps": a.steps,
              "shape": "1344x768x124 (S=37,810), 100 synthetic text rows, synthetic h3 weights"}
    rows = []
    for name in a.runs.split(","):
        row = dict(common, **run_one(a.vortex, name, RUNS[name], a.steps, a.out, a.timeout))
        row["clocks_sm_mhz_after"] = smi("clocks.sm")
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "stages"}), flush=True)
    by = {r["run"]: r for r in rows}
    ref = by.get("per_step", {})
    for r in rows:
        if "error" in r:
            continue
        base = by.get("fp8") if r["run"].startswith("fp8") else by.get("ahead", ref)
        if base and "step_p50_after_first" in base:
            r["baseline"] = base["run"]
            r["ratio_step_p50"] = r["step_p50_after_first"] / base["step_p50_after_first"]
        r["latents_equal_per_step"] = bool(ref) and r["video_latents_sha256"] == ref.get("video_latents_sha256") and \
            r["audio_latents_sha256"] == ref.get("audio_latents_sha256")
    with open(os.path.join(a.out, "residency.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{'run':<12}{'peak GiB':>9}{'step p50':>10}{'ratio':>7}{'load s':>8}{'tables s':>9}{'RSS GB':>8}{'wall s':>8}"
          "  latents")
    for r in rows:
        if "error" in r:
            print(f"{r['run']:<12} FAILED (exit {r['exit_status']}): {r['error']}")
            continue
        peak = (r["peak_gpu_mib_nvidia_smi"] or 0) / 1024
        same = "= per_step" if r["latents_equal_per_step"] else r["video_latents_sha256"][:12]
        print(f"{r['run']:<12}{peak:>9.1f}{r['step_p50_after_first']:>10.3f}{r.get('ratio_step_p50', float('nan')):>7.3f}"
              f"{r['load_weights_seconds']:>8.1f}{(r['adaln_tables_seconds'] or 0):>9.2f}{r['host_peak_rss_gb']:>8.1f}"
              f"{r['wall_seconds']:>8.1f}  {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

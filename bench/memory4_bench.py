#!/usr/bin/env python3
"""Overlapped loading against the sequential order on one GPU (docs/memory.md "Overlapped loading", issue 27):
  1. `vortex synth --config h3 --layers L --layout comfy --shard-size-gb 4`: a BF16 checkpoint of h3's first L blocks;
  2. the disk's raw rate: O_DIRECT reads (16 MiB requests) of the first shard, page cache dropped first;
  3. one-shot `vortex generate --checkpoint` runs of the canonical request (100 synthetic text rows), page cache dropped
     before each, in this order: the sequential order (--switches load_overlap=0) and the overlapped one, both with
     --adaln-weights device (the overlap needs the projections on the device), then the defaults (the projections in
     host memory: the sequential order, and run.json says why).
Per run: wall, load, sampling, wall - max(load, sampling), the load's timeline (start, end, first step start, seconds
since the pipeline opened), load GB/s against the raw rate, the latents' sha256 against the first run's.
Writes OUT/memory4.jsonl and OUT/<run>.log.
Usage: memory4_bench.py VORTEX OUT WORK_DIR [--layers 12] [--steps 12] [--no-defaults]
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory2_bench import against_baseline, drop_page_cache, raw_direct_read, run_generate  # noqa: E402
from residency_bench import smi  # noqa: E402

GB = 1e9


def timeline(out_dir_log):
    """run.json's timing.load_overlap of a run, found through the log's "outputs in" line."""
    try:
        with open(out_dir_log) as f:
            for line in f:
                if "outputs in " in line:
                    d = line.split("outputs in ", 1)[1].strip().rstrip(":")
                    with open(os.path.join(d, "run.json")) as j:
                        return json.load(j)["timing"].get("load_overlap")
    except (OSError, ValueError, KeyError):
        pass
    return None


def synth_checkpoint(vortex, ckdir, layers):
    """`vortex synth --config h3 --layers L --layout comfy --shard-size-gb 4` into CKDIR: (the synth row's fields, the
    shards, their bytes, the filesystem)."""
    index = os.path.join(ckdir, "model.safetensors.index.json")
    os.makedirs(ckdir, exist_ok=True)
    t0 = time.time()
    r = subprocess.run([vortex, "synth", "--config", "h3", "--layers", str(layers), "--layout", "comfy",
                        "--shard-size-gb", "4", "--quiet", "-o", index], capture_output=True, text=True)
    row = {"run": "synth", "exit_status": r.returncode, "seconds": round(time.time() - t0, 2), "stderr": r.stderr[-400:]}
    shards = sorted(os.path.join(ckdir, f) for f in os.listdir(ckdir) if f.endswith(".safetensors"))
    fs = subprocess.run(["findmnt", "-no", "FSTYPE,SOURCE", "-T", ckdir], capture_output=True, text=True).stdout.strip()
    return row, shards, sum(os.path.getsize(p) for p in shards), fs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vortex")
    ap.add_argument("out")
    ap.add_argument("work")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--no-defaults", action="store_true")
    ap.add_argument("--timeout", type=float, default=90.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    common = {"commit": os.environ.get("VORTEX_COMMIT", "unknown"), "dirty": os.environ.get("VORTEX_DIRTY", "unknown"),
              "gpu": smi("name"), "clocks_max_sm_mhz": smi("clocks.max.sm"), "steps": a.steps, "layers": a.layers}
    rows = []

    def emit(row):
        row = dict(common, **row, clocks_sm_mhz_after=smi("clocks.sm"))
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(os.path.join(a.out, "memory4.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")

    ckdir = os.path.join(a.work, "ckpt")
    index = os.path.join(ckdir, "model.safetensors.index.json")
    synth, shards, ck_bytes, fs = synth_checkpoint(a.vortex, ckdir, a.layers)
    emit(synth)
    how = drop_page_cache(shards)
    raw = dict({"run": "disk_raw_direct_read", "filesystem": fs, "evict": how, "files": 1},
               **raw_direct_read(shards[:1]))
    emit(raw)
    base = ["--checkpoint", index, "--width", "1344", "--height", "768", "--frames", "124", "--steps", str(a.steps),
            "--synthetic-text", "100", "--seed", "42"]
    runs = [("sequential", ["--adaln-weights", "device", "--switches", "load_overlap=0"]),
            ("overlapped", ["--adaln-weights", "device"])]
    if not a.no_defaults:
        runs.append(("defaults", []))
    ref = None
    for name, extra in runs:
        drop_page_cache(shards)
        row = run_generate(a.vortex, name, base + extra, a.out, a.timeout)
        row.update({"checkpoint_gb": round(ck_bytes / GB, 2), "filesystem": fs,
                    "load_overlap": timeline(os.path.join(a.out, name + ".log"))})
        if "load_weights_seconds" in row:
            row["load_gb_per_s"] = round(ck_bytes / GB / row["load_weights_seconds"], 3)
            row["load_rate_over_raw"] = round(row["load_gb_per_s"] / raw["gb_per_s"], 3)
            row["wall_minus_max_load_sampling"] = round(
                row["wall_seconds"] - max(row["load_weights_seconds"], row["sampling_seconds"]), 2)
        ref = against_baseline(row, ref)
        emit(row)

    print(f"\nraw direct reads: {raw['gb_per_s']:.3f} GB/s ({raw['bytes'] / GB:.1f} GB, {fs}); {a.steps} steps")
    print(f"{'run':<12}{'wall s':>8}{'load s':>8}{'GB/s':>7}{'x raw':>7}{'sampl s':>8}{'wall-max':>9}{'step p50':>9}"
          f"{'start':>7}{'end':>7}{'step1':>7}  mode / latents")
    for r in rows:
        if r["run"] in ("sequential", "overlapped", "defaults") and "error" not in r:
            lo = r.get("load_overlap") or {}
            f = lambda k: f"{lo[k]:>7.1f}" if isinstance(lo.get(k), (int, float)) else f"{'-':>7}"  # noqa: E731
            print(f"{r['run']:<12}{r['wall_seconds']:>8.1f}{r['load_weights_seconds']:>8.1f}{r['load_gb_per_s']:>7.2f}"
                  f"{r['load_rate_over_raw']:>7.2f}{r['sampling_seconds']:>8.1f}{r['wall_minus_max_load_sampling']:>9.1f}"
                  f"{r['step_p50_after_first']:>9.3f}{f('load_start_seconds')}{f('load_end_seconds')}"
                  f"{f('first_step_start_seconds')}  {lo.get('mode')} / {r.get('latents_equal_baseline', 'ref')}")
        elif r["run"] in ("sequential", "overlapped", "defaults"):
            print(r["run"], r.get("error"), r.get("exit_status"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

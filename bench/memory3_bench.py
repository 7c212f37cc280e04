#!/usr/bin/env python3
"""The direct-read loader against the mapping's on one GPU (docs/memory.md "Loading a checkpoint", issue 27):
  1. `vortex synth --config h3 --layers L --layout comfy`: a BF16 checkpoint of h3's first L blocks on the disk;
  2. the disk's raw rate: O_DIRECT reads of every shard (16 MiB requests), page cache dropped first;
  3. one-shot `vortex generate --checkpoint` runs (canonical request, 100 synthetic text rows), page cache dropped
     before each: the BASELINE binary (the loader reading resident weights through the mapping), then VORTEX with
     defaults (direct reads into page-locked staging), with --adaln-weights device (every weight through the direct
     loader), and with the AdaLN projections read from disk (--max-host-ram H: run.json must say adaln_weights "disk").
Per run: one-shot wall, load, sampling, load GB/s and its ratio to the raw rate, wall - max(load, sampling), the
latents' sha256 against the baseline's, the loader's notes. Writes OUT/memory3.jsonl and OUT/<run>.log.
Usage: memory3_bench.py VORTEX BASELINE OUT WORK_DIR [--layers 12] [--steps 3] [--host-ram 2]
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


def loader_notes(out, name):
    """The loader's notes in a run's log (how the resident weights were read)."""
    try:
        with open(os.path.join(out, name + ".log")) as f:
            return [line.strip().split(" ", 1)[1] for line in f if "resident weights" in line or "beside the load" in line]
    except OSError:
        return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vortex")
    ap.add_argument("baseline")
    ap.add_argument("out")
    ap.add_argument("work")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--host-ram", default="2")
    ap.add_argument("--timeout", type=float, default=90.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    common = {"commit": os.environ.get("VORTEX_COMMIT", "unknown"), "dirty": os.environ.get("VORTEX_DIRTY", "unknown"),
              "baseline_commit": os.environ.get("VORTEX_BASELINE_COMMIT", "unknown"), "gpu": smi("name"),
              "clocks_max_sm_mhz": smi("clocks.max.sm")}
    rows = []

    def emit(row):
        row = dict(common, **row, clocks_sm_mhz_after=smi("clocks.sm"))
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(os.path.join(a.out, "memory3.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")

    ckdir = os.path.join(a.work, "ckpt")
    index = os.path.join(ckdir, "model.safetensors.index.json")
    os.makedirs(ckdir, exist_ok=True)
    t0 = time.time()
    r = subprocess.run([a.vortex, "synth", "--config", "h3", "--layers", str(a.layers), "--layout", "comfy",
                        "--shard-size-gb", "4", "--quiet", "-o", index], capture_output=True, text=True)
    emit({"run": "synth", "exit_status": r.returncode, "seconds": round(time.time() - t0, 2), "stderr": r.stderr[-400:]})
    shards = sorted(os.path.join(ckdir, f) for f in os.listdir(ckdir) if f.endswith(".safetensors"))
    ck_bytes = sum(os.path.getsize(p) for p in shards)
    fs = subprocess.run(["findmnt", "-no", "FSTYPE,SOURCE", "-T", ckdir], capture_output=True, text=True).stdout.strip()
    how = drop_page_cache(shards)
    raw = dict({"run": "disk_raw_direct_read", "filesystem": fs, "evict": how, "layers": a.layers},
               **raw_direct_read(shards))
    emit(raw)
    base = ["--checkpoint", index, "--width", "1344", "--height", "768", "--frames", "124", "--steps", str(a.steps),
            "--synthetic-text", "100", "--seed", "42"]
    runs = [("ckpt_mmap_baseline", a.baseline, []), ("ckpt_direct", a.vortex, []),
            ("ckpt_direct_adaln_device", a.vortex, ["--adaln-weights", "device"]),
            ("ckpt_adaln_disk", a.vortex, ["--max-host-ram", a.host_ram])]
    ref = None
    for name, binary, extra in runs:
        drop_page_cache(shards)
        row = run_generate(binary, name, base + extra, a.out, a.timeout)
        row.update({"binary": "baseline" if binary == a.baseline else "vortex", "checkpoint_gb": round(ck_bytes / GB, 2),
                    "layers": a.layers, "filesystem": fs, "loader_notes": loader_notes(a.out, name)})
        if "load_weights_seconds" in row:
            row["load_gb_per_s"] = round(ck_bytes / GB / row["load_weights_seconds"], 3)
            row["load_rate_over_raw"] = round(row["load_gb_per_s"] / raw["gb_per_s"], 3)
            row["wall_minus_max_load_sampling"] = round(
                row["wall_seconds"] - max(row["load_weights_seconds"], row["sampling_seconds"]), 2)
        ref = against_baseline(row, ref)
        emit(row)

    print(f"\nraw direct reads: {raw['gb_per_s']:.3f} GB/s ({raw['bytes'] / GB:.1f} GB, {fs})")
    print(f"{'run':<26}{'wall s':>8}{'load s':>8}{'GB/s':>7}{'x raw':>7}{'sampl s':>8}{'wall-max':>9}{'adaln':>8}"
          f"  latents")
    for r in rows:
        if r["run"].startswith("ckpt") and "error" not in r:
            print(f"{r['run']:<26}{r['wall_seconds']:>8.1f}{r['load_weights_seconds']:>8.1f}{r['load_gb_per_s']:>7.2f}"
                  f"{r['load_rate_over_raw']:>7.2f}{r['sampling_seconds']:>8.1f}{r['wall_minus_max_load_sampling']:>9.1f}"
                  f"{str(r.get('adaln_weights')):>8}  {r.get('latents_equal_baseline', 'ref')}")
        elif r["run"].startswith("ckpt"):
            print(r["run"], r.get("error"), r.get("exit_status"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

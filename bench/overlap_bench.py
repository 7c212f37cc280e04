#!/usr/bin/env python3
"""Overlapped loading with the GPU default (AdaLN projections in page-locked host memory) against the sequential
order, one-shot `vortex generate` from a checkpoint on disk (docs/memory.md "Overlapped loading", issue 27):
  1. `vortex synth --config h3 --layers L --layout comfy --shard-size-gb 4` into WORK/model/transformer/: a BF16
     checkpoint of h3's first L blocks, in the layout of a release partition folder (FL2VA/);
  2. the disk's raw rate: O_DIRECT reads (16 MiB requests) of the first shard, page cache dropped first;
  3. the canonical request (1344x768, 124 frames, 100 synthetic text rows, seed 42) with default options, page cache
     dropped before each run: `sequential` (--switches load_overlap=0) then `overlapped`;
  4. with --te-layers K (and while --budget seconds allow): a synthetic text encoder on disk beside the transformer
     (WORK/model/text_encoder/: the release's FL2VA text_encoder/config.json, K full-size Qwen3-VL layers and the
     embedding in model.safetensors, values like synthesize_text_encoder_weights' ranges; tokenizer/ from
     tests/text/fixtures/qwen_tokenizer.tar.xz; model_index.json: the release's FL2VA/model_index.json), then
     `te_sequential` and `te_overlapped`: `--model WORK/model --prompt ... --text-layer K` with --te-steps steps.
Per run: wall, load, sampling, wall - max(load, sampling), the load's timeline from run.json (timing.load_overlap),
the text encoder's load and encode seconds, peak device memory (nvidia-smi), host RSS, latents sha256 against the
pair's sequential run. Rows carry the design's evidence fields (commit, dirty, gpu, clocks, quantiles, baseline, ratio, check). Writes OUT/overlap.jsonl and OUT/<run>.log.
Usage: overlap_bench.py VORTEX OUT WORK --index-json FL2VA_MODEL_INDEX --te-config FL2VA_TE_CONFIG
       [--layers 12] [--steps 12] [--te-layers 8] [--te-steps 4] [--budget 180] [--timeout 70]
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory2_bench import drop_page_cache, raw_direct_read, run_generate  # noqa: E402
from memory4_bench import synth_checkpoint, timeline  # noqa: E402
from residency_bench import smi  # noqa: E402

GB = 1e9
T0 = time.time()


def write_text_encoder(folder, config_path, layers, seed=7):
    """K decoder layers and the embedding of the release's text config, BF16, as one model.safetensors."""
    import numpy as np
    os.makedirs(folder, exist_ok=True)
    shutil.copy(config_path, os.path.join(folder, "config.json"))
    tc = json.load(open(config_path))["text_config"]
    d, f, hd = tc["hidden_size"], tc["intermediate_size"], tc["head_dim"]
    q, kv, v = tc["num_attention_heads"] * hd, tc["num_key_value_heads"] * hd, tc["vocab_size"]
    p = "model.language_model."
    specs = [(p + "embed_tokens.weight", (v, d), 1.0, 0.0)]
    for i in range(layers):
        k = f"{p}layers.{i}."
        specs += [(k + "input_layernorm.weight", (d,), 0.2, 1.0), (k + "self_attn.q_proj.weight", (q, d), d ** -0.5, 0),
                  (k + "self_attn.k_proj.weight", (kv, d), d ** -0.5, 0),
                  (k + "self_attn.v_proj.weight", (kv, d), d ** -0.5, 0),
                  (k + "self_attn.q_norm.weight", (hd,), 0.2, 1.0), (k + "self_attn.k_norm.weight", (hd,), 0.2, 1.0),
                  (k + "self_attn.o_proj.weight", (d, q), q ** -0.5, 0),
                  (k + "post_attention_layernorm.weight", (d,), 0.2, 1.0),
                  (k + "mlp.gate_proj.weight", (f, d), d ** -0.5, 0), (k + "mlp.up_proj.weight", (f, d), d ** -0.5, 0),
                  (k + "mlp.down_proj.weight", (d, f), f ** -0.5, 0)]
    header, off = {}, 0
    for name, shape, _, _ in specs:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    rng = np.random.default_rng(seed)
    u = rng.uniform(-1.0, 1.0, 1 << 24).astype(np.float32)  # 16 Mi values, reused with each tensor's range
    with open(os.path.join(folder, "model.safetensors"), "wb") as out:
        out.write(len(h).to_bytes(8, "little"))
        out.write(h)
        for _, shape, scale, offset in specs:
            block = ((u * np.float32(scale) + np.float32(offset)).view(np.uint32) >> 16).astype(np.uint16)
            left = int(np.prod(shape))
            while left > 0:
                m = min(left, block.size)
                out.write(block[:m].tobytes())
                left -= m
    return off


def schema_row(common, row, baseline):
    """The design's evidence fields for a one-shot run (n = 1; step quantiles over steps 2..N)."""
    s = row.get("step_seconds") or []
    tail = sorted(s[1:]) if len(s) > 1 else s
    q = (lambda f: round(1000 * tail[min(len(tail) - 1, int(f * len(tail)))], 1)) if tail else (lambda f: None)
    out = dict(common)
    out.update({"time_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "impl": row["run"], "n": 1, "step_ms_p10": q(0.1), "step_ms_p50": q(0.5), "step_ms_p90": q(0.9),
                "step_ms_p95": q(0.95), "baseline": baseline["run"] if baseline else None,
                "baseline_wall_seconds": baseline.get("wall_seconds") if baseline else None,
                "ratio_wall": round(row["wall_seconds"] / baseline["wall_seconds"], 3)
                if baseline and "wall_seconds" in row and baseline.get("wall_seconds") else None})
    return out


def te_seconds(log):
    """The text encoder's load and encode seconds from a run's log (stage lines with timestamps)."""
    marks = []
    try:
        for line in open(log):
            m = re.match(r"\s*([0-9.]+) (.*)", line)
            if m:
                marks.append((float(m.group(1)), m.group(2)))
    except OSError:
        return {}
    def first(pat):
        return next((t for t, l in marks if pat in l), None)
    load, enc = first("loading the text encoder"), first("encoding the prompt")
    after = next((t for t, l in marks if enc is not None and t > enc and "vortex generate:" in l
                  and "encoding" not in l and "note" not in l), None)
    return {"te_load_start_s": load, "te_encode_start_s": enc, "te_encode_end_s": after}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vortex")
    ap.add_argument("out")
    ap.add_argument("work")
    ap.add_argument("--index-json", required=True)
    ap.add_argument("--te-config", required=True)
    ap.add_argument("--tokenizer-tar", default="tests/text/fixtures/qwen_tokenizer.tar.xz")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--te-layers", type=int, default=0)
    ap.add_argument("--te-steps", type=int, default=4)
    ap.add_argument("--budget", type=float, default=180.0)
    ap.add_argument("--timeout", type=float, default=70.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    nvsmi = lambda q: subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],  # noqa: E731
                                     capture_output=True, text=True).stdout.strip().splitlines()[:1]
    common = {"schema": "vortex-bench-1", "commit": os.environ.get("VORTEX_COMMIT", "unknown"),
              "dirty": os.environ.get("VORTEX_DIRTY", "unknown"), "gpu": smi("name"), "sm": "sm_90a",
              "driver": smi("driver_version"), "cuda": os.environ.get("VORTEX_CUDA_VERSION", "12.x (build)"),
              "clocks_mhz": (nvsmi("clocks.max.sm") or ["?"])[0], "layers": a.layers,
              "workload": f"one-shot generate, h3 first {a.layers} blocks (BF16 ComfyUI checkpoint on disk), "
                          f"1344x768x124, page cache dropped"}
    rows = []

    def emit(row, baseline=None):
        row = dict(schema_row(common, row, baseline) if "wall_seconds" in row else common, **row,
                   clocks_sm_mhz_after=smi("clocks.sm"))
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(os.path.join(a.out, "overlap.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        return row

    model = os.path.join(a.work, "model")
    ckdir = os.path.join(model, "transformer")
    os.makedirs(ckdir, exist_ok=True)
    shutil.copy(a.index_json, os.path.join(model, "model_index.json"))
    index = os.path.join(ckdir, "model.safetensors.index.json")
    synth, shards, ck_bytes, fs = synth_checkpoint(a.vortex, ckdir, a.layers)
    emit(synth)
    how = drop_page_cache(shards)
    raw = emit(dict({"run": "disk_raw_direct_read", "filesystem": fs, "evict": how, "files": 1},
                    **raw_direct_read(shards[:1])))

    def pair(names, args, files, steps, estimate, extra=None):
        base = None
        for name, more in names:
            if time.time() - T0 + estimate > a.budget:  # a run cut off by the call's limit would leave no row
                emit({"run": name, "skipped": f"over the call's budget ({a.budget:.0f} s)"})
                continue
            drop_page_cache(files)
            row = run_generate(a.vortex, name, args + more, a.out, a.timeout)
            row.update({"checkpoint_gb": round(ck_bytes / GB, 2), "filesystem": fs, "steps": steps,
                        "load_overlap": timeline(os.path.join(a.out, name + ".log"))})
            if extra:
                row.update(extra(name))
            if "load_weights_seconds" in row:
                row["load_gb_per_s"] = round(ck_bytes / GB / row["load_weights_seconds"], 3)
                row["load_rate_over_raw"] = round(row["load_gb_per_s"] / raw["gb_per_s"], 3)
                row["wall_minus_max_load_sampling"] = round(
                    row["wall_seconds"] - max(row["load_weights_seconds"], row["sampling_seconds"]), 2)
            if base is not None and "latents_sha256" in row:
                row["check"] = "latents sha256 equal to " + base["run"] + "'s: " + str(
                    row["latents_sha256"] == base.get("latents_sha256"))
                row["latents_equal_baseline"] = row["latents_sha256"] == base.get("latents_sha256")
            elif "latents_sha256" in row:
                row["check"] = "reference latents of the pair"
            r = emit(row, base)
            if base is None and "error" not in r:
                base = r

    common_args = ["--checkpoint", index, "--width", "1344", "--height", "768", "--frames", "124",
                   "--steps", str(a.steps), "--synthetic-text", "100", "--seed", "42"]
    pair([("sequential", ["--switches", "load_overlap=0"]), ("overlapped", [])], common_args, shards, a.steps, 0)

    if a.te_layers > 0 and time.time() - T0 < a.budget - 75:
        t0 = time.time()
        te_dir = os.path.join(model, "text_encoder")
        te_bytes = write_text_encoder(te_dir, a.te_config, a.te_layers)
        os.makedirs(os.path.join(model, "tokenizer"), exist_ok=True)
        with tarfile.open(a.tokenizer_tar) as t:
            tok = t.extractfile("qwen_tokenizer.json").read()
        open(os.path.join(model, "tokenizer", "tokenizer.json"), "wb").write(tok)
        emit({"run": "write_text_encoder", "seconds": round(time.time() - t0, 2), "te_gb": round(te_bytes / GB, 2),
              "te_layers": a.te_layers})
        te_files = shards + [os.path.join(te_dir, "model.safetensors")]
        te_args = ["--model", model, "--prompt", "A red kite over a grey winter sea, waves breaking on the rocks.",
                   "--text-layer", str(a.te_layers), "--width", "1344", "--height", "768", "--frames", "124",
                   "--steps", str(a.te_steps), "--seed", "42", "--latents-only"]
        pair([("te_sequential", ["--switches", "load_overlap=0"]), ("te_overlapped", [])], te_args, te_files,
             a.te_steps, 32, extra=lambda n: dict(te_seconds(os.path.join(a.out, n + ".log")), te_gb=round(te_bytes / GB, 2)))

    print(f"\nraw direct reads: {raw['gb_per_s']:.3f} GB/s ({raw['bytes'] / GB:.1f} GB, {fs})")
    print(f"{'run':<15}{'wall s':>8}{'load s':>8}{'GB/s':>7}{'sampl s':>8}{'wall-max':>9}{'step p50':>9}"
          f"{'start':>7}{'end':>7}{'step1':>7}{'peak GiB':>9}  mode / adaln / latents")
    for r in rows:
        if "wall_seconds" in r and "error" not in r:
            lo = r.get("load_overlap") or {}
            f = lambda k: f"{lo[k]:>7.1f}" if isinstance(lo.get(k), (int, float)) else f"{'-':>7}"  # noqa: E731
            print(f"{r['run']:<15}{r['wall_seconds']:>8.1f}{r['load_weights_seconds']:>8.1f}{r['load_gb_per_s']:>7.2f}"
                  f"{r['sampling_seconds']:>8.1f}{r['wall_minus_max_load_sampling']:>9.1f}"
                  f"{r['step_p50_after_first']:>9.3f}{f('load_start_seconds')}{f('load_end_seconds')}"
                  f"{f('first_step_start_seconds')}{(r['peak_gpu_mib_nvidia_smi'] or 0) / 1024:>9.1f}"
                  f"  {lo.get('mode')} / {lo.get('adaln_projections')} / {r.get('latents_equal_baseline', 'ref')}")
        elif r["run"] not in ("synth", "disk_raw_direct_read", "write_text_encoder"):
            print(r["run"], r.get("error") or r.get("skipped"), r.get("exit_status"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

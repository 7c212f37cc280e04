#!/usr/bin/env python3
"""Same-GPU baseline for the conditioner benchmark (bench/text_encoder_bench.cpp): transformers' Qwen3VLTextModel
with Qwen3-VL-32B's text config truncated to --layers decoder layers (H3 reads hidden_states[50], the output of
the first 50), random BF16 weights, SDPA attention, one 500-token prefill (use_cache off), timed with CUDA
synchronization; SM clock sampled with nvidia-smi during the timed loop. Writes OUT/text_encoder_transformers.json
and prints a one-line summary. Run: python3 bench/text_encoder_transformers.py --out DIR [--layers 50 --tokens 500]
"""
import argparse
import json
import os
import subprocess
import threading
import time

import numpy as np
import torch
from transformers import Qwen3VLTextConfig, Qwen3VLTextModel


def sm_clock_sampler(samples, stop):
    while not stop.is_set():
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True, timeout=5).stdout.strip()
            samples.append(int(out.splitlines()[0]))
        except Exception:  # no nvidia-smi: the field stays empty
            pass
        stop.wait(0.2)


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except Exception:
        return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder for text_encoder_transformers.json")
    ap.add_argument("--layers", type=int, default=50)
    ap.add_argument("--tokens", type=int, default=500)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (a smoke run of the script)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cfg = Qwen3VLTextConfig(hidden_size=5120, intermediate_size=25600, num_hidden_layers=args.layers,
                            num_attention_heads=64, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                            rms_norm_eps=1e-6, max_position_embeddings=262144,
                            rope_parameters=dict(rope_type="default", rope_theta=5000000.0, mrope_section=[24, 20, 20],
                                                 mrope_interleaved=True))
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    t0 = time.time()
    torch.set_default_dtype(torch.bfloat16)  # built in BF16: an FP32 build of 25B parameters would not fit
    with torch.device(args.device):
        model = Qwen3VLTextModel(cfg).eval()
    build_s = time.time() - t0
    g = torch.Generator(device="cpu").manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (1, args.tokens), generator=g).to(args.device)
    mask = torch.ones_like(ids)
    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    with torch.no_grad():
        for _ in range(args.warmup):
            model(input_ids=ids, attention_mask=mask, use_cache=False)
        sync()
        samples, stop = [], threading.Event()
        th = threading.Thread(target=sm_clock_sampler, args=(samples, stop), daemon=True)
        th.start()
        ms = []
        for _ in range(args.reps):
            sync()
            a = time.perf_counter()
            model(input_ids=ids, attention_mask=mask, use_cache=False)
            sync()
            ms.append((time.perf_counter() - a) * 1e3)
        stop.set()
        th.join()
    p10, p50, p90 = (float(np.percentile(ms, q)) for q in (10, 50, 90))
    row = {"workload": "text_encoder_prefill", "impl": "transformers_sdpa", "commit": commit(),
           "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu", "torch": torch.__version__,
           "transformers": __import__("transformers").__version__, "layers": args.layers, "tokens": args.tokens,
           "ms_p10": p10, "ms_p50": p50, "ms_p90": p90, "n": args.reps,
           "clock_sm_mhz_samples": samples, "clock_sm_mhz_median": int(np.median(samples)) if samples else None,
           "build_s": build_s, "peak_mem_gb": torch.cuda.max_memory_allocated() / 1e9 if args.device == "cuda" else None,
           "attn_implementation": model.config._attn_implementation}
    path = os.path.join(args.out, "text_encoder_transformers.json")
    with open(path, "w") as f:
        json.dump(row, f, indent=1)
    print(f"transformers {args.layers} layers x {args.tokens} tokens: p10 {p10:.2f} p50 {p50:.2f} p90 {p90:.2f} ms "
          f"(SM {row['clock_sm_mhz_median']} MHz) -> {path}")


if __name__ == "__main__":
    main()

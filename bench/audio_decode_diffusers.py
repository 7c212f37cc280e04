#!/usr/bin/env python3
"""Baseline for bench/audio_decode_bench.cpp: diffusers 0.42.1's AutoencoderKLMiniMaxH3Audio.decode in FP32 (as
diffusers pins it) on latents [2, 32, Ta] (Ta = (5 * frames + 1) // 3; 124 frames -> 207) on the same GPU, random
weights of the released shapes, eager PyTorch. Timed twice: with cuDNN's TF32 off (torch.backends.cudnn.allow_tf32 =
False: an FP32 convolution, the baseline of the ratio) and with PyTorch's default (allow_tf32 = True: what a default
diffusers pipeline runs, TF32 tensor-core products). Each timing is CUDA-synchronized wall time after one warm-up.
Rows go to OUT_DIR/<date>-<gpu>-audio-decode-diffusers.jsonl; when OUT_DIR holds audio_decode_bench's rows (impl
vortex-cuda, workload vae_decode_audio), each row carries ratio = diffusers p50 / vortex p50.

  python3 bench/audio_decode_diffusers.py OUT_DIR --wheel diffusers-0.42.1-py3-none-any.whl [--reps 20] [--frames 124]
"""
import argparse
import datetime
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vae_decode_diffusers import ClockSampler, commit, percentile  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--wheel", required=True, help="diffusers-0.42.1-py3-none-any.whl (or an unpacked source dir)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--frames", type=int, default=124, help="video frames (124 -> audio latents [2, 32, 207])")
    args = ap.parse_args()
    if not os.path.exists(args.wheel):
        sys.exit(f"--wheel {args.wheel}: no such file")
    sys.path.insert(0, os.path.abspath(args.wheel))
    import torch
    import diffusers
    from diffusers import AutoencoderKLMiniMaxH3Audio

    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    env = dict(commit=commit(), time_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               gpu=gpu, torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
               diffusers=diffusers.__version__)
    with torch.device(dev):
        avae = AutoencoderKLMiniMaxH3Audio()  # released config; parameters random (default init)
    avae.eval().float()
    ta = (5 * args.frames + 1) // 3
    za = torch.rand(2, avae.config.latent_channels, ta, device=dev) * 2 - 1
    rows = []
    for tf32 in (False, True):
        torch.backends.cudnn.allow_tf32 = tf32
        torch.cuda.reset_peak_memory_stats()
        with torch.no_grad(), ClockSampler() as clk:
            avae.decode(za, return_dict=False)  # warm-up (cuDNN plans)
            torch.cuda.synchronize()
            ms = []
            for _ in range(args.reps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = avae.decode(za, return_dict=False)[0]
                torch.cuda.synchronize()
                ms.append((time.perf_counter() - t0) * 1e3)
        name = "diffusers-eager-fp32" + ("-tf32" if tf32 else "")
        rows.append(dict(env, clock_sm_mhz=clk.mhz(), workload="vae_decode_audio", impl=name,
                         cudnn_allow_tf32=tf32, ms_p10=percentile(ms, 0.1), ms_p50=percentile(ms, 0.5),
                         ms_p90=percentile(ms, 0.9), reps=args.reps, latents=[2, avae.config.latent_channels, ta],
                         output=list(out.shape), peak_device_bytes=torch.cuda.max_memory_allocated(),
                         weights="random (released shapes)"))
        print(f"diffusers audio decode FP32 (cudnn.allow_tf32={tf32}): p50 {rows[-1]['ms_p50']:.2f} ms")

    vortex = None
    for path in sorted(glob.glob(os.path.join(args.out_dir, "*-audio-decode.jsonl"))):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("impl") == "vortex-cuda" and r.get("workload") == "vae_decode_audio":
                    vortex = r
    for r in rows:
        if vortex:
            vp50 = vortex.get("ms", {}).get("p50", vortex.get("ms_p50"))
            if vp50:
                r["vortex_ms_p50"] = vp50
                r["ratio"] = r["ms_p50"] / vp50
    os.makedirs(args.out_dir, exist_ok=True)
    slug = "".join(c.lower() if c.isalnum() else "-" for c in gpu).strip("-")
    path = os.path.join(args.out_dir, f"{datetime.date.today().isoformat()}-{slug}-audio-decode-diffusers.jsonl")
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("\n| impl | p10 ms | p50 ms | p90 ms | vortex p50 ms | diffusers / vortex |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['impl']} | {r['ms_p10']:.2f} | {r['ms_p50']:.2f} | {r['ms_p90']:.2f} | "
              f"{r.get('vortex_ms_p50', float('nan')):.2f} | {r.get('ratio', float('nan')):.2f} |")
    print(f"evidence {path}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Baseline for bench/vae_decode_bench.cpp: diffusers 0.42.1's own decoders at the canonical request's shape on the
same GPU, with random weights of the released shapes (no checkpoint needed), eager PyTorch.

  python3 bench/vae_decode_diffusers.py OUT_DIR --wheel /path/to/diffusers-0.42.1-py3-none-any.whl \
      [--dtypes fp16,fp32] [--reps 3] [--frames 37]

Video: AutoencoderKLMiniMaxH3.decode on latents [1, 24, T, 48, 84] (1344x768) with the released tiling (on by
default in diffusers), in each --dtypes compute dtype with `_keep_in_fp32_modules` kept in FP32 as from_pretrained
(torch_dtype=...) does. Audio: AutoencoderKLMiniMaxH3Audio.decode on [2, 32, Ta] in FP32 (as diffusers pins it).
Each timing is CUDA-synchronized wall time after one warm-up. Rows go to OUT_DIR/<date>-<gpu>-vae-decode.jsonl
next to vae_decode_bench's; when that file holds a vortex-cuda row of the same workload, the row carries
ratio = diffusers p50 / vortex p50 (how many times faster Vortex is). The wheel is imported from the path (pure
Python); torch comes from the environment.
"""
import argparse
import datetime
import glob
import json
import os
import statistics
import subprocess
import sys
import threading
import time


def percentile(xs, q):
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class ClockSampler:
    """Samples nvidia-smi's SM clock every 0.5 s while timings run (max and median reported)."""

    def __init__(self):
        self.samples, self._stop = [], threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits", "-i", "0"],
                                     capture_output=True, text=True, timeout=5).stdout.strip()
                self.samples.append(int(out.splitlines()[0]))
            except Exception:
                pass
            self._stop.wait(0.5)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *a):
        self._stop.set()
        self._t.join()

    def mhz(self):
        return int(statistics.median(self.samples)) if self.samples else 0


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except Exception:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--wheel", required=True, help="diffusers-0.42.1-py3-none-any.whl (or an unpacked source dir)")
    ap.add_argument("--dtypes", default="fp16,fp32")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--audio-reps", type=int, default=10)
    ap.add_argument("--frames", type=int, default=37, help="latent frames (37 -> 124 video frames)")
    args = ap.parse_args()
    if not os.path.exists(args.wheel):
        sys.exit(f"--wheel {args.wheel}: no such file")
    sys.path.insert(0, os.path.abspath(args.wheel))
    import torch
    import diffusers
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio

    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    rows = []
    env = dict(commit=commit(), time_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               gpu=gpu, torch=torch.__version__, cuda=torch.version.cuda, diffusers=diffusers.__version__)

    def timed(fn, reps):
        fn()
        torch.cuda.synchronize()
        ms = []
        for _ in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            ms.append((time.perf_counter() - t0) * 1e3)
        return ms

    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
    with torch.device(dev):
        vae = AutoencoderKLMiniMaxH3()  # released config; parameters random (default init)
    vae.eval()
    vae.encoder = None  # decode only
    keep = AutoencoderKLMiniMaxH3._keep_in_fp32_modules
    z = torch.rand(1, 24, args.frames, 48, 84, device=dev) * 2 - 1
    for name in args.dtypes.split(","):
        dt = dtypes[name]
        vae.to(dt)
        for pname, p in vae.named_parameters():  # from_pretrained(torch_dtype=dt)'s rule
            if any(k in pname.split(".") for k in keep):
                p.data = p.data.float()
        torch.cuda.reset_peak_memory_stats()
        with torch.no_grad(), ClockSampler() as clk:
            out_shape = []

            def run():
                out = vae.decode(z, return_dict=False)[0]
                out_shape[:] = list(out.shape)

            ms = timed(run, args.reps)
        rows.append(dict(env, clock_sm_mhz=clk.mhz(), workload="vae_decode_video", impl=f"diffusers-eager-{name}",
                         ms_p10=percentile(ms, 0.1), ms_p50=percentile(ms, 0.5), ms_p90=percentile(ms, 0.9),
                         reps=args.reps, latents=[24, args.frames, 48, 84], output=out_shape, tiling=vae.use_tiling,
                         peak_device_bytes=torch.cuda.max_memory_allocated(), weights="random (released shapes)"))
        print(f"diffusers video decode {name}: p50 {rows[-1]['ms_p50']:.1f} ms -> {out_shape}")
    del vae
    torch.cuda.empty_cache()

    frames = out_shape[2] if out_shape else 124
    ta = (5 * frames + 1) // 3
    with torch.device(dev):
        avae = AutoencoderKLMiniMaxH3Audio()
    avae.eval().float()
    za = torch.rand(2, avae.config.latent_channels, ta, device=dev) * 2 - 1
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad(), ClockSampler() as clk:
        ms = timed(lambda: avae.decode(za, return_dict=False)[0], args.audio_reps)
    rows.append(dict(env, clock_sm_mhz=clk.mhz(), workload="vae_decode_audio", impl="diffusers-eager-fp32",
                     ms_p10=percentile(ms, 0.1), ms_p50=percentile(ms, 0.5), ms_p90=percentile(ms, 0.9),
                     reps=args.audio_reps, latents=[2, avae.config.latent_channels, ta],
                     peak_device_bytes=torch.cuda.max_memory_allocated(), weights="random (released shapes)"))

    # Ratios against the Vortex rows of the same run folder.
    vortex = {}
    for path in sorted(glob.glob(os.path.join(args.out_dir, "*-vae-decode.jsonl"))):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("impl") == "vortex-cuda":  # the default program (alternatives carry a suffix)
                    vortex[r["workload"]] = r
    for r in rows:
        v = vortex.get(r["workload"])
        if v:
            vp50 = v.get("ms", {}).get("p50", v.get("ms_p50"))
            if vp50:
                r["vortex_ms_p50"] = vp50
                r["ratio"] = r["ms_p50"] / vp50
    os.makedirs(args.out_dir, exist_ok=True)
    slug = "".join(c.lower() if c.isalnum() else "-" for c in gpu).strip("-")
    path = os.path.join(args.out_dir, f"{datetime.date.today().isoformat()}-{slug}-vae-decode-diffusers.jsonl")
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("\n| workload | impl | p10 ms | p50 ms | p90 ms | vortex p50 ms | ratio |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['impl']} | {r['ms_p10']:.1f} | {r['ms_p50']:.1f} | {r['ms_p90']:.1f} | "
              f"{r.get('vortex_ms_p50', float('nan')):.1f} | {r.get('ratio', float('nan')):.2f} |")
    print(f"evidence {path}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Peers of bench/fl2va_encoders_bench.cpp on the same GPU, with synthetic random weights of the released shapes:

- transformers' Qwen3VLVisionModel in BF16 (the release's text_encoder/config.json vision_config), two 1344x768
  keyframes in one call (pixel_values [8064, 1536] bf16 on the device, grid_thw [[1, 48, 84]] x 2), SDPA attention;
- diffusers' AutoencoderKLMiniMaxH3 (the release's vae/config.json) in its released dtype, FP32 (the encoder and
  quant_conv are pinned to FP32 by _keep_in_fp32_modules), released tiling on, torch's defaults for cuDNN (TF32
  convolutions allowed), through the modular pipeline's own encode_vae_condition for each of two 1344x768 keyframes
  (uint8 pixels on the device in, normalized float32 CPU latents out).

Each timing is wall clock between torch.cuda.synchronize() calls after warm-up runs. Writes one JSON object per
workload (p10/p50/p90 in ms) to --out.
Run: python3 bench/fl2va_encoders_peer.py --text-encoder-config C --vae-config C --out peer.json [--reps N]
"""
import argparse
import json
import time

import numpy as np
import torch


def timed(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    q = np.percentile(ms, [10, 50, 90])
    return {"ms": ms, "p10": float(q[0]), "p50": float(q[1]), "p90": float(q[2]), "n": len(ms)}


def vision(args):
    from transformers import Qwen3VLConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

    cfg = Qwen3VLConfig.from_json_file(args.text_encoder_config).vision_config
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3VLVisionModel._from_config(cfg, dtype=torch.bfloat16).eval()
    grid = torch.tensor([[1, 48, 84], [1, 48, 84]], device="cuda")
    px = (torch.rand(2 * 48 * 84, 3 * 2 * 16 * 16, device="cuda") * 2 - 1).to(torch.bfloat16)

    def run():
        with torch.no_grad():
            out = model(px, grid_thw=grid)
        return out

    out = run()
    r = timed(run, args.reps, 2)
    r.update({"workload": "vision_tower_2_keyframes_1344x768", "impl": "transformers " + __import__("transformers").__version__
              + " Qwen3VLVisionModel bf16 sdpa", "tokens": int(px.shape[0]), "merged": list(out.pooler_output.shape),
              "deepstack": len(out.deepstack_features)})
    del model
    torch.cuda.empty_cache()
    return r


def vae(args):
    import diffusers
    from diffusers import AutoencoderKLMiniMaxH3
    from diffusers.modular_pipelines.minimax_h3.encoders import encode_vae_condition

    with open(args.vae_config) as f:
        cfg = json.load(f)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoencoderKLMiniMaxH3.from_config(cfg).eval()
    assert next(model.encoder.parameters()).dtype == torch.float32
    gen = torch.Generator(device="cpu").manual_seed(1)
    frames = [torch.randint(0, 256, (1, 3, 1, 768, 1344), generator=gen, dtype=torch.uint8).cuda() for _ in range(2)]
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

    def run():
        with torch.no_grad():
            return [encode_vae_condition(model, f, mean, std) for f in frames]

    lat = run()
    r = timed(run, args.reps, 1)
    r.update({"workload": "vae_encode_2_keyframes_1344x768", "impl": "diffusers " + diffusers.__version__ +
              " AutoencoderKLMiniMaxH3 fp32 (tf32 cudnn=%s)" % torch.backends.cudnn.allow_tf32,
              "latents": list(lat[0].shape), "use_tiling": bool(model.use_tiling)})
    del model
    torch.cuda.empty_cache()
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text-encoder-config", required=True)
    ap.add_argument("--vae-config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", choices=["vision", "vae"], default=None)
    args = ap.parse_args()
    rows = []
    if args.only in (None, "vision"):
        rows.append(vision(args))
        print("peer vision p50 %.2f ms" % rows[-1]["p50"], flush=True)
    if args.only in (None, "vae"):
        rows.append(vae(args))
        print("peer vae p50 %.2f ms" % rows[-1]["p50"], flush=True)
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

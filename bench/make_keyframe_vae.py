#!/usr/bin/env python3
"""A video VAE folder holding only the encoder (the keyframes' encoder, `vortex generate --keyframe-vae DIR`) at the
released shapes, with random weights: diffusers' AutoencoderKLMiniMaxH3 built from a config.json (the release's
vae/config.json) under a fixed torch seed, on the GPU when there is one, and its `encoder.*` and `quant_conv.*`
tensors written in FP32 to DIR/diffusion_pytorch_model.safetensors beside a copy of the config. The decoder is left
out (1.8 B parameters nobody reads here). For device calls that time fl2va end to end without a checkpoint.
Run: python3 bench/make_keyframe_vae.py --config tests/fixtures/release/vae/config.json --out DIR
"""
import argparse
import json
import os
import shutil

import torch
from safetensors.torch import save_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from diffusers import AutoencoderKLMiniMaxH3

    with open(args.config) as f:
        cfg = json.load(f)
    torch.manual_seed(args.seed)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = AutoencoderKLMiniMaxH3.from_config(cfg)
    tensors = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()
               if k.startswith("encoder.") or k.startswith("quant_conv.")}
    os.makedirs(args.out, exist_ok=False)
    shutil.copyfile(args.config, os.path.join(args.out, "config.json"))
    save_file(tensors, os.path.join(args.out, "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    print("keyframe VAE: %d tensors, %.1f M parameters -> %s" %
          (len(tensors), sum(t.numel() for t in tensors.values()) / 1e6, args.out))


if __name__ == "__main__":
    main()

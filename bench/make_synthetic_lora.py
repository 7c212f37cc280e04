#!/usr/bin/env python3
"""Writes a deterministic synthetic rank-R LoRA for the canonical H3 model (50 blocks) in the native ComfyUI key
style (diffusion_model.blocks.N.{attn.qkv_proj, attn.out_proj, mlp.fc1, mlp.fc2}[.adaln_proj.linear]
.lora_A/.lora_B.weight, BF16, no alpha: alpha = rank, scale 1), for timing `vortex generate --preset turbo4 --lora`
against the 12-step run on synthetic weights (the published Turbo adapter is not needed to time the schedule).
Values N(0, 0.01): the merged model stays O(1). Size at rank 128: 1.2 GB (2.5 GB with --adaln).
Run: python3 bench/make_synthetic_lora.py OUT.safetensors [--rank 128] [--adaln]
"""
import argparse

import torch
from safetensors.torch import save_file

D, INNER, FFN, E, BLOCKS = 5376, 7168, 14336, 2688, 50


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--rank", type=int, default=128)
    ap.add_argument("--adaln", action="store_true", help="also adapt blocks.N.adaln_proj.linear [18D, E]")
    args = ap.parse_args()
    g = torch.Generator().manual_seed(17)
    layers = [("attn.qkv_proj", 3 * INNER, D), ("attn.out_proj", D, INNER), ("mlp.fc1", 2 * FFN, D), ("mlp.fc2", D, FFN)]
    if args.adaln:
        layers.append(("adaln_proj.linear", 18 * D, E))
    t = {}
    for b in range(BLOCKS):
        for name, out_f, in_f in layers:
            key = f"diffusion_model.blocks.{b}.{name}"
            t[key + ".lora_A.weight"] = (torch.randn(args.rank, in_f, generator=g) * 0.01).to(torch.bfloat16)
            t[key + ".lora_B.weight"] = (torch.randn(out_f, args.rank, generator=g) * 0.01).to(torch.bfloat16)
    save_file(t, args.out, metadata={"vortex.synthetic": "1", "rank": str(args.rank)})
    print(f"{args.out}: {len(t)} tensors, rank {args.rank}, {sum(v.numel() for v in t.values()) * 2 / 1e9:.2f} GB")


if __name__ == "__main__":
    main()

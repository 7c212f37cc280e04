#!/usr/bin/env python3
"""The two VAE folders a ref2va run reads, at the released shapes with random weights, for device calls that time
ref2va end to end without the checkpoint (bench/ref2va_e2e.sh): diffusers' AutoencoderKLMiniMaxH3 (vae/: the encoder
encodes image and video references, the decoder the output) and AutoencoderKLMiniMaxH3Audio (audio_vae/: the encoder
encodes soundtracks, the decoder the output), each built from the release's config.json under a fixed torch seed and
written in FP32 (diffusion_pytorch_model.safetensors beside a copy of the config).
Run: python3 bench/make_reference_vaes.py --release tests/fixtures/release --out DIR
"""
import argparse
import os
import shutil

import torch
from safetensors.torch import save_file


def write(model, config, out):
    os.makedirs(out, exist_ok=False)
    shutil.copyfile(config, os.path.join(out, "config.json"))
    tensors = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(tensors, os.path.join(out, "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    print("%s: %d tensors, %.1f M parameters" % (out, len(tensors), sum(t.numel() for t in tensors.values()) / 1e6))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", required=True, help="a folder with vae/config.json and audio_vae/config.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio

    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name, cls in (("vae", AutoencoderKLMiniMaxH3), ("audio_vae", AutoencoderKLMiniMaxH3Audio)):
        config = os.path.join(args.release, name, "config.json")
        torch.manual_seed(args.seed)
        with torch.device(device):
            model = cls.from_config(cls.load_config(config))
        write(model, config, os.path.join(args.out, name))


if __name__ == "__main__":
    main()

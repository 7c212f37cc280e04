#!/usr/bin/env python3
"""VAE parity fixtures for tests/vae/*: tiny random video and audio autoencoders from diffusers 0.42.1 and
their decodes, run by diffusers' own code (the VAE decode steps of modular_pipelines/minimax_h3/decoders.py).

diffusers and torch are oracles for these fixtures only; Vortex never imports them and CI never runs this
script (it checks the committed files). Run it where torch and diffusers are installed:

    python3 tests/vae/make_vae_fixtures.py [--out tests/vae/fixtures]

What it writes (FP32 torch on the CPU, every value from diffusers' code):
  video_vae/   AutoencoderKLMiniMaxH3 with a tiny decoder (save_pretrained: config.json + safetensors),
               all parameters random (LayerScale and registers included, which diffusers zero-inits).
  audio_vae/   AutoencoderKLMiniMaxH3Audio with a tiny BigVGAN decoder (weight_g / weight_v, filter buffers).
  video_cases.safetensors
               per case: `<case>.latents` [24, T, H, W] (normalized, as `vortex generate` writes them), the
               decode in ImageNet space `<case>.decoded` [3, F, H*r, W*r], and the frames after de-normalize +
               clamp to [0, 1], `<case>.u8` [3, F, H*r, W*r] (x * 255 in float32, round half even).
  audio_cases.safetensors
               per case: `<case>.latents` [2, C, Ta] and `<case>.audio` [2, Ta * hop] (clamped waveform).
  meta.json    the cases' tile geometry and the versions used.
"""
import argparse
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import save_file

import diffusers
from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio

PIXEL_MEAN = (0.485, 0.456, 0.406)
PIXEL_STD = (0.229, 0.224, 0.225)

VIDEO_TINY = dict(
    latent_channels=24, block_out_channels=(8, 8), layers_per_block=1, spatial_downsample_factors=(2, 2),
    temporal_downsample_factors=(2, 2), norm_num_groups=4, decoder_num_layers=2, decoder_num_attention_heads=2,
    decoder_attention_head_dim=16, decoder_num_register_tokens=4, decoder_ffn_mult=4, decoder_rope_theta=100.0,
    decoder_rope_dim_ratio=0.75, decoder_norm_eps=1e-5, clip_length=17, token_drop=3,
)
# (name, T, H, W, tile px or None for the released 256/64 geometry, min overlap px)
VIDEO_CASES = [
    ("odd_single_tile", 7, 5, 7, None, None),
    ("tiled_two_clips", 9, 8, 7, 16, 4),
]

AUDIO_TINY = dict(
    encoder_dim=4, encoder_rates=(5, 2), latent_dim=32, latent_channels=8, num_attention_heads=2, decoder_dim=16,
    decoder_rates=(5, 2), decoder_kernel_sizes=(9, 4), resblock_kernel_sizes=(3, 7, 11),
    resblock_dilation_sizes=((1, 3, 5), (1, 3, 5), (1, 3, 5)), sampling_rate=32000,
)
AUDIO_CASES = [("short", 13), ("odd", 6)]


def randomize(model, gen, std):
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * std(name, p))


def video_std(name, p):
    if name.endswith("scale1") or name.endswith("scale2"):
        return 0.3
    if "norm" in name and name.endswith("weight"):
        return 0.2  # around 1 after the +1 below
    if name.endswith("bias"):
        return 0.05
    if name.endswith("register_tokens"):
        return 1.0
    return 1.0 / np.sqrt(p.shape[-1]) if p.ndim >= 2 else 0.1


def audio_std(name, p):
    if name.endswith("weight_g"):
        return 0.0  # set below
    if name.endswith(".alpha") or name.endswith(".beta"):
        return 0.3
    if name.endswith("bias"):
        return 0.05
    return 1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)

    # ---- video ----
    vae = AutoencoderKLMiniMaxH3(
        **VIDEO_TINY,
        latents_mean=tuple(float(v) for v in (torch.randn(24, generator=gen) * 0.3)),
        latents_std=tuple(float(v) for v in (0.5 + torch.rand(24, generator=gen))),
    ).eval()
    randomize(vae, gen, video_std)
    with torch.no_grad():
        for name, p in vae.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.add_(1.0)
    vdir = os.path.join(out, "video_vae")
    shutil.rmtree(vdir, ignore_errors=True)
    vae.save_pretrained(vdir, safe_serialization=True)

    tensors, meta_cases = {}, []
    mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
    for name, t, h, w, tile, overlap in VIDEO_CASES:
        if tile is None:
            vae.enable_tiling(256, 256, 64, 64)
        else:
            vae.enable_tiling(tile, tile, overlap, overlap)
        latents = torch.randn(1, 24, t, h, w, generator=gen)
        with torch.no_grad():
            decoded = vae.decode(latents * std + mean, return_dict=False)[0].float()
        rgb = (decoded * torch.tensor(PIXEL_STD).view(1, -1, 1, 1, 1) + torch.tensor(PIXEL_MEAN).view(1, -1, 1, 1, 1)).clamp(0, 1)
        u8 = torch.from_numpy(np.round(rgb.numpy() * np.float32(255)).astype(np.uint8))
        tensors[f"{name}.latents"] = latents[0].contiguous()
        tensors[f"{name}.decoded"] = decoded[0].contiguous()
        tensors[f"{name}.u8"] = u8[0].contiguous()
        meta_cases.append(dict(name=name, latent_shape=[24, t, h, w], frames=int(decoded.shape[2]),
                               tile=tile or 256, overlap=overlap or 64))
        print(f"video {name}: latents {list(latents.shape)} -> {list(decoded.shape)}, rgb std {rgb.std():.3f}")
    save_file(tensors, os.path.join(out, "video_cases.safetensors"))

    # ---- audio ----
    avae = AutoencoderKLMiniMaxH3Audio(
        **AUDIO_TINY,
        latents_mean=[float(v) for v in (torch.randn(8, generator=gen) * 0.3)],
        latents_std=[float(v) for v in (0.5 + torch.rand(8, generator=gen))],
    ).eval()
    randomize(avae, gen, audio_std)
    with torch.no_grad():
        for name, p in avae.named_parameters():
            if name.endswith("weight_g"):
                p.copy_(0.3 + 0.5 * torch.rand(p.shape, generator=gen))
        avae.decoder.conv_post.weight_g.mul_(0.3)  # keeps most samples inside the [-1, 1] clamp
    adir = os.path.join(out, "audio_vae")
    shutil.rmtree(adir, ignore_errors=True)
    avae.save_pretrained(adir, safe_serialization=True)
    atensors = {}
    amean = torch.tensor(avae.config.latents_mean).view(1, -1, 1)
    astd = torch.tensor(avae.config.latents_std).view(1, -1, 1)
    for name, ta in AUDIO_CASES:
        latents = torch.randn(2, 8, ta, generator=gen)
        with torch.no_grad():
            audio = avae.decode(latents * astd + amean, return_dict=False)[0].float()  # [2, 1, N]
        atensors[f"{name}.latents"] = latents.contiguous()
        atensors[f"{name}.audio"] = audio[:, 0].contiguous()
        clipped = (audio.abs() >= 1).float().mean().item()
        print(f"audio {name}: latents {list(latents.shape)} -> {list(audio.shape)}, rms {audio.pow(2).mean().sqrt():.3f}, clipped {clipped:.3f}")
    save_file(atensors, os.path.join(out, "audio_cases.safetensors"))

    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(dict(diffusers=diffusers.__version__, torch=torch.__version__, video_cases=meta_cases,
                       audio_cases=[dict(name=n, latent_frames=ta) for n, ta in AUDIO_CASES]), f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Video VAE encoder fixtures for tests/vae/video_vae_encoder_test.cpp: a tiny random AutoencoderKLMiniMaxH3 from
diffusers 0.42.1 and what its encoder and the fl2va keyframe step make of a few inputs.

diffusers and torch are oracles for these fixtures only; Vortex never imports them and CI never runs this script
(it checks the committed files). Run it where torch and diffusers are installed:

    python3 tests/vae/make_vae_encoder_fixtures.py [--out tests/vae/fixtures/video_encoder]

What it writes (torch on the CPU, every value from diffusers' code):
  vae/           the tiny autoencoder (save_pretrained: config.json + safetensors, FP32). Its encoder has every
                 code path of the released one: channel changes (conv_shortcut), spatial+temporal and
                 spatial-only downsampling, a level without downsampling, per-frame GroupNorm.
  cases.safetensors, per case:
    <case>.pixels     [3, F, H, W] uint8 input
    <case>.moments    [2C, T, h, w] vae.encode(...).latent_dist.parameters in FP32 (tiling as the case says)
    <case>.moments64  the same model and input in FP64: the floor FP32 is judged against
    <case>.noise      torch.randn([1, C, T, h, w], generator=torch.Generator().manual_seed(42)) (the posterior noise)
    <case>.latents    [C, T, h, w] encode_vae_condition's output (ImageNet normalize, sample, float16 rounding,
                      latents_mean/std): for keyframes the MiniMaxH3KeyframeVaeEncoderStep's own output
  meta.json      the cases' tile geometry, torch's CPU capability and the versions used, and SHA-256 of
                 torch.randn(n, generator seeded 42) for the released keyframe latent size and an odd size.
"""
import argparse
import copy
import hashlib
import json
import os
import shutil
import types

import numpy as np
import torch
from safetensors.torch import save_file

import diffusers
from diffusers import AutoencoderKLMiniMaxH3
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3KeyframeVaeEncoderStep, encode_vae_condition
from diffusers.modular_pipelines.modular_pipeline import PipelineState
from PIL import Image

PIXEL_MEAN = (0.485, 0.456, 0.406)
PIXEL_STD = (0.229, 0.224, 0.225)
SEED = 20261202

TINY = dict(
    latent_channels=4, block_out_channels=(8, 16, 16), layers_per_block=1, spatial_downsample_factors=(2, 2, 1),
    temporal_downsample_factors=(1, 2, 1), norm_num_groups=4, decoder_num_layers=1, decoder_num_attention_heads=1,
    decoder_attention_head_dim=8, decoder_num_register_tokens=1, decoder_ffn_mult=1, clip_length=17, token_drop=3,
)
# (name, frames, height, width, tile px or None (the released 256 / 64 geometry), min overlap px)
CASES = [
    ("keyframe", 1, 24, 40, None, None),
    ("keyframe_tiled", 1, 56, 88, 32, 8),
    ("video_two_clips", 20, 16, 24, None, None),
]


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and ("norm" in name):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen) if name.endswith("weight")
                        else 0.2 * torch.randn(p.shape, generator=gen))
            elif p.ndim == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures", "video_encoder"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    latents_mean = (torch.randn(TINY["latent_channels"], generator=gen) * 0.3).tolist()
    latents_std = (0.5 + torch.rand(TINY["latent_channels"], generator=gen)).tolist()
    vae = AutoencoderKLMiniMaxH3(**TINY, latents_mean=latents_mean, latents_std=latents_std).eval()
    randomize(vae, gen)
    vae.save_pretrained(os.path.join(args.out, "vae"))
    vae64 = copy.deepcopy(vae).double().eval()

    rng = np.random.default_rng(SEED)
    tensors, meta = {}, {"diffusers": diffusers.__version__, "torch": torch.__version__,
                         "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cases": {}}
    for name, frames, height, width, tile, overlap in CASES:
        pixels = torch.from_numpy(rng.integers(0, 256, (3, frames, height, width), dtype=np.uint8))
        for model in (vae, vae64):
            if tile is None:
                model.tile_sample_min_height = model.tile_sample_min_width = 256
                model.tile_sample_min_overlap_height = model.tile_sample_min_overlap_width = 64
            else:
                model.enable_tiling(tile, tile, overlap, overlap)
        mean = torch.tensor(PIXEL_MEAN).view(1, -1, 1, 1, 1)
        std = torch.tensor(PIXEL_STD).view(1, -1, 1, 1, 1)
        with torch.no_grad():
            x = (pixels[None].float().div(255.0) - mean) / std
            moments = vae.encode(x).latent_dist.parameters[0]
            x64 = (pixels[None].double().div(255.0) - mean.double()) / std.double()
            moments64 = vae64.encode(x64).latent_dist.parameters[0]
        shape = [1, TINY["latent_channels"]] + list(moments.shape[1:])
        noise = torch.randn(shape, generator=torch.Generator().manual_seed(42))
        if frames == 1:
            # The keyframe step itself, on the image the canvas step would hand it.
            step = MiniMaxH3KeyframeVaeEncoderStep()
            components = types.SimpleNamespace(vae=vae, pixel_mean=PIXEL_MEAN, pixel_std=PIXEL_STD,
                                               keyframe_encode_seed=42, _execution_device=torch.device("cpu"))
            state = PipelineState()
            state.set("keyframes", [Image.fromarray(pixels[:, 0].permute(1, 2, 0).numpy())])
            _, state = step(components, state)
            latents = state.get("condition_latents")[0][0]
        else:
            latents = encode_vae_condition(vae, pixels[None], PIXEL_MEAN, PIXEL_STD, 42)[0]
        tensors[name + ".pixels"] = pixels.contiguous()
        tensors[name + ".moments"] = moments.float().contiguous()
        tensors[name + ".moments64"] = moments64.double().contiguous()
        tensors[name + ".noise"] = noise[0].contiguous()
        tensors[name + ".latents"] = latents.float().contiguous()
        meta["cases"][name] = {"frames": frames, "height": height, "width": width, "tile": tile, "overlap": overlap,
                               "latent_shape": list(latents.shape)}
    # The posterior noise of a keyframe on the released 1344x768 canvas (24 x 1 x 48 x 84) and an odd size.
    meta["randn_sha256"] = []
    for n in (24 * 48 * 84, 24 * 48 * 84 + 7):
        noise = torch.randn(n, generator=torch.Generator().manual_seed(42))
        meta["randn_sha256"].append({"n": n, "sha256": hashlib.sha256(noise.numpy().tobytes()).hexdigest()})
    save_file(tensors, os.path.join(args.out, "cases.safetensors"))
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", args.out, meta)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Audio VAE encoder fixtures for tests/vae/audio_vae_encoder_test.cpp: a tiny random AutoencoderKLMiniMaxH3Audio
from diffusers 0.42.1 and what its encoder and the Ref2VA reference step make of a few stereo soundtracks.

diffusers and torch are oracles for these fixtures only; Vortex never imports them and CI never runs this script
(it checks the committed files). Run it where torch and diffusers are installed:

    python3 tests/vae/make_audio_encoder_fixtures.py [--out tests/vae/fixtures/audio_encoder]

What it writes (torch on the CPU, every value from diffusers' code):
  audio_vae/     the tiny autoencoder (save_pretrained: config.json + safetensors with weight_g / weight_v, FP32).
                 Its encoder has every code path of the released one: weight-normed convolutions, Snake1d, residual
                 units at dilations 1/3/9, an even and an odd stride, and a pre_block whose head width (12) does not
                 divide evenly into latent_channels (8), so adaptive_avg_pool1d's bins overlap.
  cases.safetensors, per case:
    <case>.audio      [2, N] float32 stereo waveform at the VAE's rate (N not a multiple of the hop: padding)
    <case>.mean       [2, C, T] vae.encode(audio[:, None]).latent_dist.mode() in FP32
    <case>.mean64     the same model and input in FP64: the floor FP32 is judged against
    <case>.rows       [2T, C] MiniMaxH3Ref2VAReferenceEncoderStep's audio_condition_latents for the reference
  meta.json      the versions used and the case lengths.
"""
import argparse
import json
import os
import shutil
import types

import numpy as np
import torch
from safetensors.torch import save_file

import diffusers
from diffusers import AutoencoderKLMiniMaxH3Audio
from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3AudioReference
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VAReferenceEncoderStep
from diffusers.modular_pipelines.modular_pipeline import PipelineState

SEED = 20261203
TINY = dict(encoder_dim=4, encoder_rates=(2, 5), latent_dim=24, latent_channels=8, num_attention_heads=2,
            decoder_dim=16, decoder_rates=(5, 2), decoder_kernel_sizes=(9, 4), resblock_kernel_sizes=(3,),
            resblock_dilation_sizes=((1,),), sampling_rate=32000)
CASES = [("short", 53), ("long", 247)]


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif "norm" in name and p.ndim == 1:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen) if name.endswith("weight")
                        else 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("weight_g"):
                p.copy_(0.8 + 0.4 * torch.rand(p.shape, generator=gen))
            elif p.ndim == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures", "audio_encoder"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    gen = torch.Generator().manual_seed(SEED)
    c = TINY["latent_channels"]
    latents_mean = (torch.randn(c, generator=gen) * 0.3).tolist()
    latents_std = (0.5 + torch.rand(c, generator=gen)).tolist()
    vae = AutoencoderKLMiniMaxH3Audio(**TINY, latents_mean=latents_mean, latents_std=latents_std).eval()
    randomize(vae, gen)
    vae.save_pretrained(os.path.join(args.out, "audio_vae"))
    # weight_norm modules cannot be deep-copied: the FP64 twin is the saved model, reloaded.
    vae64 = AutoencoderKLMiniMaxH3Audio.from_pretrained(os.path.join(args.out, "audio_vae")).double().eval()

    tensors, meta = {}, {"diffusers": diffusers.__version__, "torch": torch.__version__, "cases": {}}
    for name, n in CASES:
        audio = (0.5 * torch.randn(2, n, generator=gen)).clamp(-1, 1).float()
        with torch.no_grad():
            mean = vae.encode(audio[:, None]).latent_dist.mode()
            mean64 = vae64.encode(audio.double()[:, None]).latent_dist.mode()
        step = MiniMaxH3Ref2VAReferenceEncoderStep()
        components = types.SimpleNamespace(vae=None, audio_vae=vae, audio_latent_channels=c,
                                           _execution_device=torch.device("cpu"))
        state = PipelineState()
        state.set("normalized_references", [MiniMaxH3AudioReference(audio=audio, sample_rate=32000)])
        _, state = step(components, state)
        rows = state.get("audio_condition_latents")[0]
        tensors[name + ".audio"] = audio.contiguous()
        tensors[name + ".mean"] = mean.float().contiguous()
        tensors[name + ".mean64"] = mean64.double().contiguous()
        tensors[name + ".rows"] = rows.float().contiguous()
        meta["cases"][name] = {"samples": n, "latent_frames": int(mean.shape[-1])}
    save_file(tensors, os.path.join(args.out, "cases.safetensors"))
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", args.out, meta)


if __name__ == "__main__":
    main()

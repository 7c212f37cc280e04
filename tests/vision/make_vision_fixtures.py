#!/usr/bin/env python3
"""Qwen3-VL vision fixtures for tests/vision/vision_tower_test.cpp: a tiny random Qwen3VLForConditionalGeneration
from transformers 5.x, its image processor's output and its vision tower's outputs.

transformers, torch and torchvision are oracles for these fixtures only; Vortex never imports them and CI never
runs this script (it checks the committed files). Run it where they are installed:

    python3 -m pip install torch torchvision 'transformers>=5,<6' safetensors numpy
    python3 tests/vision/make_vision_fixtures.py [--out tests/vision/fixtures]

What it writes (every value from transformers' code, nothing from Vortex):
  model/           the tiny model (save_pretrained: config.json + model.safetensors, FP32): the vision tower has
                   every code path of the released one (2-D rotary, learned position grid resampled bilinearly,
                   DeepStack taps, the 2x2 merger) at width 32.
  cases.safetensors, per case (images on canvases of multiples of 32, as fl2va keyframes are):
    <case>.image          [H, W, 3] uint8 input
    <case>.pixel_values   the image processor's output [N, 3 * 2 * P * P] (the tiny model's patch size)
    <case>.last_hidden    the vision blocks' output [N, D] (FP32)
    <case>.merged         model.visual(...).pooler_output, the vision tokens [N / 4, out] (FP32)
    <case>.deepstack.<k>  the DeepStack features of tap k [N / 4, out] (FP32)
    <case>.merged64       the same model in FP64: the floor FP32 is judged against
  meta.json        grids, the versions, and the release processor (FL2VA/processor/preprocessor_config.json) on a
                   1344x768 and a 768x1344 canvas of a pattern the test rebuilds: image_grid_thw and SHA-256 of
                   pixel_values (float32).
"""
import argparse
import copy
import hashlib
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import save_file

import transformers
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

SEED = 20261202
RELEASE_PROCESSOR = dict(size={"longest_edge": 16777216, "shortest_edge": 65536}, patch_size=16,
                         temporal_patch_size=2, merge_size=2, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
TINY_VISION = dict(depth=4, hidden_size=32, hidden_act="gelu_pytorch_tanh", intermediate_size=48, num_heads=2,
                   in_channels=3, patch_size=8, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=40,
                   num_position_embeddings=36, deepstack_visual_indexes=[0, 2])
TINY_TEXT = dict(vocab_size=300, hidden_size=40, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=20, rope_parameters={"rope_type": "default", "rope_theta": 5e5,
                                                                      "mrope_section": [4, 3, 3]})
# (name, height, width): the tiny processor's factor is 8 * 2 = 16, so these pass through without a resize.
CASES = [("landscape", 32, 64), ("portrait", 80, 48)]


def sha(t):
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    torch.manual_seed(SEED)
    config = Qwen3VLConfig(vision_config=TINY_VISION, text_config=TINY_TEXT, image_token_id=290, video_token_id=291,
                           vision_start_token_id=292, vision_end_token_id=293)
    model = Qwen3VLForConditionalGeneration(config).eval()
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("model.visual."):
                if "norm" in name and name.endswith("weight"):
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
                elif p.ndim == 1:
                    p.copy_(0.1 * torch.randn(p.shape, generator=gen))
                elif "pos_embed" in name:
                    p.copy_(0.5 * torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) / p[0].numel() ** 0.5)
    model.save_pretrained(os.path.join(args.out, "model"))
    model64 = copy.deepcopy(model).double()
    visual, visual64 = model.model.visual, model64.model.visual

    # The release's processor with the tiny patch size, and a pixel floor low enough that these canvases stay
    # unresized (the release's floor, 65536 pixels, is far below any fl2va canvas).
    processor = Qwen2VLImageProcessor(**dict(RELEASE_PROCESSOR, patch_size=TINY_VISION["patch_size"],
                                             size={"longest_edge": 16777216, "shortest_edge": 256}))
    rng = np.random.default_rng(SEED)
    tensors, meta = {}, {"transformers": transformers.__version__, "torch": torch.__version__,
                         "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "cases": {},
                         "vision_config": model.config.vision_config.to_dict(), "release_processor": []}
    for name, height, width in CASES:
        image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        out = processor(images=[image], return_tensors="pt")
        pixel_values, grid = out["pixel_values"], out["image_grid_thw"]
        with torch.no_grad():
            o = visual(pixel_values, grid_thw=grid)
            o64 = visual64(pixel_values.double(), grid_thw=grid)
        tensors[name + ".image"] = torch.from_numpy(image)
        tensors[name + ".pixel_values"] = pixel_values.float().contiguous()
        tensors[name + ".last_hidden"] = o.last_hidden_state.float().contiguous()
        tensors[name + ".merged"] = o.pooler_output.float().contiguous()
        tensors[name + ".merged64"] = o64.pooler_output.double().contiguous()
        for k, feature in enumerate(o.deepstack_features):
            tensors["%s.deepstack.%d" % (name, k)] = feature.float().contiguous()
            tensors["%s.deepstack64.%d" % (name, k)] = o64.deepstack_features[k].double().contiguous()
        meta["cases"][name] = {"height": height, "width": width, "grid_thw": grid[0].tolist()}

    release = Qwen2VLImageProcessor(**RELEASE_PROCESSOR)
    for height, width in ((768, 1344), (1344, 768)):
        # A pattern the test rebuilds: (7 y + 13 x + 29 c + (x * y) % 11) % 256.
        y, x, c = np.meshgrid(np.arange(height), np.arange(width), np.arange(3), indexing="ij")
        image = ((7 * y + 13 * x + 29 * c + (x * y) % 11) % 256).astype(np.uint8)
        out = release(images=[image], return_tensors="pt")
        meta["release_processor"].append({"height": height, "width": width,
                                          "grid_thw": out["image_grid_thw"][0].tolist(),
                                          "shape": list(out["pixel_values"].shape),
                                          "sha256": sha(out["pixel_values"].float())})
    save_file(tensors, os.path.join(args.out, "cases.safetensors"))
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Conditioner-with-keyframes fixtures for tests/vision/conditioner_vision_test.cpp: transformers 5.x's
Qwen3VLModel on a presentation holding vision blocks, every hidden_states[k], for the tiny Qwen3-VL model the text
encoder tests already ship (tests/text_encoder/fixtures/model: BF16, a one-block vision tower with a DeepStack tap).

transformers and torch are oracles for these fixtures only; Vortex never imports them and CI never runs this script
(it checks the committed file). Run it where they are installed:

    python3 tests/vision/make_conditioner_fixtures.py [--model tests/text_encoder/fixtures/model]
                                                      [--out tests/vision/fixtures]

What it writes, conditioner.safetensors, per case (one or two keyframes, text around them):
  <case>.ids          i32 [L]: label ids, <|vision_start|> (502), <|image_pad|> (500) per vision token,
                      <|vision_end|> (503), prompt ids (all text ids below 500)
  <case>.image.<i>    u8 [H, W, 3] keyframe i
  <case>.pixel_values f32 the processor's output (the model's patch size 8, merge 2)
  <case>.bf16.<k>     bf16 [L, 128] hidden_states[k] of the BF16 model (the vision tower in BF16 too, as the
                      pipeline runs it), k = 0..4
  metadata: grids and floor_<case>_<k> = rel-L2 of that state against the same weights in FP32 (the floor).
"""
import argparse
import os

import numpy as np
import torch
from safetensors.torch import save_file

import transformers
from transformers import Qwen3VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

PAD, START, END = 500, 502, 503
# (name, keyframe canvases (h, w), the text before each vision block, the prompt length)
CASES = [("one", [(32, 48)], 5, 23), ("two", [(48, 32), (32, 64)], 4, 17)]


def rel_l2(got, want):
    return float(torch.linalg.vector_norm(got.double() - want.double()) / torch.linalg.vector_norm(want.double()))


def main():
    parser = argparse.ArgumentParser()
    here = os.path.dirname(__file__)
    parser.add_argument("--model", default=os.path.join(here, "..", "text_encoder", "fixtures", "model"))
    parser.add_argument("--out", default=os.path.join(here, "fixtures"))
    args = parser.parse_args()
    bf16 = Qwen3VLForConditionalGeneration.from_pretrained(args.model, dtype=torch.bfloat16).eval()
    f32 = Qwen3VLForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32).eval()
    processor = Qwen2VLImageProcessor(size={"longest_edge": 16777216, "shortest_edge": 64}, patch_size=8,
                                      temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    rng = np.random.default_rng(11)
    gen = torch.Generator().manual_seed(11)
    tensors, meta = {}, {"transformers": transformers.__version__, "torch": torch.__version__}
    for name, canvases, label_len, prompt_len in CASES:
        images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in canvases]
        vision = processor(images=images, return_tensors="pt")
        grid = vision["image_grid_thw"]
        ids = []
        for i in range(len(images)):
            ids += torch.randint(0, 500, (label_len,), generator=gen).tolist()
            ids += [START] + [PAD] * (int(grid[i].prod()) // 4) + [END]
        ids += torch.randint(0, 500, (prompt_len,), generator=gen).tolist()
        input_ids = torch.tensor([ids])
        mm = (input_ids == PAD).long()
        states = {}
        for tag, model, dtype in (("bf16", bf16, torch.bfloat16), ("f32", f32, torch.float32)):
            with torch.no_grad():
                out = model.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                  mm_token_type_ids=mm, pixel_values=vision["pixel_values"].to(dtype),
                                  image_grid_thw=grid, use_cache=False, output_hidden_states=True)
            states[tag] = [h[0].float() for h in out.hidden_states]
        tensors[name + ".ids"] = torch.tensor(ids, dtype=torch.int32)
        tensors[name + ".pixel_values"] = vision["pixel_values"].float().contiguous()
        for i, image in enumerate(images):
            tensors["%s.image.%d" % (name, i)] = torch.from_numpy(image)
        for k, (h, h32) in enumerate(zip(states["bf16"], states["f32"])):
            tensors["%s.bf16.%d" % (name, k)] = h.to(torch.bfloat16).contiguous()
            meta["floor_%s_%d" % (name, k)] = repr(rel_l2(h, h32))
        meta["grids_" + name] = repr(grid.tolist())
    save_file(tensors, os.path.join(args.out, "conditioner.safetensors"), metadata=meta)
    print(meta)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""BF16 outputs of transformers' Qwen3-VL vision tower on the committed tiny fixtures, for the backend (BF16)
program of src/vision/vision_tower.h. Reads tests/vision/fixtures/{model,cases.safetensors,meta.json} (made by
make_vision_fixtures.py) and writes cases_bf16.safetensors: per case the BF16 model's merged tokens, DeepStack
features and last hidden state (as f32). The floor of the BF16 program is these against the FP32 outputs already in
cases.safetensors. Run where torch and transformers are installed
(python3 -m pip install torch "transformers>=5" safetensors numpy): python3 tests/vision/make_vision_bf16_fixtures.py
"""
import argparse
import copy
import json
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3VLForConditionalGeneration


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=here)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = Qwen3VLForConditionalGeneration.from_pretrained(os.path.join(args.dir, "model"), dtype=torch.float32)
    visual = copy.deepcopy(model.model.visual).to(torch.bfloat16).eval()
    cases = load_file(os.path.join(args.dir, "cases.safetensors"))
    with open(os.path.join(args.dir, "meta.json")) as f:
        meta = json.load(f)
    out = {}
    for name, c in sorted(meta["cases"].items()):
        grid = torch.tensor([c["grid_thw"]])
        with torch.no_grad():
            o = visual(cases[name + ".pixel_values"], grid_thw=grid)
        out[name + ".merged"] = o.pooler_output.float().contiguous()
        out[name + ".last_hidden"] = o.last_hidden_state.float().contiguous()
        for k, feature in enumerate(o.deepstack_features):
            out["%s.deepstack.%d" % (name, k)] = feature.float().contiguous()
    save_file(out, os.path.join(args.dir, "cases_bf16.safetensors"))
    print("wrote", os.path.join(args.dir, "cases_bf16.safetensors"), sorted(out))


if __name__ == "__main__":
    main()

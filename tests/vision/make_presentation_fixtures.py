#!/usr/bin/env python3
"""fl2va presentation fixtures for tests/vision/presentation_test.cpp: what diffusers 0.42.1's
MiniMaxH3FL2VATextEncoderStep hands the Qwen3-VL conditioner for keyframes and a prompt, and the M-RoPE positions
transformers 5.x's Qwen3VLModel.get_rope_index gives those tokens.

diffusers, transformers and torch are oracles for these fixtures only; Vortex never imports them and CI never runs
this script (it checks the committed file). Run it where they are installed, with the Qwen tokenizer the repository
ships (tests/text/fixtures/qwen_tokenizer.tar.xz) extracted:

    python3 tests/vision/make_presentation_fixtures.py --tokenizer DIR/qwen_tokenizer.json [--out tests/vision/fixtures]

What it writes: presentation.json, per case (keyframe canvases, prompt): the step's token ids and per-row modality
tags (text 1, a vision block's rows 0), the image_grid_thw its processor produced, and the conditioner's M-RoPE
position ids [3, L] (in full for small cases, SHA-256 of int64 otherwise).
"""
import argparse
import hashlib
import json
import os
import types

import numpy as np
import torch
from PIL import Image

import diffusers.modular_pipelines.minimax_h3.encoders as encoders
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3FL2VATextEncoderStep
from diffusers.modular_pipelines.modular_pipeline import PipelineState
from transformers import PreTrainedTokenizerFast, Qwen3VLConfig, Qwen3VLModel, Qwen3VLProcessor
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

RELEASE_PROCESSOR = dict(size={"longest_edge": 16777216, "shortest_edge": 65536}, patch_size=16,
                         temporal_patch_size=2, merge_size=2, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
CASES = [
    ("one_small", [(256, 320)], "a red fox jumps over the fence"),
    ("two_small", [(256, 320), (256, 320)], "Die Katze schläft. 猫が寝ている。"),
    ("one_canvas", [(768, 1344)], "a cinematic shot of waves at dusk"),
    ("two_canvas_portrait", [(1344, 768), (1344, 768)], "a dancer spins"),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures"))
    args = parser.parse_args()
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    image_processor = Qwen2VLImageProcessor(**RELEASE_PROCESSOR)
    processor = Qwen3VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                 video_processor=Qwen3VLVideoProcessor(), chat_template=None)
    tiny = Qwen3VLConfig(vision_config=dict(depth=1, hidden_size=8, num_heads=1, intermediate_size=8,
                                            out_hidden_size=8, spatial_merge_size=2, deepstack_visual_indexes=[]),
                         text_config=dict(vocab_size=8, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                                          num_attention_heads=1, num_key_value_heads=1, head_dim=8),
                         image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
                         video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
                         vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
                         vision_end_token_id=tokenizer.convert_tokens_to_ids("<|vision_end|>"))
    rope_model = Qwen3VLModel(tiny)

    captured = {}

    def capture(text_encoder, processor, token_ids, vision_inputs=None, text_encoder_layer=50, device=None,
                dtype=None):
        captured["token_ids"] = list(token_ids)
        captured["mm"] = processor.create_mm_token_type_ids([token_ids])[0]
        captured["grid"] = vision_inputs["image_grid_thw"]
        return torch.zeros(1, len(token_ids), 8)

    encoders.get_qwen3vl_prompt_embeds = capture
    rng = np.random.default_rng(5)
    out = {"generator": "tests/vision/make_presentation_fixtures.py", "cases": []}
    for name, sizes, prompt in CASES:
        keyframes = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in sizes]
        step = MiniMaxH3FL2VATextEncoderStep()
        components = types.SimpleNamespace(tokenizer=tokenizer, processor=processor, text_tag=1, video_tag=0,
                                           text_encoder=types.SimpleNamespace(dtype=torch.float32), text_encoder_layer=50,
                                           _execution_device=torch.device("cpu"))
        state = PipelineState()
        state.set("prompt", prompt)
        state.set("keyframes", keyframes)
        _, state = step(components, state)
        ids = torch.tensor([captured["token_ids"]])
        positions, _ = rope_model.get_rope_index(ids, torch.tensor([captured["mm"]]), image_grid_thw=captured["grid"])
        positions = positions[:, 0].to(torch.int64).contiguous()
        case = {"name": name, "prompt": prompt, "canvases": sizes, "grid_thw": captured["grid"].tolist(),
                "token_ids": captured["token_ids"], "tags": state.get("text_token_tags").tolist(),
                "positions_sha256": hashlib.sha256(positions.numpy().tobytes()).hexdigest()}
        if positions.shape[1] <= 200:
            case["positions"] = positions.tolist()
        out["cases"].append(case)
    with open(os.path.join(args.out, "presentation.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""ref2va presentation fixtures for tests/vision/ref2va_presentation_test.cpp: what diffusers 0.42.1's
MiniMaxH3Ref2VATextEncoderStep hands the Qwen3-VL conditioner for a list of references and a prompt, and the M-RoPE
positions transformers 5.x's Qwen3VLModel.get_rope_index gives those tokens.

diffusers, transformers and torch are oracles for these fixtures only; Vortex never imports them and CI never runs
this script (it checks the committed file). Run it where they are installed, with the Qwen tokenizer the repository
ships (tests/text/fixtures/qwen_tokenizer.tar.xz) extracted:

    python3 tests/vision/make_ref2va_presentation_fixtures.py --tokenizer DIR/qwen_tokenizer.json \
        [--out tests/vision/fixtures]

What it writes: ref2va_presentation.json, with
  sampling: per 24 fps frame count, _sample_video_condition_frames' frame indices and block timestamps;
  cases: per case (references with their sizes, prompt), the step's token ids and per-row tags (text 1, vision
    rows 0), the image_grid_thw and video_grid_thw its processors (the release's configs) produced, and the
    conditioner's M-RoPE positions [3, L] (SHA-256 of int64, and in full when short).
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
from diffusers.modular_pipelines.minimax_h3 import (
    MiniMaxH3AudioReference,
    MiniMaxH3ImageReference,
    MiniMaxH3VideoReference,
)
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VATextEncoderStep
from diffusers.modular_pipelines.modular_pipeline import PipelineState
from transformers import PreTrainedTokenizerFast, Qwen3VLConfig, Qwen3VLModel, Qwen3VLProcessor
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

# The release's Ref2VA/processor/preprocessor_config.json and video_preprocessor_config.json.
IMAGE_PROCESSOR = dict(size={"longest_edge": 16777216, "shortest_edge": 65536}, patch_size=16, temporal_patch_size=2,
                       merge_size=2, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
VIDEO_PROCESSOR = dict(size={"longest_edge": 25165824, "shortest_edge": 4096}, patch_size=16, temporal_patch_size=2,
                       merge_size=2, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
# (name, references as (kind, height, width, frames, sound), prompt)
CASES = [
    ("image", [("image", 256, 320, 0, False)], "a red fox"),
    ("video_with_sound", [("video", 64, 96, 30, True)], "the same dance, at night"),
    ("mixed", [("image", 192, 128, 0, False), ("audio", 0, 0, 0, True), ("video", 96, 64, 73, False),
               ("image", 128, 256, 0, False), ("video", 64, 64, 48, True)], "Die Katze tanzt. 猫が踊る。"),
    ("audio_first", [("audio", 0, 0, 0, True), ("video", 64, 96, 121, False)], "<Picture 1> sings"),
]
SAMPLING = [24, 25, 36, 37, 48, 49, 60, 97, 107, 120, 124, 125, 143, 300, 360]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures"))
    args = parser.parse_args()
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer)
    processor = Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(**IMAGE_PROCESSOR), tokenizer=tokenizer,
                                 video_processor=Qwen3VLVideoProcessor(**VIDEO_PROCESSOR), chat_template=None)
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
        captured["image_grid"] = vision_inputs.get("image_grid_thw")
        captured["video_grid"] = vision_inputs.get("video_grid_thw")
        return torch.zeros(1, len(token_ids), 8)

    encoders.get_qwen3vl_prompt_embeds = capture
    out = {"generator": "tests/vision/make_ref2va_presentation_fixtures.py", "sampling": [], "cases": []}
    for n in SAMPLING:
        # Frames tagged with their own index, so the sampled ones say which they are.
        tagged = np.arange(n, dtype=np.int64).reshape(n, 1, 1, 1).repeat(3, axis=3)
        picked, stamps = MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames(tagged, 24, 2.0, 2)
        out["sampling"].append({"frames": n, "indices": [int(f[0, 0, 0]) for f in picked],
                                "block_timestamps": stamps})
    rng = np.random.default_rng(7)
    for name, refs, prompt in CASES:
        references = []
        for kind, h, w, frames, sound in refs:
            if kind == "image":
                references.append(MiniMaxH3ImageReference(
                    image=Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))))
            elif kind == "video":
                references.append(MiniMaxH3VideoReference(
                    frames=rng.integers(0, 256, (frames, h, w, 3), dtype=np.uint8), fps=24.0,
                    audio=torch.zeros(2, 800) if sound else None, sample_rate=32000 if sound else None))
            else:
                references.append(MiniMaxH3AudioReference(audio=torch.zeros(2, 800), sample_rate=32000))
        step = MiniMaxH3Ref2VATextEncoderStep()
        components = types.SimpleNamespace(tokenizer=tokenizer, processor=processor, text_tag=1, video_tag=0, fps=24,
                                           text_encoder=types.SimpleNamespace(dtype=torch.float32),
                                           text_encoder_layer=50, _execution_device=torch.device("cpu"))
        state = PipelineState()
        state.set("prompt", prompt)
        state.set("normalized_references", references)
        _, state = step(components, state)
        ids = torch.tensor([captured["token_ids"]])
        positions, _ = rope_model.get_rope_index(ids, torch.tensor([captured["mm"]]),
                                                 image_grid_thw=captured["image_grid"],
                                                 video_grid_thw=captured["video_grid"])
        positions = positions[:, 0].to(torch.int64).contiguous()
        case = {"name": name, "prompt": prompt,
                "references": [{"kind": k, "height": h, "width": w, "frames": f, "sound": s}
                               for k, h, w, f, s in refs],
                "image_grid_thw": [] if captured["image_grid"] is None else captured["image_grid"].tolist(),
                "video_grid_thw": [] if captured["video_grid"] is None else captured["video_grid"].tolist(),
                "token_ids": captured["token_ids"], "tags": state.get("text_token_tags").tolist(),
                "positions_sha256": hashlib.sha256(positions.numpy().tobytes()).hexdigest()}
        if positions.shape[1] <= 300:
            case["positions"] = positions.tolist()
        out["cases"].append(case)
    with open(os.path.join(args.out, "ref2va_presentation.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()

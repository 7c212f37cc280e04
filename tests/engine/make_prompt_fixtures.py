#!/usr/bin/env python3
"""Prompt-presentation parity fixture for tests/engine/prompt_encoder_test.cpp: diffusers' own MiniMax-H3 t2va
encode step (modular_pipelines/minimax_h3/encoders.py, MiniMaxH3TextEncoderStep) run on a tiny random Qwen3-VL
conditioner with the tiny tokenizer of tests/text/fixtures/tiny_tokenizer.json.

diffusers, transformers and torch are oracles for this fixture only; Vortex never imports them and CI never runs
this script (it checks the committed files). Run it where diffusers 0.42.1 and transformers 5.x are installed:

    python3 tests/engine/make_prompt_fixtures.py [--out tests/engine/fixtures]

What it writes:
  prompt_model/    text_encoder/ (a tiny random Qwen3VLForConditionalGeneration, 2 text layers, hidden 128,
                   vocab 640, save_pretrained in BF16), tokenizer/tokenizer.json (the tiny tokenizer as
                   Qwen2TokenizerFast saves it) and model_index.json (MiniMaxH3ModularPipeline,
                   text_encoder_layer 1: pre-norm, as H3's 50 of 64).
  prompt_states.safetensors
                   per prompt p: ids_p (i32 [L], what the step tokenized) and states_p (bf16 [L, 128], the step's
                   prompt_embeds); metadata prompt_p (the prompt, JSON-quoted) and floor_p = rel-L2 of the BF16
                   states against the same weights run in FP32 (the BF16 noise floor the test's tolerance uses).
"""
import argparse
import json
import os
import shutil
import types

import torch
from safetensors.torch import save_file

from transformers import Qwen2TokenizerFast, Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor
from diffusers.modular_pipelines import PipelineState
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3TextEncoderStep

SEED = 20261201
LAYER = 1
HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "text", "fixtures", "tiny_tokenizer.json")
PROMPTS = [
    "a cat",
    "A red fox runs through deep snow at dawn, the camera tracking low beside it.",
    "東京の夜、雨に濡れた路地を歩く猫 🐈‍⬛ with neon signs",
    "cafe\u0301 au lait,  two   spaces\r\nand a new line\t<|im_start|>user",
    "12345 67 8.9e-3 — numbers, punctuation!? ...",
]


def tiny_config(vocab):
    return Qwen3VLConfig(
        text_config=dict(
            hidden_size=128, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, vocab_size=vocab, rms_norm_eps=1e-6, max_position_embeddings=4096,
            rope_parameters=dict(rope_type="default", rope_theta=5000000.0, mrope_section=[6, 5, 5],
                                 mrope_interleaved=True),
            tie_word_embeddings=True,
        ),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=128,
                           patch_size=8, spatial_merge_size=2, temporal_patch_size=2, deepstack_visual_indexes=[0],
                           num_position_embeddings=64),
        image_token_id=612, video_token_id=613, vision_start_token_id=609, vision_end_token_id=610,
        tie_word_embeddings=True,
    )


def run_step(text_encoder, tokenizer, processor, prompt):
    # The block itself, on a components object carrying what it reads (MiniMaxH3ModularPipeline's properties).
    components = types.SimpleNamespace(text_encoder=text_encoder, tokenizer=tokenizer, processor=processor,
                                       text_encoder_layer=LAYER, text_tag=1, _execution_device=torch.device("cpu"))
    step = MiniMaxH3TextEncoderStep()
    state = PipelineState()
    state.set("prompt", prompt)
    _, state = step(components, state)
    embeds = state.get("prompt_embeds")
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return ids, embeds[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "fixtures"))
    args = ap.parse_args()
    model_dir = os.path.join(args.out, "prompt_model")
    shutil.rmtree(model_dir, ignore_errors=True)
    os.makedirs(model_dir)

    tokenizer = Qwen2TokenizerFast(tokenizer_file=TOKENIZER)
    vocab = (len(tokenizer) + 63) // 64 * 64
    # The step reads only the processor's create_mm_token_type_ids (ProcessorMixin's own code) with the
    # image / video pad ids Qwen3VLProcessor.__init__ sets; its sub-processors are not used for text (and
    # Qwen3VLVideoProcessor needs torchvision), so the object gets exactly those two attributes.
    processor = Qwen3VLProcessor.__new__(Qwen3VLProcessor)
    processor.image_token_id = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    processor.video_token_id = tokenizer.convert_tokens_to_ids("<|video_pad|>")
    torch.manual_seed(SEED)
    model32 = Qwen3VLForConditionalGeneration(tiny_config(vocab)).eval()
    model16 = Qwen3VLForConditionalGeneration(tiny_config(vocab)).eval()
    model16.load_state_dict(model32.state_dict())
    model16 = model16.to(torch.bfloat16)
    model16.save_pretrained(os.path.join(model_dir, "text_encoder"))
    tokenizer.save_pretrained(os.path.join(model_dir, "tokenizer"))
    for extra in os.listdir(os.path.join(model_dir, "tokenizer")):
        if extra != "tokenizer.json":
            os.remove(os.path.join(model_dir, "tokenizer", extra))
    gen = os.path.join(model_dir, "text_encoder", "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    cfg_path = os.path.join(model_dir, "text_encoder", "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg.pop("_name_or_path", None)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    with open(os.path.join(model_dir, "model_index.json"), "w") as f:
        json.dump({"_class_name": "MiniMaxH3ModularPipeline", "text_encoder_layer": LAYER,
                   "text_encoder": ["transformers", "Qwen3VLForConditionalGeneration"],
                   "tokenizer": ["transformers", "Qwen2TokenizerFast"]}, f, indent=2)

    tensors, meta = {}, {"text_encoder_layer": str(LAYER)}
    for p, prompt in enumerate(PROMPTS):
        ids, bf16 = run_step(model16, tokenizer, processor, prompt)
        _, f32 = run_step(model32, tokenizer, processor, prompt)
        assert bf16.shape == (len(ids), 128), bf16.shape
        floor = ((bf16.float() - f32.float()).norm() / f32.float().norm()).item()
        tensors[f"ids_{p}"] = torch.tensor(ids, dtype=torch.int32)
        tensors[f"states_{p}"] = bf16.to(torch.bfloat16).contiguous()
        meta[f"prompt_{p}"] = json.dumps(prompt)
        meta[f"floor_{p}"] = repr(floor)
        print(f"prompt {p}: {len(ids)} tokens, floor {floor:.3e}")
    save_file(tensors, os.path.join(args.out, "prompt_states.safetensors"), metadata=meta)
    for root, _, files in os.walk(args.out):
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


if __name__ == "__main__":
    main()

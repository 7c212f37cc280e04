#!/usr/bin/env python3
"""Parity fixtures for tests/text_encoder/text_encoder_parity_test.cpp: a tiny random Qwen3-VL conditioner.

transformers and torch are oracles for these fixtures only; Vortex never imports them and CI never runs this
script (it checks the committed files). Run it where torch and transformers 5.x are installed:

    python3 tests/text_encoder/make_text_encoder_fixtures.py [--out tests/text_encoder/fixtures]

What it writes (every tensor from transformers' own code, nothing from Vortex):
  model/           a tiny random Qwen3VLForConditionalGeneration (4 text layers, hidden 128, 4 q-heads /
                   2 kv-heads x 32, FFN 192, vocab 512, interleaved M-RoPE sections [6, 5, 5], tiny vision
                   tower), save_pretrained in BF16, sharded (config.json + index + shards) so the loader's
                   index path is what the test reads.
  hidden_states.safetensors
                   per sequence s: ids_s (i32 [L]) and bf16_s_k (every hidden_states[k], k = 0..4, of the BF16
                   model, bf16 [L, 128]); metadata floor_s_k = rel-L2 of that BF16 state against the same
                   weights run in FP32 (the BF16 noise floor the test's tolerance is built on); rope_positions
                   (i32 [3, 48], distinct t/h/w) with rope_cos / rope_sin (bf16 [48, head_dim]) from the
                   model's own Qwen3VLTextRotaryEmbedding.
The hidden states are those of text_encoder(input_ids, attention_mask=ones, output_hidden_states=True), as
diffusers' MiniMax-H3 encode step calls it (no chat template, no special tokens added).
"""
import argparse
import json
import os
import shutil

import torch
from safetensors.torch import save_file

import transformers
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

SEED = 20260514
LENGTHS = (19, 37, 53)
ROPE_ROWS = 48


def tiny_config():
    return Qwen3VLConfig(
        text_config=dict(
            hidden_size=128, intermediate_size=192, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, vocab_size=512, rms_norm_eps=1e-6, max_position_embeddings=4096,
            rope_parameters=dict(rope_type="default", rope_theta=5000000.0, mrope_section=[6, 5, 5],
                                 mrope_interleaved=True),
            tie_word_embeddings=True,
        ),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=128,
                           patch_size=8, spatial_merge_size=2, temporal_patch_size=2, deepstack_visual_indexes=[0],
                           num_position_embeddings=64),
        image_token_id=500, video_token_id=501, vision_start_token_id=502, vision_end_token_id=503,
        tie_word_embeddings=True,  # no lm_head in the files: H3 never uses it
    )


def hidden_states(model, ids):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
    return [h[0].float().contiguous() for h in out.hidden_states]


def rel_l2(got, want):
    return float(torch.linalg.vector_norm((got.double() - want.double())) / torch.linalg.vector_norm(want.double()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures"))
    args = ap.parse_args()
    torch.manual_seed(SEED)
    cfg = tiny_config()
    model = Qwen3VLForConditionalGeneration(cfg).eval()
    # Random weights with realistic magnitudes: norms around 1 (not exactly 1, so a missing weight shows).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
    bf16 = model.to(torch.bfloat16)
    os.makedirs(args.out, exist_ok=True)
    mdir = os.path.join(args.out, "model")
    shutil.rmtree(mdir, ignore_errors=True)
    bf16.save_pretrained(mdir, max_shard_size="400KB")
    # Drop what the loader never reads and CI does not need (generation defaults).
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(mdir, extra)):
            os.remove(os.path.join(mdir, extra))
    # The models that produce the expectations are loaded back from the folder, as diffusers loads the conditioner
    # (from_pretrained with a dtype): `.to(bfloat16)` would also round the non-persistent rotary inv_freq buffer,
    # which from_pretrained keeps in FP32.
    bf16 = Qwen3VLForConditionalGeneration.from_pretrained(mdir, dtype=torch.bfloat16).eval()
    f32 = Qwen3VLForConditionalGeneration.from_pretrained(mdir, dtype=torch.float32).eval()
    assert bf16.model.language_model.rotary_emb.inv_freq.dtype == torch.float32
    gen = torch.Generator().manual_seed(SEED + 1)
    tensors, floor = {}, {}
    for s, n in enumerate(LENGTHS):
        ids = torch.randint(0, 500, (1, n), generator=gen)  # below the vision token ids
        tensors[f"ids_{s}"] = ids[0].to(torch.int32)
        want, ref = hidden_states(bf16, ids), hidden_states(f32, ids)
        for k, (h, h32) in enumerate(zip(want, ref)):
            tensors[f"bf16_{s}_{k}"] = h.to(torch.bfloat16)  # exact: the BF16 model's values
            floor[f"floor_{s}_{k}"] = repr(rel_l2(h, h32))
    # M-RoPE tables of Qwen3VLTextRotaryEmbedding for distinct (t, h, w) positions (as image tokens get), so the
    # interleaved axis assignment is checked, not only the text case where the three axes agree.
    pos = torch.randint(0, 3000, (3, 1, ROPE_ROWS), generator=gen)
    rotary = bf16.model.language_model.rotary_emb
    cos, sin = rotary(torch.zeros(1, dtype=torch.bfloat16), pos)
    tensors["rope_positions"] = pos[:, 0, :].to(torch.int32).contiguous()  # [3, L]
    tensors["rope_cos"] = cos[0].contiguous()  # [L, head_dim] bf16
    tensors["rope_sin"] = sin[0].contiguous()
    meta = {"transformers": transformers.__version__, "torch": torch.__version__, "seed": str(SEED), **floor}
    save_file(tensors, os.path.join(args.out, "hidden_states.safetensors"), metadata=meta)
    print(json.dumps(floor, indent=1))
    print(json.dumps({"out": args.out, "transformers": transformers.__version__, "torch": torch.__version__}))


if __name__ == "__main__":
    main()

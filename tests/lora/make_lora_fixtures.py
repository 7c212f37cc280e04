#!/usr/bin/env python3
"""LoRA fixtures for tests/lora/*: small random LoRAs for the tiny H3 of tests/parity/fixtures, in every key
style, merged by diffusers 0.42.1 + PEFT themselves (load_lora_weights' loader, then fuse_lora).

diffusers, PEFT and torch are oracles for these fixtures only; Vortex never imports them and CI never runs
this script (it checks the committed files). Run it where they are installed:

    python3 -m pip install torch diffusers==0.42.1 peft safetensors numpy
    python3 tests/lora/make_lora_fixtures.py [--out tests/lora/fixtures]

What it writes:
  <style>.safetensors  one LoRA per key style (bf16 factors, ranks 8 and 4):
      native_comfy    release names under ComfyUI's `diffusion_model.` prefix, lora_A/lora_B, no alpha;
      kohya_unet      musubi-tuner's flattened `lora_unet_` names, lora_down/lora_up, `.alpha` tensors;
      peft_split      diffusers/PEFT names (to_q/to_k/to_v, to_out.0, ff.net.0.proj, ff.net.2) under
                      `transformer.`, __metadata__ alpha;
      peft_default    a PEFT dump: diffusers names with `.default.`, no prefix, no alpha (ambiguous alpha).
  expected.json  per file: the strength passed to fuse_lora, the effective scale Vortex must resolve, the
                 canonical layers it must target, and SHA-256 of every fused BF16 weight as PEFT leaves it,
                 in Vortex's layout (QKV rows [q | k | v], fc1 rows [gate | value]).
"""
import argparse
import hashlib
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

import diffusers
import peft
from diffusers import MiniMaxH3Transformer3DModel
from diffusers.loaders import MiniMaxH3LoraLoaderMixin

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "parity", "fixtures", "model_diffusers")
SEED = 20261217
R, R_ADALN, R_K = 8, 4, 4


def sha(t):
    return hashlib.sha256(t.detach().contiguous().view(torch.uint16).numpy().tobytes()).hexdigest()


def native_modules(cfg):
    """(native module, out, in) of every layer Vortex adapts, in h3_spec order."""
    d, inner, f, e = cfg["hidden_size"], cfg["num_attention_heads"] * cfg["attention_head_dim"], cfg["ffn_dim"], cfg["time_embed_dim"]
    out = []
    def block(p, adaln):
        out.extend([(p + ".attn.qkv_proj", 3 * inner, d), (p + ".attn.out_proj", d, inner), (p + ".mlp.fc1", 2 * f, d),
                    (p + ".mlp.fc2", d, f)])
        if adaln:
            out.append((p + ".adaln_proj.linear", 18 * d, e))
    for i in range(cfg["num_refiner_layers"]):
        block(f"token_refiner.blocks.{i}", False)
    for i in range(cfg["num_layers"]):
        block(f"blocks.{i}", True)
    out.append(("final_layer.adaln_proj.linear", 2 * d, e))
    return out


def diffusers_module(native):
    m = native.replace("token_refiner.blocks.", "token_refiner.refiner_blocks.")
    if m.startswith("blocks."):
        m = "transformer_blocks." + m[len("blocks."):]
    m = m.replace("final_layer.adaln_proj.linear", "norm_out.linear")
    return m.replace(".attn.out_proj", ".attn.to_out.0").replace(".mlp.fc1", ".ff.net.0.proj").replace(".mlp.fc2", ".ff.net.2")


def factors(gen, rank, out_f, in_f):
    # B is nonzero (a trained adapter, unlike PEFT's zero init) and sized so B @ A moves W by a few ulps.
    a = (torch.rand(rank, in_f, generator=gen) * 2 - 1) * (1.0 / in_f) ** 0.5
    b = (torch.rand(out_f, rank, generator=gen) * 2 - 1) * 0.05
    return a.to(torch.bfloat16), b.to(torch.bfloat16)


def canonical_weights(model, cfg):
    """Vortex's layout of every adapted weight of a (fused) diffusers model."""
    raw = model.state_dict()
    # PEFT wraps an adapted Linear: its (fused) weight is `<module>.base_layer.weight`.
    sd = {k.replace(".base_layer.", "."): v for k, v in raw.items() if "lora_" not in k}
    out = {}
    for native, _, _ in native_modules(cfg):
        m = diffusers_module(native)
        if native.endswith(".attn.qkv_proj"):
            stem = m[: -len("qkv_proj")]
            out[native] = torch.cat([sd[stem + p + ".weight"] for p in ("to_q", "to_k", "to_v")], 0)
        elif native.endswith(".mlp.fc1"):
            value, gate = sd[m + ".weight"].chunk(2, 0)
            out[native] = torch.cat([gate, value], 0)
        else:
            out[native] = sd[m + ".weight"]
    return out


def make_files(cfg, out_dir):
    gen = torch.Generator().manual_seed(SEED)
    mods = native_modules(cfg)
    files = {}
    # native_comfy: every layer, no alpha.
    sd = {}
    for native, o, i in mods:
        a, b = factors(gen, R_ADALN if "adaln" in native else R, o, i)
        sd[f"diffusion_model.{native}.lora_A.weight"], sd[f"diffusion_model.{native}.lora_B.weight"] = a, b
    files["native_comfy"] = (sd, {}, 1.0, None, 1.0)
    # kohya_unet: the main blocks only, alpha = rank / 2 (a power of two, so diffusers' alpha fold is exact).
    sd = {}
    for native, o, i in mods:
        if not native.startswith("blocks."):
            continue
        r = R_ADALN if "adaln" in native else R
        a, b = factors(gen, r, o, i)
        flat = "lora_unet_" + native.replace(".", "_")
        sd[flat + ".lora_down.weight"], sd[flat + ".lora_up.weight"] = a, b
        sd[flat + ".alpha"] = torch.tensor(r / 2, dtype=torch.bfloat16)
    files["kohya_unet"] = (sd, {}, 0.75, None, 0.5 * 0.75)
    # peft_split: diffusers names, split q/k/v with a different rank on to_k, __metadata__ alpha = 4.
    sd = {}
    for native, o, i in mods:
        if "adaln" in native:
            continue
        m = diffusers_module(native)
        if native.endswith(".attn.qkv_proj"):
            stem = m[: -len("qkv_proj")]
            for p in ("to_q", "to_k", "to_v"):
                a, b = factors(gen, R_K if p == "to_k" else R, o // 3, i)
                sd[f"transformer.{stem}{p}.lora_A.weight"], sd[f"transformer.{stem}{p}.lora_B.weight"] = a, b
        else:
            a, b = factors(gen, R, o, i)
            sd[f"transformer.{m}.lora_A.weight"], sd[f"transformer.{m}.lora_B.weight"] = a, b
    files["peft_split"] = (sd, {"alpha": "4"}, 1.0, None, None)  # 4 / 8 = 0.5, 4 / 4 = 1 on to_k
    # peft_default: a PEFT dump (diffusers names, `.default.`, no prefix, no alpha): Vortex needs an explicit scale.
    sd = {}
    for native, o, i in mods:
        if not native.startswith("blocks.0.") or "adaln" in native:
            continue
        m = diffusers_module(native)
        targets = [m[: -len("qkv_proj")] + p for p in ("to_q", "to_k", "to_v")] if native.endswith("qkv_proj") else [m]
        for t in targets:
            a, b = factors(gen, R, o // len(targets), i)
            sd[f"{t}.lora_A.default.weight"], sd[f"{t}.lora_B.default.weight"] = a, b
    files["peft_default"] = (sd, {}, 1.0, 1.0, 1.0)
    for name, (sd, meta, _, _, _) in files.items():
        save_file(sd, os.path.join(out_dir, name + ".safetensors"), metadata=meta or None)
    return files


def fuse(path, cfg, strength):
    model = MiniMaxH3Transformer3DModel.from_pretrained(MODEL, torch_dtype=torch.bfloat16).eval()
    state_dict, metadata = MiniMaxH3LoraLoaderMixin.lora_state_dict(path, return_lora_metadata=True)
    MiniMaxH3LoraLoaderMixin.load_lora_into_transformer(state_dict, transformer=model, adapter_name="fixture",
                                                        metadata=metadata)
    model.fuse_lora(lora_scale=strength)
    return canonical_weights(model, cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "fixtures"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    torch.set_num_threads(1)
    base = canonical_weights(MiniMaxH3Transformer3DModel.from_pretrained(MODEL, torch_dtype=torch.bfloat16), cfg)
    files = make_files(cfg, args.out)
    expected = {"diffusers": diffusers.__version__, "peft": peft.__version__, "torch": torch.__version__,
                "cpu_capability": torch.backends.cpu.get_cpu_capability(), "model": "tests/parity/fixtures/model_diffusers",
                "files": {}}
    for name, (_, _, strength, explicit, scale) in files.items():
        fused = fuse(os.path.join(args.out, name + ".safetensors"), cfg, strength)
        changed = sorted(k for k in fused if not torch.equal(fused[k], base[k]))
        expected["files"][name] = {
            "strength": strength, "explicit_scale": explicit, "effective_scale": scale,
            "layers": changed, "sha256": {k: sha(v) for k, v in fused.items()},
        }
        print(name, len(changed), "layers fused")
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The official snapshot's original VAE layout for tests/vae/*: the committed diffusers fixture folders
(tests/vae/fixtures/{video_vae,audio_vae}, made by make_vae_fixtures.py) rewritten the way MiniMax-H3 ships
its per-variant VAEs (`FL2VA/video_vae`, `FL2VA/audio_vae` in MiniMax-AI/MiniMax-H3):

  original/video_vae/config.json          MiniMaxH3VideoVAE wrapper: latents_mean/std, clip and tile geometry,
                                          source_path + source_safetensors_path
  original/video_vae/source/config.json   AutoencoderKLLegacy config (vit_decoder_kwargs, space_down, ...)
  original/video_vae/source/model.safetensors
                                          original key names: decoder.x_embedder, attn.to_qkv (per-head
                                          interleaved [h: q k v]), attn.to_out, ff.w1 ([gate; up]), ff.w2,
                                          decoder.mask_token, the CompVis encoder names
  original/audio_vae/{config.json, metadata.json, model.safetensors}
                                          MiniMaxH3AudioVAE wrapper, the constructor kwargs, identical key names

The rewrite inverts diffusers/scripts/convert_minimax_h3_to_diffusers.py. With --conversion-script PATH (that
script, from the diffusers repository) the result is checked by running the script's own convert_video_vae /
convert_audio_vae on it: every converted tensor must equal the diffusers fixture bit for bit, so the committed
original layout is what the official conversion maps onto the diffusers one. Needs torch + safetensors
(+ diffusers for the check); run from the repo root:

    python3 tests/vae/make_original_layout_fixtures.py --conversion-script /path/to/convert_minimax_h3_to_diffusers.py
"""
import argparse
import importlib.util
import json
import os
import shutil
import tempfile

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")


def interleave_qkv(q, k, v, heads, head_dim):
    """[q_all; k_all; v_all] -> the checkpoint's per-head interleave [h0: q k v, h1: q k v, ...]."""
    rest = q.shape[1:]
    parts = [t.reshape(heads, head_dim, *rest) for t in (q, k, v)]
    return torch.cat(parts, dim=1).reshape(3 * heads * head_dim, *rest).contiguous()


def original_video_key(key):
    """diffusers name -> original name (the inverse of the conversion's renames)."""
    if key.startswith("encoder.down_blocks."):
        level, rest = key[len("encoder.down_blocks."):].split(".", 1)
        rest = rest.replace("resnets.", "block.", 1).replace("conv_shortcut.", "nin_shortcut.", 1)
        rest = rest.replace("downsamplers.0.", "downsample.", 1)
        return f"encoder.down.{level}.{rest}"
    key = key.replace("decoder.proj_in.", "decoder.x_embedder.")
    key = key.replace(".attn.to_out.0.", ".attn.to_out.")
    key = key.replace(".ff.net.0.proj.", ".ff.w1.")
    key = key.replace(".ff.net.2.", ".ff.w2.")
    return key


def write_video(out):
    src = os.path.join(FIX, "video_vae")
    cfg = json.load(open(os.path.join(src, "config.json")))
    sd = load_file(os.path.join(src, "diffusion_pytorch_model.safetensors"))
    heads, head_dim = cfg["decoder_num_attention_heads"], cfg["decoder_attention_head_dim"]
    orig = {}
    for key, t in sd.items():
        if ".attn.to_k." in key or ".attn.to_v." in key:
            continue
        if ".attn.to_q." in key:
            pre, suf = key.split(".attn.to_q.")
            k, v = sd[f"{pre}.attn.to_k.{suf}"], sd[f"{pre}.attn.to_v.{suf}"]
            orig[f"{pre}.attn.to_qkv.{suf}"] = interleave_qkv(t, k, v, heads, head_dim)
            continue
        if ".ff.net.0.proj." in key:
            up, gate = t.chunk(2, dim=0)  # diffusers [up; gate] -> original [gate; up]
            orig[original_video_key(key)] = torch.cat([gate, up], dim=0).contiguous()
            continue
        orig[original_video_key(key)] = t.contiguous()
    dim = heads * head_dim
    orig["decoder.mask_token"] = torch.zeros(1, 1, dim)
    vdir = os.path.join(out, "video_vae")
    os.makedirs(os.path.join(vdir, "source"), exist_ok=True)
    save_file(orig, os.path.join(vdir, "source", "model.safetensors"), metadata={"format": "pt"})
    ch_mult = [c // cfg["block_out_channels"][0] for c in cfg["block_out_channels"]]
    source_cfg = {
        "_class_name": "AutoencoderKLLegacy", "causal_decoder": False, "causal_encoder": True,
        "ch": cfg["block_out_channels"][0], "ch_mult": ch_mult, "embed_dim": cfg["latent_channels"],
        "in_channels": cfg["in_channels"], "num_res_blocks": cfg["layers_per_block"], "out_ch": cfg["out_channels"],
        "padding_mode": cfg["spatial_padding_mode"], "pixel_norm_type": "imagenet", "scaling_factor": 1.0,
        "shift_factor": 0.0, "space_down": cfg["spatial_downsample_factors"],
        "time_down": cfg["temporal_downsample_factors"], "use_3d_conv": True, "use_t_isolated_gn": True,
        "use_vit_decoder": True,
        "vit_decoder_kwargs": {
            "dim_head": head_dim, "ffn_activation_fn": "silu", "ffn_use_gated": True, "heads": heads,
            "norm_affine": True, "norm_type": "rms_norm", "num_layers": cfg["decoder_num_layers"],
            "qk_norm_affine": False, "qk_norm_type": "rms_norm", "rope_dim_ratio": cfg["decoder_rope_dim_ratio"],
            "rope_theta": cfg["decoder_rope_theta"],
        },
        "z_channels": cfg["latent_channels"],
    }
    json.dump(source_cfg, open(os.path.join(vdir, "source", "config.json"), "w"), indent=2)
    wrapper = {
        "_class_name": "MiniMaxH3VideoVAE", "mode": "standalone", "source_path": "source",
        "source_class_name": "AutoencoderKLLegacy", "vae_clip_length": cfg["clip_length"],
        "vae_token_drop": cfg["token_drop"], "vae_encoder_tiling": 1, "vae_decoder_tiling": 1,
        "vae_parallel_tiling": 1, "vae_tile_size": 256, "vae_tile_overlap_min": 64,
        "source_safetensors_path": "model.safetensors", "latent_channels": cfg["latent_channels"],
        "latents_mean": cfg["latents_mean"], "latents_std": cfg["latents_std"],
    }
    json.dump(wrapper, open(os.path.join(vdir, "config.json"), "w"), indent=2)
    print(f"video: {len(sd)} diffusers keys -> {len(orig)} original keys in {vdir}")
    return cfg, sd


def write_audio(out):
    src = os.path.join(FIX, "audio_vae")
    cfg = json.load(open(os.path.join(src, "config.json")))
    adir = os.path.join(out, "audio_vae")
    os.makedirs(adir, exist_ok=True)
    shutil.copyfile(os.path.join(src, "diffusion_pytorch_model.safetensors"), os.path.join(adir, "model.safetensors"))
    metadata = {"metadata": {"kwargs": {
        "attn_proj": True, "decoder_dim": cfg["decoder_dim"], "decoder_rates": cfg["decoder_rates"],
        "decoder_type": "bigvgan", "encoder_dim": cfg["encoder_dim"], "encoder_rates": cfg["encoder_rates"],
        "latent_dim": cfg["latent_dim"], "sample_rate": cfg["sampling_rate"],
        "vae_latent_channels": cfg["latent_channels"],
    }}}
    json.dump(metadata, open(os.path.join(adir, "metadata.json"), "w"), indent=2)
    wrapper = {
        "_class_name": "MiniMaxH3AudioVAE", "output_channel": 2, "sample_rate": cfg["sampling_rate"],
        "source_config_path": "config.yaml", "source_safetensors_path": "model.safetensors",
        "source_metadata_path": "metadata.json", "latent_channels": cfg["latent_channels"],
        "latents_mean": cfg["latents_mean"], "latents_std": cfg["latents_std"],
    }
    json.dump(wrapper, open(os.path.join(adir, "config.json"), "w"), indent=2)
    print(f"audio: identity key names, config from metadata.json + config.json in {adir}")
    return cfg


def check_with_conversion(script, out, vcfg, vsd, acfg):
    spec = importlib.util.spec_from_file_location("convert_h3", script)
    conv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conv)
    with tempfile.TemporaryDirectory() as tmp:
        config = {k: v for k, v in vcfg.items() if not k.startswith("_") and k not in ("latents_mean", "latents_std")}
        conv.convert_video_vae(out, os.path.join(tmp, "vae"), config, "check", 1 << 40)
        got = {}
        for name in os.listdir(os.path.join(tmp, "vae")):
            if name.endswith(".safetensors"):
                got.update(load_file(os.path.join(tmp, "vae", name)))
        assert set(got) == set(vsd), sorted(set(got) ^ set(vsd))[:5]
        for k in vsd:
            assert torch.equal(got[k], vsd[k]), k
        vconf = json.load(open(os.path.join(tmp, "vae", "config.json")))
        assert vconf["latents_mean"] == vcfg["latents_mean"] and vconf["latents_std"] == vcfg["latents_std"]
        conv.convert_audio_vae(out, os.path.join(tmp, "audio_vae"), "check")
        agot = load_file(os.path.join(tmp, "audio_vae", "diffusion_pytorch_model.safetensors"))
        aref = load_file(os.path.join(FIX, "audio_vae", "diffusion_pytorch_model.safetensors"))
        assert set(agot) == set(aref) and all(torch.equal(agot[k], aref[k]) for k in aref)
        aconf = conv.get_audio_vae_config(out)
        for k in ("latent_dim", "latent_channels", "decoder_dim", "decoder_rates", "decoder_kernel_sizes",
                  "sampling_rate", "latents_mean", "latents_std"):
            assert list(aconf[k]) == list(acfg[k]) if isinstance(acfg[k], list) else aconf[k] == acfg[k], k
    print(f"checked with {script}: converting original/ reproduces the diffusers fixtures exactly")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(FIX, "original"))
    ap.add_argument("--conversion-script", default=None)
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    vcfg, vsd = write_video(args.out)
    acfg = write_audio(args.out)
    if args.conversion_script:
        check_with_conversion(args.conversion_script, args.out, vcfg, vsd, acfg)


if __name__ == "__main__":
    main()

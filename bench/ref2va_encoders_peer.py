#!/usr/bin/env python3
"""The ref2va reference encoders in diffusers 0.42.1 and transformers 5.x: the peer of bench/ref2va_encoders_bench.cpp.

Two commands:

- `make-inputs DIR [--tiny]`: writes the canonical references as raw decoded media, so neither side needs FFmpeg:
  two image references as the setup step leaves them (a 16:9 image at its own 2048-pixel short edge: 3584x2048), one
  video reference on its 16:9 canvas at 24 fps (5 s: 120 frames of 1344x768) with its soundtrack, and one audio clip
  (5 s each, stereo float32 at 32 kHz), with manifest.json (sizes, files, the processors' pixel ranges). u8 pixels
  and samples come from a seeded generator. `--tiny` writes the same layout at tiny sizes for a CPU check.
- `run DIR --text-encoder-config C --vae-config C --audio-vae-config C --out OUT.json`: times, on one device (cuda by
  default, or --device cpu), with synthetic random weights of the configs' shapes, the steps of
  MiniMaxH3Ref2VATextEncoderStep's vision part and MiniMaxH3Ref2VAReferenceEncoderStep on those references, each on
  the modules that step calls with the inputs it gives them:
  - vision_preprocess: the Qwen3-VL image processor (Qwen2VLImageProcessor) on the two images and the video
    processor (Qwen3VLVideoProcessor, do_sample_frames=False) on the video's frames sampled at 2 fps (the step's
    _sample_video_condition_frames rule: every 12th frame, the last one repeated to a whole temporal pair);
  - vision_tower_images / vision_tower_video: transformers' Qwen3VLVisionModel in BF16 (SDPA) on pixel_values with
    image_grid_thw, and on pixel_values_videos with video_grid_thw (one temporal block per pair);
  - vae_encode_images / vae_encode_video: diffusers' encode_vae_condition on AutoencoderKLMiniMaxH3 (FP32 encoder,
    released tiling) for each image ([1, 3, 1, H, W] u8 on the device) and for the video's first 17n + 5 frames;
  - audio_encode: AutoencoderKLMiniMaxH3Audio.encode(x[:, None]).latent_dist.mode() on the soundtrack and on the
    audio clip (stereo as a batch of two), then the step's normalization by latents_mean / latents_std on the host.
  Each timing is wall clock between device synchronizations after one warm-up run over --reps runs; the rows are
  evidence rows (bench/evidence.py: commit, GPU, driver, clocks, p10/p50/p90/p95) appended to --out, which
  bench/ref2va_encoders_bench.cpp then reads (--peer) as the same-run baselines of its rows.
Run: python3 bench/ref2va_encoders_peer.py make-inputs out/ref2va_refs
     python3 bench/ref2va_encoders_peer.py run out/ref2va_refs --text-encoder-config C --vae-config C
                                                   --audio-vae-config C --out peer.jsonl [--reps N] [--device cpu]
"""
import argparse
import json
import os
import time

import numpy as np
import torch

import evidence

CANONICAL = {"image": (2048, 3584), "video": (120, 768, 1344), "samples": 160000,
             "processor": {"min_pixels": 65536, "max_pixels": 16777216},
             "video_processor": {"min_pixels": 4096, "max_pixels": 25165824}}
TINY = {"image": (64, 96), "video": (26, 32, 64), "samples": 3200,
        "processor": {"min_pixels": 1024, "max_pixels": 16777216},
        "video_processor": {"min_pixels": 256, "max_pixels": 25165824}}


def make_inputs(args):
    spec = TINY if args.tiny else CANONICAL
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    h, w = spec["image"]
    images = []
    for i in range(2):
        name = "image%d.rgb" % i
        rng.integers(0, 256, (h, w, 3), dtype=np.uint8).tofile(os.path.join(args.dir, name))
        images.append({"file": name, "height": h, "width": w})
    f, vh, vw = spec["video"]
    rng.integers(0, 256, (f, vh, vw, 3), dtype=np.uint8).tofile(os.path.join(args.dir, "video.rgb"))
    n = spec["samples"]
    for name in ("soundtrack.f32", "audio.f32"):
        (rng.standard_normal((2, n)) * 0.1).astype(np.float32).tofile(os.path.join(args.dir, name))
    manifest = {"fps": 24, "sample_rate": 32000, "images": images,
                "video": {"file": "video.rgb", "frames": f, "height": vh, "width": vw},
                "soundtrack": {"file": "soundtrack.f32", "channels": 2, "samples": n},
                "audio": {"file": "audio.f32", "channels": 2, "samples": n},
                "processor": spec["processor"], "video_processor": spec["video_processor"],
                "tiny": bool(args.tiny)}
    with open(os.path.join(args.dir, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    print("inputs in %s" % args.dir)


def load_inputs(d):
    with open(os.path.join(d, "manifest.json")) as fh:
        m = json.load(fh)
    images = [np.fromfile(os.path.join(d, i["file"]), dtype=np.uint8).reshape(i["height"], i["width"], 3)
              for i in m["images"]]
    v = m["video"]
    video = np.fromfile(os.path.join(d, v["file"]), dtype=np.uint8).reshape(v["frames"], v["height"], v["width"], 3)
    sound = [np.fromfile(os.path.join(d, m[k]["file"]), dtype=np.float32).reshape(m[k]["channels"], m[k]["samples"])
             for k in ("soundtrack", "audio")]
    return m, images, video, sound


def sample_indices(frames, fps=24.0, sample_fps=2.0, temporal_patch=2):
    # MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames: every fps / sample_fps-th frame, deduplicated,
    # then the last index repeated to a whole temporal patch.
    stride, cursor, idx = fps / sample_fps, 0.0, []
    while round(cursor) < frames:
        if not idx or round(cursor) > idx[-1]:
            idx.append(round(cursor))
        cursor += stride
    idx += [idx[-1]] * (-len(idx) % temporal_patch)
    return idx


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, reps, device, warmup=1):
    for _ in range(warmup):
        fn()
    sync(device)
    ms = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def from_config(cls, path, dev):
    """A diffusers model of `cls` from a config.json, random weights (seed 0), on `dev`, in eval mode."""
    with open(path) as fh:
        cfg = json.load(fh)
    torch.manual_seed(0)
    with torch.device(dev):
        return cls.from_config(cfg).eval()


def free(dev):
    if dev == "cuda":
        torch.cuda.empty_cache()


def run(args):
    import diffusers
    import transformers
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio
    from diffusers.modular_pipelines.minimax_h3.encoders import encode_vae_condition
    from transformers import Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLVideoProcessor
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

    dev = args.device
    m, images, video, sound = load_inputs(args.dir)
    rows = []
    if dev == "cuda":
        major, minor = torch.cuda.get_device_capability()
        env = evidence.environment(torch.cuda.get_device_name(), "%d%d" % (major, minor), torch.version.cuda or "")
    else:
        env = evidence.environment()
    config = "%s inputs (%s)" % ("tiny" if m.get("tiny") else "canonical", args.dir)

    def row(workload, impl, ms, **extra):
        r = evidence.row(env, workload, impl, ms, config=config, ms=ms, device=dev, torch=torch.__version__, **extra)
        rows.append(r)
        print("peer %-24s p50 %10.2f ms" % (workload, r["ms_p50"]), flush=True)

    # ---- vision: the processors, then the tower per modality ----
    vcfg = Qwen3VLConfig.from_json_file(args.text_encoder_config).vision_config
    vcfg._attn_implementation = "sdpa"
    common = dict(patch_size=vcfg.patch_size, temporal_patch_size=vcfg.temporal_patch_size,
                  merge_size=vcfg.spatial_merge_size, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    improc = Qwen2VLImageProcessor(size={"shortest_edge": m["processor"]["min_pixels"],
                                             "longest_edge": m["processor"]["max_pixels"]}, **common)
    vidproc = Qwen3VLVideoProcessor(size={"shortest_edge": m["video_processor"]["min_pixels"],
                                          "longest_edge": m["video_processor"]["max_pixels"]}, **common)
    sampled = video[sample_indices(video.shape[0], temporal_patch=vcfg.temporal_patch_size)]
    feats = {}

    def preprocess():
        feats["img"] = improc(images=images, return_tensors="pt")
        feats["vid"] = vidproc(videos=[sampled], do_sample_frames=False, return_tensors="pt")

    row("vision_preprocess", "transformers %s Qwen2VLImageProcessor + Qwen3VLVideoProcessor (host)"
        % transformers.__version__, timed(preprocess, args.reps, dev),
        image_grid_thw=feats["img"]["image_grid_thw"].tolist(), video_grid_thw=feats["vid"]["video_grid_thw"].tolist())
    torch.manual_seed(0)
    with torch.device(dev):
        tower = Qwen3VLVisionModel._from_config(vcfg, dtype=torch.bfloat16).eval()
    px = feats["img"]["pixel_values"].to(dev, torch.bfloat16)
    grid = feats["img"]["image_grid_thw"].to(dev)
    pxv = feats["vid"]["pixel_values_videos"].to(dev, torch.bfloat16)
    gridv = feats["vid"]["video_grid_thw"].to(dev)
    for name, p, g in (("vision_tower_images", px, grid), ("vision_tower_video", pxv, gridv)):
        def fwd(p=p, g=g):
            with torch.no_grad():
                return tower(p, grid_thw=g)
        out = fwd()
        row(name, "transformers %s Qwen3VLVisionModel bf16 sdpa" % transformers.__version__, timed(fwd, args.reps, dev),
            patches=int(p.shape[0]), merged=list(out.pooler_output.shape))
    del tower
    free(dev)

    # ---- the video VAE encoder on the images and the video (17n + 5 frames) ----
    vae = from_config(AutoencoderKLMiniMaxH3, args.vae_config, dev)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    img_px = [torch.from_numpy(i).to(dev).permute(2, 0, 1)[None, :, None] for i in images]
    n = video.shape[0]
    n = max(1, (n - 5) // 17) * 17 + 5
    vid_px = torch.from_numpy(video[:n].copy()).to(dev).permute(3, 0, 1, 2)[None]
    lat = {}

    def enc_images():
        with torch.no_grad():
            lat["img"] = [encode_vae_condition(vae, p, mean, std, 42) for p in img_px]

    def enc_video():
        with torch.no_grad():
            lat["vid"] = encode_vae_condition(vae, vid_px, mean, std, 42)

    impl = "diffusers %s AutoencoderKLMiniMaxH3 fp32 encode_vae_condition (tf32 cudnn=%s)" % (
        diffusers.__version__, torch.backends.cudnn.allow_tf32)
    row("vae_encode_images", impl, timed(enc_images, args.reps, dev), latents=list(lat["img"][0].shape))
    row("vae_encode_video", impl, timed(enc_video, args.reps, dev), frames=n, latents=list(lat["vid"].shape))
    del vae
    free(dev)

    # ---- the audio VAE encoder on the soundtrack and the clip ----
    avae = from_config(AutoencoderKLMiniMaxH3Audio, args.audio_vae_config, dev)
    amean = torch.tensor(avae.config.latents_mean).view(1, 1, -1)
    astd = torch.tensor(avae.config.latents_std).view(1, 1, -1)
    waves = [torch.from_numpy(s).to(dev) for s in sound]
    alat = {}

    def enc_audio():
        with torch.no_grad():
            out = []
            for wv in waves:
                post = avae.encode(wv[:, None], return_dict=False)[0]
                lat_ = post.mode().float().cpu().transpose(1, 2)
                out.append(((lat_ - amean) / astd).reshape(-1, avae.config.latent_channels))
            alat["rows"] = out

    row("audio_encode", "diffusers %s AutoencoderKLMiniMaxH3Audio fp32 encode().mode()" % diffusers.__version__,
        timed(enc_audio, args.reps, dev), rows=[list(r.shape) for r in alat["rows"]])

    evidence.append_jsonl(args.out, rows)
    print("peer rows appended to %s" % args.out)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-inputs")
    mk.add_argument("dir")
    mk.add_argument("--tiny", action="store_true")
    mk.add_argument("--seed", type=int, default=7)
    rn = sub.add_parser("run")
    rn.add_argument("dir")
    rn.add_argument("--text-encoder-config", required=True)
    rn.add_argument("--vae-config", required=True)
    rn.add_argument("--audio-vae-config", required=True)
    rn.add_argument("--out", required=True)
    rn.add_argument("--reps", type=int, default=10)
    rn.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    if args.cmd == "make-inputs":
        make_inputs(args)
    else:
        run(args)


if __name__ == "__main__":
    main()

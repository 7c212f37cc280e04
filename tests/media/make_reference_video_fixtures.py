#!/usr/bin/env python3
"""ref2va video-reference fixtures for tests/media/reference_media_test.cpp: the frames diffusers 0.42.1 decodes from a
video file (references.py `_decode_video_file`: PyAV, `frame.to_ndarray(format="rgb24")`, the display matrix's
rotation undone in quarter turns) and what `MiniMaxH3Ref2VASetupStep._normalize_video_condition` makes of them (24 fps,
truncated, LANCZOS onto the canvas of the video's own aspect ratio).

diffusers, torch and PyAV are oracles for these fixtures only; Vortex never imports them and CI never runs this script
(it checks the committed files). Run it with the oracle venv:

    python3 tests/media/make_reference_video_fixtures.py [--out tests/media/fixtures/reference]

What it writes (beside make_reference_fixtures.py's files, which it leaves alone):
  media/turned_30fps.mp4   H.264 (libx264, yuv420p) 48x32 at 30 fps, 66 frames, display matrix rotated by 90 degrees
  media/wide_25fps.mkv     MPEG-4 part 2 (yuv420p) 64x32 at 25 fps, 55 frames
  video.json               per case: the file, fps and rotation diffusers read, the canvas rule, num_frames, the shapes,
                           the SHA-256 of every frame _decode_video_file returns ([H, W, 3] uint8) and of every frame
                           _normalize_video_condition returns; versions.
The frames carry moving gradients and noise, so a decoded frame that is off by one level, a frame dropped or repeated at
the wrong slot, or a wrong turn changes them.
"""
import argparse
import hashlib
import json
import os

import av
import numpy as np
import torch

import diffusers
from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3Ref2VASetupStep
from diffusers.modular_pipelines.minimax_h3.references import _decode_video_file

SEED = 20261202


def write_video(path, codec, rate, width, height, frames, rotation, rng):
    with av.open(path, "w") as c:
        v = c.add_stream(codec, rate=rate)
        v.width, v.height, v.pix_fmt = width, height, "yuv420p"
        if rotation:
            v.set_display_rotation(rotation)
        for i in range(frames):
            img = np.zeros((height, width, 3), np.uint8)
            img[..., 0] = (np.arange(width) * 5 + 9 * i) % 256
            img[..., 1] = ((np.arange(height) * 7)[:, None] + 3 * i) % 256
            img[..., 2] = rng.integers(0, 256, (height, width), dtype=np.uint8)
            for p in v.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in v.encode():
            c.mux(p)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures", "reference"))
    args = parser.parse_args()
    media = os.path.join(args.out, "media")
    os.makedirs(media, exist_ok=True)
    rng = np.random.default_rng(SEED)
    write_video(os.path.join(media, "turned_30fps.mp4"), "libx264", 30, 48, 32, 66, 90, rng)
    write_video(os.path.join(media, "wide_25fps.mkv"), "mpeg4", 25, 64, 32, 55, 0, rng)

    # (case, file, num_frames, canvas multiple, short edge, max pixels)
    cases = [
        ("turned", "turned_30fps.mp4", 41, 16, 48, 48 * 80),
        ("wide", "wide_25fps.mkv", 124, 16, 48, 48 * 96),
        ("clip_sound", "clip_sound.mkv", 50, 16, 32, 32 * 48),
    ]
    meta = {"diffusers": diffusers.__version__, "torch": torch.__version__, "av": av.__version__,
                         "libraries": {k: ".".join(map(str, v)) for k, v in av.library_versions.items()},
                         "cases": []}
    for name, file, num_frames, multiple, short_edge, max_pixels in cases:
        path = os.path.join(media, file)
        frames, fps, _, _ = _decode_video_file(path)
        with av.open(path) as c:
            rotation = next(c.decode(video=0)).rotation
        normalized = MiniMaxH3Ref2VASetupStep._normalize_video_condition(
            frames, float(fps), num_frames, multiple, short_edge, max_pixels, 24.0)
        meta["cases"].append({
            "name": name, "file": file, "fps": float(fps), "rotation": rotation, "num_frames": num_frames,
            "canvas_multiple": multiple, "canvas_short_edge": short_edge, "canvas_max_pixels": max_pixels,
            "decoded_shape": list(frames.shape), "normalized_shape": list(normalized.shape),
            "decoded_sha256": [hashlib.sha256(np.ascontiguousarray(f).tobytes()).hexdigest() for f in frames],
            "normalized_sha256": [hashlib.sha256(f.tobytes()).hexdigest() for f in normalized],
        })
    with open(os.path.join(args.out, "video.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()

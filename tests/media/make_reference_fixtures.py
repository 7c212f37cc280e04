#!/usr/bin/env python3
"""ref2va reference-media fixtures for tests/media/reference_media_test.cpp, from diffusers 0.42.1's
MiniMaxH3Ref2VASetupStep and torchaudio's Resample (the resampler that step calls).

diffusers, torch and torchaudio are oracles for these fixtures only; Vortex never imports them and CI never runs this
script (it checks the committed files). torchaudio is not in the shared oracle venv; install it beside it:

    pip install --no-deps --target .pydeps torchaudio
    PYTHONPATH=.pydeps python3 tests/media/make_reference_fixtures.py [--out tests/media/fixtures/reference]

What it writes (every value from diffusers' or torchaudio's code):
  audio.safetensors, per case <c>:
    <c>.in      [C, N] float32 waveform at the case's rate (C = 1 or 2)
    <c>.out     [2, M] MiniMaxH3Ref2VASetupStep._normalize_audio_condition(in, rate, 32000, num_frames / 24)
    <c>.kernel  torchaudio.transforms.Resample(rate, 32000).kernel, [new, 1, taps] float32 (the small ones; meta.json
                holds every resampling case's kernel SHA-256)
  meta.json
    audio: the cases' rates, frame counts and shapes;
    frames: per case (decoded frame count, fps, num_frames) the decoded frame index of every frame
      _normalize_video_condition keeps (frames tagged with their index, on a tiny canvas rule so nothing resizes
      the tags away);
    image_sizes: the setup step's normalized size of image references of several sizes (its own __call__);
    decoded_audio: per media file, the soundtrack MiniMaxH3AudioReference.from_file (MiniMaxH3VideoReference.from_file
      for the video) decodes: its rate, shape and SHA-256 of the float32 samples;
    versions.
  media/: small files for the probes, written with PyAV: a 2.5 s 10 fps 64x48 video (MPEG-4 part 2) with a stereo soundtrack, a
    3 s silent video, a 3 s mono WAV, a 1 s WAV (too short), and a 5-channel WAV (too many channels), all 8-bit PCM at 8 kHz.
"""
import argparse
import hashlib
import json
import os
import shutil
import types

import av
import numpy as np
import torch
import torchaudio
from PIL import Image
from safetensors.torch import save_file

import diffusers
from diffusers.image_processor import VaeImageProcessor
from diffusers.modular_pipelines.minimax_h3 import (
    MiniMaxH3AudioReference,
    MiniMaxH3ImageReference,
    MiniMaxH3VideoReference,
)
from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3Ref2VASetupStep
from diffusers.modular_pipelines.modular_pipeline import PipelineState

SEED = 20261204


def audio_cases(gen, tensors, meta):
    # (name, rate, channels, samples, num_frames)
    cases = [
        ("r44100_stereo", 44100, 2, 6001, 124),
        ("r48000_mono", 48000, 1, 5001, 124),
        ("r16000_stereo", 16000, 2, 2777, 124),
        ("r22050_truncated", 22050, 2, 6000, 5),  # 5 frames at 24 fps: truncated to int(5 / 24 * 22050)
        ("r32000_same", 32000, 2, 3000, 124),
        ("r32000_mono_truncated", 32000, 1, 9000, 5),
    ]
    meta["audio"] = []
    for name, rate, channels, n, num_frames in cases:
        wave = (0.4 * torch.randn(channels, n, generator=gen)).clamp(-1, 1).float()
        out = MiniMaxH3Ref2VASetupStep._normalize_audio_condition(wave, rate, 32000, max_duration=num_frames / 24)
        tensors[name + ".in"] = wave.contiguous()
        tensors[name + ".out"] = out.float().clone().contiguous()
        entry = {"name": name, "rate": rate, "channels": channels, "samples": n, "num_frames": num_frames,
                 "out_samples": int(out.shape[1])}
        if rate != 32000:
            kernel = torchaudio.transforms.Resample(rate, 32000).kernel.float().contiguous()
            entry["kernel_shape"] = list(kernel.shape)
            entry["kernel_sha256"] = hashlib.sha256(kernel.numpy().tobytes()).hexdigest()
            if kernel.numel() <= 16384:
                tensors[name + ".kernel"] = kernel
        meta["audio"].append(entry)


def frame_cases(meta):
    # (decoded frames, fps, num_frames)
    cases = [(150, 30.0, 124), (125, 25.0, 124), (120, 24000 / 1001, 124), (300, 60.0, 124), (60, 12.0, 124),
             (100, 24.0, 22), (149, 30000 / 1001, 107), (31, 10.0, 56), (48, 24.0, 124), (97, 15.5, 360)]
    meta["frames"] = []
    for n, fps, num_frames in cases:
        idx = np.arange(n)
        frames = np.zeros((n, 2, 4, 3), np.uint8)  # constant frames: LANCZOS keeps a constant
        frames[..., 0] = (idx % 256)[:, None, None]
        frames[..., 1] = (idx // 256)[:, None, None]
        out = MiniMaxH3Ref2VASetupStep._normalize_video_condition(frames, fps, num_frames, 16, 32, 32 * 64, 24.0)
        kept = (out[:, 0, 0, 0].astype(np.int64) + 256 * out[:, 0, 0, 1].astype(np.int64)).tolist()
        meta["frames"].append({"decoded": n, "fps": fps, "num_frames": num_frames, "indices": kept,
                               "canvas": list(out.shape[1:3])})


def image_sizes(meta):
    step = MiniMaxH3Ref2VASetupStep()
    components = types.SimpleNamespace(
        canvas_multiple=32, vae_frames_per_chunk=17, vae_latents_per_chunk=5, fps=24, min_duration=4.0,
        max_duration=15.0, audio_sampling_rate=32000, image_processor=VaeImageProcessor(vae_scale_factor=16),
        config=types.SimpleNamespace(canvas_short_edge=768, canvas_max_pixels=768 * 1344,
                                     reference_image_short_edge=2048))
    meta["image_sizes"] = []
    for width, height in ((1920, 1080), (1080, 1920), (512, 512), (100, 37), (37, 148), (2048, 2048), (3000, 2049),
                          (641, 480), (480, 1900)):
        state = PipelineState()
        state.set("references", [MiniMaxH3ImageReference(image=Image.new("RGB", (width, height), (10, 20, 30)))])
        state.set("num_frames", 124)
        _, state = step(components, state)
        image = state.get("normalized_references")[0].image
        meta["image_sizes"].append({"width": width, "height": height, "out_width": image.size[0],
                                    "out_height": image.size[1]})


def write_media(out):
    os.makedirs(out)
    rng = np.random.default_rng(SEED)

    def video(path, seconds, with_audio):
        with av.open(path, "w") as c:
            v = c.add_stream("mpeg4", rate=10)
            v.width, v.height, v.pix_fmt = 64, 48, "yuv420p"
            a = c.add_stream("pcm_u8", rate=8000, layout="stereo") if with_audio else None
            for i in range(int(seconds * 10)):
                img = np.zeros((48, 64, 3), np.uint8)
                img[..., 0] = (np.arange(64) * 4 + 10 * i) % 256
                img[..., 1] = (np.arange(48) * 5)[:, None]
                for p in v.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                    c.mux(p)
            for p in v.encode():
                c.mux(p)
            if a is not None:
                samples = (128 + rng.standard_normal((1, int(seconds * 8000) * 2)) * 20).astype(np.uint8)
                frame = av.AudioFrame.from_ndarray(samples, format="u8", layout="stereo")
                frame.sample_rate = 8000
                for p in a.encode(frame):
                    c.mux(p)
                for p in a.encode():
                    c.mux(p)

    def wav(path, seconds, layout, channels):
        with av.open(path, "w", format="wav") as c:
            a = c.add_stream("pcm_u8", rate=8000, layout=layout)
            samples = (128 + rng.standard_normal((1, int(seconds * 8000) * channels)) * 20).astype(np.uint8)
            frame = av.AudioFrame.from_ndarray(samples, format="u8", layout=layout)
            frame.sample_rate = 8000
            for p in a.encode(frame):
                c.mux(p)
            for p in a.encode():
                c.mux(p)

    video(os.path.join(out, "clip_sound.mkv"), 2.5, True)
    video(os.path.join(out, "clip_silent.mkv"), 3.0, False)
    wav(os.path.join(out, "voice_mono.wav"), 3.0, "mono", 1)
    wav(os.path.join(out, "voice_short.wav"), 1.0, "mono", 1)
    wav(os.path.join(out, "voice_5ch.wav"), 0.5, "5.0", 5)


def decoded_audio(media, meta):
    # The soundtracks as references.py decodes them (PyAV, planar float at the stream's own rate).
    meta["decoded_audio"] = []
    for name in ("voice_mono.wav", "voice_short.wav", "voice_5ch.wav", "clip_sound.mkv"):
        path = os.path.join(media, name)
        if name.endswith(".mkv"):
            ref = MiniMaxH3VideoReference.from_file(path)
        else:
            ref = MiniMaxH3AudioReference.from_file(path)
        wave = ref.audio.contiguous().float()
        meta["decoded_audio"].append({"file": name, "sample_rate": ref.sample_rate, "shape": list(wave.shape),
                                      "sha256": hashlib.sha256(wave.numpy().tobytes()).hexdigest()})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures", "reference"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    gen = torch.Generator().manual_seed(SEED)
    tensors, meta = {}, {"diffusers": diffusers.__version__, "torch": torch.__version__,
                         "torchaudio": torchaudio.__version__, "av": av.__version__}
    audio_cases(gen, tensors, meta)
    frame_cases(meta)
    image_sizes(meta)
    write_media(os.path.join(args.out, "media"))
    decoded_audio(os.path.join(args.out, "media"), meta)
    save_file(tensors, os.path.join(args.out, "audio.safetensors"))
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What an x264 preset costs at CRF 18 on 1344x768 frames (the canonical decode's size), one encoder thread: CPU
milliseconds per frame, bitrate and PSNR (RGB, decoded back) per preset and rc-lookahead, on two contents: uniform
noise (what the synthetic-weight decoders produce: the encoder's worst case) and a smooth moving scene with mild
grain (a stand-in for real video). PyAV's libx264 (test-time oracle venv); prints a markdown table.
  python3 bench/x264_preset_cost.py [--frames N] [--presets medium,faster,veryfast] [--lookaheads preset,10]
"""
import argparse
import io
import time

import av
import numpy as np

W, H = 1344, 768


def noise(n, rng):
    return [rng.integers(0, 256, (H, W, 3), dtype=np.uint8) for _ in range(n)]


def smooth(n, rng):
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    grain = rng.normal(0, 3, (H, W, 3)).astype(np.float32)
    out = []
    for t in range(n):
        img = np.stack([128 + 90 * np.sin((xx + 4 * t) / 97.0) * np.cos(yy / 71.0),
                        128 + 90 * np.sin((yy - 3 * t) / 53.0 + xx / 211.0),
                        128 + 60 * np.cos((xx + yy + 6 * t) / 37.0)], -1)
        disc = ((xx - 200 - 8 * t) ** 2 + (yy - 300 - 2 * t) ** 2) < 120 ** 2  # a moving red disc
        img[disc] = [230, 40, 40]
        img += np.roll(grain, t, axis=1)
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return out


def encode(frames, preset, lookahead):
    buf = io.BytesIO()
    c = av.open(buf, "w", format="mp4")
    s = c.add_stream("libx264", rate=24)
    s.width, s.height, s.pix_fmt = W, H, "yuv420p"
    opts = {"crf": "18", "preset": preset, "threads": "1"}
    if lookahead != "preset":
        opts["rc-lookahead"] = lookahead
    s.codec_context.options = opts
    yuv = [av.VideoFrame.from_ndarray(f, format="rgb24").reformat(format="yuv420p") for f in frames]
    t0 = time.process_time()
    for f in yuv:
        for p in s.encode(f):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    cpu = time.process_time() - t0
    c.close()
    return cpu, buf.getvalue()


def psnr(frames, data):
    vals = []
    with av.open(io.BytesIO(data)) as c:
        for i, f in enumerate(c.decode(video=0)):
            d = ((f.to_ndarray(format="rgb24").astype(np.float64) - frames[i]) ** 2).mean()
            vals.append(10 * np.log10(255.0 ** 2 / max(d, 1e-12)))
    return float(np.mean(vals))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--presets", default="medium,faster,veryfast")
    ap.add_argument("--lookaheads", default="preset,10")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    print(f"libx264 CRF 18, {W}x{H}, {a.frames} frames, 1 thread, av {av.__version__}")
    print("| content | preset | rc-lookahead | CPU ms / frame | Mbit/s at 24 fps | PSNR dB |\n|---|---|---|---|---|---|")
    for name, make in (("noise", noise), ("smooth", smooth)):
        frames = make(a.frames, rng)
        for preset in a.presets.split(","):
            for la in a.lookaheads.split(","):
                cpu, data = encode(frames, preset, la)
                print(f"| {name} | {preset} | {la} | {cpu / a.frames * 1e3:.0f} | "
                      f"{len(data) * 8 * 24 / a.frames / 1e6:.2f} | {psnr(frames, data):.2f} |", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The reference media of the canonical ref2va request (bench/ref2va_e2e.sh), small and synthetic: two images (a
16:9 PNG and a 3:4 JPEG), a 5 s 16:9 video at 24 fps with a stereo soundtrack (MPEG-4 part 2 and AAC in Matroska),
and a 4 s mono voice-like WAV at 16 kHz. Small sources on purpose: the setup step resizes every reference (images to a
2048-pixel short edge, the video onto its 1344x768 canvas), so the encoders see full-size inputs. Written with PyAV
(its bundled FFmpeg) and Pillow; committed under bench/media/ref2va/ so the device run needs neither.
Run: python3 bench/make_ref2va_media.py --out bench/media/ref2va
"""
import argparse
import math
import os
import wave

import av
import numpy as np
from PIL import Image


def pattern(w, h, t, hue):
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 127 + 100 * np.sin(x / w * 6.28 * 2 + t * 1.3 + hue)
    g = 127 + 100 * np.sin(y / h * 6.28 * 1.5 - t * 0.7 + hue * 2)
    b = 127 + 100 * np.cos((x + y) / (w + h) * 6.28 * 3 + t)
    return np.clip(np.stack([r, g, b], -1), 0, 255).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    Image.fromarray(pattern(320, 180, 0.0, 0.3)).save(os.path.join(args.out, "image_wide.png"))
    Image.fromarray(pattern(240, 320, 1.0, 1.7)).save(os.path.join(args.out, "image_tall.jpg"), quality=85)

    # 5 s, 24 fps, 256x144, with a 44.1 kHz stereo soundtrack (two tones).
    fps, seconds, rate = 24, 5, 44100
    with av.open(os.path.join(args.out, "clip_sound.mkv"), "w") as c:
        v = c.add_stream("mpeg4", rate=fps)
        v.width, v.height, v.pix_fmt = 256, 144, "yuv420p"
        v.options = {"qscale": "8"}
        a = c.add_stream("aac", rate=rate, layout="stereo")
        a.bit_rate = 64000
        for i in range(fps * seconds):
            for p in v.encode(av.VideoFrame.from_ndarray(pattern(256, 144, i / fps, 0.9), format="rgb24")):
                c.mux(p)
        for p in v.encode():
            c.mux(p)
        n = rate * seconds
        t = np.arange(n) / rate
        pcm = np.stack([0.3 * np.sin(2 * math.pi * 220 * t), 0.3 * np.sin(2 * math.pi * 330 * t)])
        pcm = (pcm * 32767).astype(np.int16)
        for s0 in range(0, n, 1024):
            chunk = np.ascontiguousarray(pcm[:, s0:s0 + 1024].astype(np.float32) / 32768.0)
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
            frame.sample_rate = rate
            for p in a.encode(frame):
                c.mux(p)
        for p in a.encode():
            c.mux(p)

    # 4 s mono at 16 kHz: a gliding tone with a syllable-like envelope.
    rate, n = 16000, 16000 * 4
    t = np.arange(n) / rate
    env = 0.5 * (1 - np.cos(2 * math.pi * 3 * t)) * 0.4
    x = (env * np.sin(2 * math.pi * (180 + 40 * np.sin(2 * math.pi * 0.5 * t)) * t) * 32767).astype(np.int16)
    with wave.open(os.path.join(args.out, "voice.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(x.tobytes())
    for f in sorted(os.listdir(args.out)):
        print(f, os.path.getsize(os.path.join(args.out, f)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Keyframe fixtures for tests/media/image_test.cpp: image files, what diffusers 0.42.1 makes of them, and the
canvases its MiniMaxH3ResizeStep puts them on.

diffusers, torch and Pillow are oracles for these fixtures only; Vortex never imports them and CI never runs this
script (it checks the committed files). Run it where they are installed:

    python3 -m pip install torch diffusers==0.42.1 pillow numpy
    python3 tests/media/make_image_fixtures.py [--out tests/media/fixtures/images]

What it writes (every expected value from Pillow or diffusers, nothing from Vortex):
  *.png, *.jpg, *.webp  inputs: PNG in every 8-bit colour type, EXIF orientations 1-8 (PNG eXIf), JPEG 4:2:0,
                        4:4:4 and grey, WebP lossless/lossy/alpha; and inputs Vortex refuses (16-bit, CMYK,
                        animated, corrupt, empty, a header that claims 100000 x 100000 pixels).
  *.rgb                 diffusers.utils.load_image's RGB bytes ([H, W, 3] uint8) of the lossy inputs, so the
                        test can state how far FFmpeg's decode is from libjpeg/libwebp's.
  manifest.json         per input: load_image's size and SHA-256 of its RGB bytes (or the refusal expected);
                        per canvas case: MiniMaxH3ResizeStep's output size and SHA-256 for a first keyframe
                        (stretched), a last keyframe (cover-cropped), both, with and without a given canvas;
                        resolve_canvas_size for many aspect ratios.
"""
import argparse
import hashlib
import io
import json
import os
import struct
import types
import zlib

import numpy as np
from PIL import Image

from diffusers.image_processor import VaeImageProcessor
from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3ResizeStep
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import resolve_canvas_size
from diffusers.modular_pipelines.modular_pipeline import PipelineState
from diffusers.utils import load_image

SEED = 20261202


def sha(b):
    return hashlib.sha256(b).hexdigest()


def smooth(h, w, rng, sigma=6.0):
    """Photo-like content: gradients, a few discs and mild noise (JPEG and WebP see real structure)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([x / w * 200 + 20, y / h * 180 + 30, (x + y) / (w + h) * 150 + 60], -1)
    for _ in range(4):
        cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(0.1, 0.4) * min(h, w)
        img[(y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.uniform(0, 255, 3)
    img += rng.normal(0, sigma, img.shape)
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def noise(h, w, c, rng):
    return rng.integers(0, 256, (h, w, c), dtype=np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def raw_png(width, height, bit_depth, color_type, rows):
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(rows)) +
            png_chunk(b"IEND", b""))


def exif_orientation(value):
    """A minimal little-endian TIFF block with one IFD0 entry: Orientation (0x0112, SHORT)."""
    ifd = struct.pack("<H", 1) + struct.pack("<HHIHH", 0x0112, 3, 1, value, 0) + struct.pack("<I", 0)
    return b"II*\x00" + struct.pack("<I", 8) + ifd


def write_inputs(out, rng):
    files = {}

    def save(name, image, **kw):
        image.save(os.path.join(out, name), **kw)
        files[name] = {}

    save("rgb.png", Image.fromarray(noise(61, 97, 3, rng)))
    save("rgba.png", Image.fromarray(noise(41, 53, 4, rng), "RGBA"))
    save("gray.png", Image.fromarray(noise(29, 37, 1, rng)[:, :, 0], "L"))
    save("gray_alpha.png", Image.fromarray(noise(29, 37, 2, rng), "LA"))
    save("bilevel.png", Image.fromarray(noise(23, 45, 1, rng)[:, :, 0] > 127).convert("1"))
    pal = Image.fromarray(noise(33, 47, 3, rng)).quantize(colors=200)
    pal.info["transparency"] = 3
    save("palette.png", pal, transparency=3)
    save("palette4.png", Image.fromarray(noise(33, 47, 3, rng)).quantize(colors=16), bits=4)
    base = Image.fromarray(noise(19, 31, 3, rng))
    for o in range(1, 9):
        save("exif%d.png" % o, base, exif=b"Exif\x00\x00" + exif_orientation(o))
    photo = Image.fromarray(smooth(61, 97, rng))
    save("photo420.jpg", photo, quality=90, subsampling=2)
    save("photo444.jpg", photo, quality=95, subsampling=0)
    save("gray.jpg", photo.convert("L"), quality=90)
    save("exif6.jpg", photo, quality=90, exif=b"Exif\x00\x00" + exif_orientation(6))
    save("lossless.webp", photo, lossless=True)
    save("lossless_alpha.webp", Image.fromarray(noise(41, 53, 4, rng), "RGBA"), lossless=True)
    save("lossy.webp", photo, quality=90)
    # Canvas sources: a wide photo downscaled onto 1344x768 and a small tall one upscaled.
    save("wide.png", Image.fromarray(smooth(405, 720, rng, sigma=0.0)))
    save("tall.png", Image.fromarray(noise(130, 70, 3, rng)))

    # Refused inputs.
    refused = {}
    rows = b"".join(b"\x00" + noise(1, 11, 2, rng).tobytes() for _ in range(9))
    open(os.path.join(out, "gray16.png"), "wb").write(raw_png(11, 9, 16, 0, rows))
    refused["gray16.png"] = "16 bits"
    rows = b"".join(b"\x00" + noise(1, 5, 6, rng).tobytes() for _ in range(4))
    open(os.path.join(out, "rgb16.png"), "wb").write(raw_png(5, 4, 16, 2, rows))
    refused["rgb16.png"] = "16 bits"
    Image.fromarray(noise(16, 16, 4, rng), "CMYK").save(os.path.join(out, "cmyk.jpg"))
    refused["cmyk.jpg"] = "CMYK"
    frames = [Image.fromarray(noise(12, 12, 3, rng)) for _ in range(3)]
    frames[0].save(os.path.join(out, "animated.png"), save_all=True, append_images=frames[1:])
    refused["animated.png"] = "animated"
    frames[0].save(os.path.join(out, "animated.webp"), save_all=True, append_images=frames[1:], lossless=True)
    refused["animated.webp"] = "animated"
    whole = open(os.path.join(out, "rgb.png"), "rb").read()
    open(os.path.join(out, "truncated.png"), "wb").write(whole[: len(whole) // 2])
    refused["truncated.png"] = "decode"
    open(os.path.join(out, "empty.png"), "wb").close()
    refused["empty.png"] = "empty"
    open(os.path.join(out, "text.png"), "wb").write(b"this is not an image\n")
    refused["text.png"] = "not a PNG, JPEG or WebP"
    rows = b"\x00" + bytes(3)
    open(os.path.join(out, "bomb.png"), "wb").write(raw_png(100000, 100000, 8, 2, rows))
    refused["bomb.png"] = "pixels"
    return files, refused


def run_resize_step(first, last, height=None, width=None):
    """diffusers' own MiniMaxH3ResizeStep on the images, with the released checkpoint's canvas config."""
    step = MiniMaxH3ResizeStep()
    components = types.SimpleNamespace(
        image_processor=VaeImageProcessor(vae_scale_factor=16),
        canvas_multiple=32,
        config=types.SimpleNamespace(canvas_short_edge=768, canvas_max_pixels=768 * 1344),
    )
    state = PipelineState()
    for key, value in (("image", first), ("last_image", last), ("height", height), ("width", width)):
        if value is not None:
            state.set(key, value)
    _, state = step(components, state)
    return state.get("height"), state.get("width"), state.get("keyframes"), state.get("keyframe_anchors")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "fixtures", "images"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(SEED)
    files, refused = write_inputs(args.out, rng)

    manifest = {"generator": "tests/media/make_image_fixtures.py", "pillow": Image.__version__,
                "diffusers": __import__("diffusers").__version__, "images": {}, "refused": refused,
                "canvases": [], "canvas_sizes": []}
    loaded = {}
    for name in sorted(files):
        image = load_image(os.path.join(args.out, name))
        raw = np.asarray(image).tobytes()
        entry = {"width": image.size[0], "height": image.size[1], "sha256": sha(raw),
                 "mode": Image.open(os.path.join(args.out, name)).mode}
        if name.endswith(".jpg") or name == "lossy.webp":
            open(os.path.join(args.out, name + ".rgb"), "wb").write(raw)
            entry["rgb"] = name + ".rgb"
        manifest["images"][name] = entry
        loaded[name] = image

    cases = [
        ("rgb.png", None, None, None),           # first only, canvas from its own aspect ratio (upscale)
        ("rgb.png", None, 64, 96),               # first only, given canvas (downscale both axes)
        ("rgb.png", None, 61, 64),               # width only (horizontal pass alone)
        ("rgb.png", None, 96, 97),               # height only (vertical pass alone)
        ("rgb.png", None, 61, 97),               # the canvas itself: passed through
        ("wide.png", None, None, None),          # 720x405 -> 1344x768
        ("tall.png", None, None, None),          # 70x130 -> tall canvas
        ("wide.png", "tall.png", None, None),    # both: the follower cover-cropped onto the first's canvas
        ("tall.png", "rgb.png", None, None),
        (None, "rgb.png", None, None),           # last only: it anchors the canvas, stretched
        ("rgb.png", "wide.png", 128, 96),        # both on a given canvas
        ("exif6.png", "exif8.png", None, None),  # oriented sources
    ]
    for first, last, height, width in cases:
        h, w, keyframes, anchors = run_resize_step(loaded.get(first), loaded.get(last), height, width)
        manifest["canvases"].append({
            "first": first, "last": last, "height": height, "width": width, "canvas": [h, w],
            "anchors": list(anchors),
            "keyframes": [{"size": [k.size[1], k.size[0]], "sha256": sha(np.asarray(k.convert("RGB")).tobytes())}
                          for k in keyframes],
        })

    aspect = [(16, 9), (9, 16), (4, 3), (3, 4), (1, 1), (21, 9), (4, 1), (1, 4), (97, 61), (720, 405), (70, 130),
              (1920, 1080), (1080, 1920), (1000, 999), (3000, 751), (751, 3000), (1023, 768), (640, 481)]
    for aw, ah in aspect:
        h, w = resolve_canvas_size(aw, ah, 32, 768, 768 * 1344)
        manifest["canvas_sizes"].append({"aspect": [aw, ah], "canvas": [h, w]})
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()

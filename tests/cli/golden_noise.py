#!/usr/bin/env python3
"""Golden test of the noise contract (src/core/rng.h, src/engine/generate.h), computed independently.

Re-implements Philox4x32-10 (checked here against Random123 known-answer vectors) and the FP64
Box-Muller contract in numpy + Python's math module, derives the demo request's latent sizes from the
packing formulas by hand, and requires the SHA-256 of the C++ noise (dumped by tests/cli/noise_dump,
which calls the same functions `vortex generate` uses) to equal the SHA-256 computed here:
  * seed 42, h3-tiny 448x256, 22 frames, 16 synthetic text rows (the demo request);
  * a fresh random 64-bit seed per run (printed), 64x64, 5 frames, 3 text rows.
Usage: golden_noise.py PATH/TO/noise_dump   (exit 0 = match, 1 = mismatch; prints both hashes)
"""
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(c0, c1, c2, c3, key0, key1):
    """Vectorised Philox4x32-10 over uint64 arrays holding 32-bit words (Salmon et al., SC'11)."""
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    w0, w1 = 0x9E3779B9, 0xBB67AE85
    k0, k1 = key0 & 0xFFFFFFFF, key1 & 0xFFFFFFFF
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in (c0, c1, c2, c3))
    for _ in range(10):
        p0 = m0 * c0  # < 2^64: exact in uint64
        p1 = m1 * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
        k0 = (k0 + w0) & 0xFFFFFFFF
        k1 = (k1 + w1) & 0xFFFFFFFF
    return c0, c1, c2, c3


def check_known_answers():
    """Random123 kat_vectors for philox4x32_10."""
    cases = [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
         (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ]
    for ctr, key, want in cases:
        got = philox4x32_10(*[np.array([c], dtype=np.uint64) for c in ctr], *key)
        got = tuple(int(g[0]) for g in got)
        if got != want:
            print(f"golden_noise: our Philox fails a Random123 known answer: {got} != {want}")
            sys.exit(1)


def gaussian_noise(seed, offset, n):
    """Element j = offset + i: Philox block j // 4 (counter {lo, hi, 0, 0}, key {lo(seed), hi(seed)}),
    lanes {0,1} from words (r0, r1), lanes {2,3} from (r2, r3); u1 = (w1 + 1) 2^-32, u2 = w2 2^-32;
    r = sqrt(-2 ln u1), a = 2 pi u2; even lane r cos a, odd lane r sin a; FP64, rounded once to FP32."""
    first_block, last_block = offset // 4, (offset + n + 3) // 4
    blocks = np.arange(first_block, last_block, dtype=np.uint64)
    words = philox4x32_10(blocks & MASK32, blocks >> np.uint64(32), np.zeros_like(blocks),
                          np.zeros_like(blocks), seed & 0xFFFFFFFF, seed >> 32)
    words = [w.tolist() for w in words]
    values = []
    inv32 = 1.0 / 4294967296.0
    for b in range(len(blocks)):
        for pair in range(2):
            u1 = (words[2 * pair][b] + 1.0) * inv32
            u2 = words[2 * pair + 1][b] * inv32
            radius = math.sqrt(-2.0 * math.log(u1))
            angle = 2.0 * math.pi * u2
            values.append(radius * math.cos(angle))
            values.append(radius * math.sin(angle))
    start = offset - first_block * 4
    return np.array(values[start:start + n], dtype=np.float64).astype(np.float32)


def expected_sizes(width, height, frames, text_rows, text_dim=128):
    """h3-tiny sizes by hand: frames must already be 17n + 5; latent frames 5n + 2; latents px / 16;
    audio latents round(frames / 24 * 40) (half away from zero); 24 video / 32 audio channels."""
    assert (frames - 5) % 17 == 0
    latent_frames = 5 * ((frames - 5) // 17) + 2
    audio = math.floor(frames / 24 * 40 + 0.5)
    return {"video": 24 * latent_frames * (height // 16) * (width // 16), "audio": 2 * 32 * audio,
            "text": text_rows * text_dim}


def run_case(dump, seed, width, height, frames, text_rows):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "noise.bin")
        proc = subprocess.run([dump, path, str(seed), str(width), str(height), str(frames), str(text_rows)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"golden_noise: noise_dump failed ({proc.returncode}): {proc.stderr}")
            return False
        counts = json.loads(proc.stdout)
        with open(path, "rb") as f:
            got = np.frombuffer(f.read(), dtype="<f4")
    want_sizes = expected_sizes(width, height, frames, text_rows)
    for k, v in want_sizes.items():
        if counts[k] != v:
            print(f"golden_noise: seed {seed} {width}x{height}x{frames}: {k} size {counts[k]} != expected {v}")
            return False
    nv, na = want_sizes["video"], want_sizes["audio"]
    latents = gaussian_noise(seed, 0, nv + na)  # one stream: video first, then audio
    text = gaussian_noise(seed ^ 0x7465787400000000, 0, want_sizes["text"])
    want = np.concatenate([latents, text]).astype("<f4")
    want_sha = hashlib.sha256(want.tobytes()).hexdigest()
    got_sha = hashlib.sha256(got.tobytes()).hexdigest()
    print(f"seed {seed} {width}x{height}x{frames} text {text_rows}: numpy sha256 {want_sha}")
    print(f"{' ' * len(str(seed))}      {' ' * len(f'{width}x{height}x{frames} text {text_rows}')}  C++   sha256 {got_sha}")
    if want_sha != got_sha:
        if got.size != want.size:
            print(f"golden_noise: size mismatch {got.size} != {want.size}")
        else:
            bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
            print(f"golden_noise: {bad.size} of {want.size} values differ; first: " +
                  ", ".join(f"[{i}] C++ {got[i]!r} numpy {want[i]!r}" for i in bad[:5]))
        return False
    return True


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    check_known_answers()
    dump = sys.argv[1]
    random_seed = int.from_bytes(os.urandom(8), "little")
    ok = run_case(dump, 42, 448, 256, 22, 16)
    ok = run_case(dump, random_seed, 64, 64, 5, 3) and ok
    if not ok:
        print(f"golden_noise: FAILED (random seed was {random_seed})")
        return 1
    print("golden_noise: C++ noise matches the independent numpy computation")
    return 0


if __name__ == "__main__":
    sys.exit(main())

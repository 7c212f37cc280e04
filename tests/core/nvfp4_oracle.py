#!/usr/bin/env python3
"""ml_dtypes oracle for the NVFP4 reference quantizer (src/ref/nvfp4_quantize.cpp).

Runs tests/ref/nvfp4_dump (fresh seed), which writes per 16-block: the bf16 inputs, g, the rcp.approx values the
recipe used (rcp(6), rcp(g), rcp(g*s): taken as given here; the instruction itself is verified exhaustively on the
GPU by tests/cuda/nvfp4_quantize_test.cu), and the quantizer's d, v[16], scale byte and packed bytes. This script
recomputes independently with numpy (IEEE; the .ftz flushing as measured on sm_90, see mul_ftz) and ml_dtypes:
  block amax (NaN-suppressing), d = min.ftz(mul.ftz(mul.ftz(a, rcp6), rcp_g), 448), scale = e4m3fn(d) (ml_dtypes),
  e = min.ftz(rcp_gs, FLT_MAX), v = mul.ftz(e, x), codes = float4_e2m1fn(v) (ml_dtypes), hi-first packing.
Adaptations (deliberate): ml_dtypes' float4_e2m1fn casts do not saturate and map NaN to -0; cvt.rn.satfinite
saturates to +-6 and gives 0x7 for NaN, so v is clipped to +-6 first and NaN codes are set to 0x7. d is already
<= 448 (or NaN -> 448 by min), so the E4M3 cast needs no clipping.
Registered as the CTest `nvfp4_oracle` (tests/ref/tests.cmake). Exits non-zero with the first mismatches.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

REC = np.dtype([("x", "<u2", 16), ("g", "<f4"), ("rcp6", "<f4"), ("rcp_g", "<f4"), ("rcp_gs", "<f4"),
                ("d", "<f4"), ("v", "<f4", 16), ("scale", "u1"), ("packed", "u1", 8)])
FLT_MIN = np.float32(np.finfo(np.float32).tiny)
FLT_MAX = np.float32(np.finfo(np.float32).max)


def ftz(a):
    a = np.asarray(a, dtype=np.float32)
    return np.where(np.abs(a) < FLT_MIN, np.copysign(np.float32(0), a), a).astype(np.float32)


def mul_ftz(a, b):
    """mul.rn.ftz.f32 as measured on sm_90: flush inputs; exact product (float64 holds it); a product below FLT_MIN
    becomes +-FLT_MIN if it rounds there on the 24-bit grid (>= FLT_MIN - 2^-151), else a signed zero."""
    a64, b64 = ftz(a).astype(np.float64), ftz(b).astype(np.float64)
    with np.errstate(all="ignore"):
        exact = a64 * b64
        r = exact.astype(np.float32)
    tiny = np.abs(exact) < np.float64(FLT_MIN)
    up = np.abs(exact) >= np.float64(2.0 ** -126 - 2.0 ** -151)
    sign = np.where(np.signbit(exact), np.float32(-1), np.float32(1))
    return np.where(tiny, np.where(up, sign * FLT_MIN, sign * np.float32(0)), r).astype(np.float32)


def min_ftz(a, b):
    a, b = ftz(a), ftz(b)
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.minimum(a, b))).astype(np.float32)


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def same(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return (bits(a) == bits(b)) | (np.isnan(a) & np.isnan(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--rows", type=int, default=3000)
    args = ap.parse_args()
    seed = random.SystemRandom().getrandbits(63)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "nvfp4.bin")
        subprocess.run([args.dump, "--out", path, "--seed", str(seed), "--rows", str(args.rows)], check=True)
        raw = open(path, "rb").read()
    magic, n = np.frombuffer(raw, dtype="<u4", count=2)
    if magic != 0x3151564E or len(raw) != 8 + int(n) * REC.itemsize:
        sys.exit(f"nvfp4_oracle: bad dump (magic {magic:#x}, {len(raw)} bytes, {n} records)")
    r = np.frombuffer(raw, dtype=REC, count=int(n), offset=8)
    x = (r["x"].astype(np.uint32) << 16).view(np.float32)  # [n, 16] exact bf16 -> f32
    failures = []

    # Block amax: NaN-suppressing max of |x|; all-NaN -> NaN.
    with np.errstate(all="ignore"):
        absx = np.abs(x)
        allnan = np.all(np.isnan(absx), axis=1)
        a = np.where(allnan, np.float32(np.nan), np.nanmax(np.where(np.isnan(absx), -1, absx), axis=1)).astype(np.float32)
    d = min_ftz(mul_ftz(mul_ftz(a, r["rcp6"]), r["rcp_g"]), np.float32(448))
    ok = same(d, r["d"])
    if not ok.all():
        i = int(np.argmin(ok))
        failures.append(f"d: block {i} ours {r['d'][i]!r} oracle {d[i]!r} (g {r['g'][i]!r})")
    scale = d.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    ok = scale == r["scale"]
    if not ok.all():
        i = int(np.argmin(ok))
        failures.append(f"scale: block {i} d {d[i]!r}: ours {r['scale'][i]:#04x} ml_dtypes {scale[i]:#04x}")
    sf = r["scale"].astype(ml_dtypes.float8_e4m3fn).view(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    e = min_ftz(r["rcp_gs"], FLT_MAX)
    v = mul_ftz(e[:, None], x)
    ok = same(v, r["v"]).all(axis=1)
    if not ok.all():
        i = int(np.argmin(ok))
        failures.append(f"v: block {i} ours {r['v'][i]} oracle {v[i]} (s_f {sf[i]!r})")
    with np.errstate(invalid="ignore"):
        codes = np.clip(r["v"], np.float32(-6), np.float32(6)).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    codes[np.isnan(r["v"])] = 0x7
    packed = ((codes[:, 0::2] << 4) | codes[:, 1::2]).astype(np.uint8)
    ok = (packed == r["packed"]).all(axis=1)
    if not ok.all():
        i = int(np.argmin(ok))
        failures.append(f"packed: block {i} v {r['v'][i]}: ours {r['packed'][i]} ml_dtypes {packed[i]}")
    special = int(np.sum(~np.isfinite(x)))
    ties = int(np.sum(np.isin(np.abs(r["v"]), np.float32([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]))))
    print(f"nvfp4_oracle: {n} blocks, seed {seed}, {ties} exact E2M1 ties, {special} inf/NaN inputs, "
          f"{int(np.sum(r['scale'] == 0))} zero scales")
    if failures:
        print("nvfp4_oracle: MISMATCH (seed %d)" % seed)
        for f in failures:
            print("  " + f)
        sys.exit(1)
    print("nvfp4_oracle: all d, scale, v and packed bytes agree with numpy/ml_dtypes")


if __name__ == "__main__":
    main()

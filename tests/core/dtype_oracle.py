#!/usr/bin/env python3
"""Independent oracle for Vortex's host dtype conversions (src/core/dtype.cpp).

Runs tests/core/dtype_dump (our conversions of a fixed input set plus 2M random f32 patterns from a
fresh seed), recomputes every result with ml_dtypes / numpy and compares byte for byte. Exits
non-zero and prints the first mismatches on any difference. Registered as the CTest `dtype_oracle`.

Adaptations to ml_dtypes (each one documented because it is a deliberate difference):
  * float8 casts in ml_dtypes do not saturate (e4m3fn overflow -> NaN, e5m2 overflow -> inf). We emulate
    cvt...satfinite by clipping finite inputs to +-max (448 / 57344) before the cast and mapping
    +-inf to +-max the same way. Clipping is exact and changes nothing for |x| <= max.
  * NaN inputs: ml_dtypes keeps the NaN's sign/payload (and for float4_e2m1fn, which has no NaN,
    produces +-0). PTX cvt returns a canonical NaN (0x7FFF bf16, 0x7F fp8) and, per our header, 0x7 (+6)
    for e2m1. For NaN inputs the expected byte is therefore set to that canonical code.
  * float4_e2m1fn: ml_dtypes stores the 4-bit code in the low nibble of a byte, as we do; it is also
    clipped to +-6 first (satfinite), as above.
  * f64 -> bf16: ml_dtypes casts float64 through float32 (double rounding: 1 + 2^-8 + 2^-30 becomes
    1.0), so it cannot be the oracle for bf16_bits_from_f64. That conversion is checked against an exact
    numpy formulation instead: quantum = 2^(max(floor(log2|x|), -126) - 7), k = rint(|x| / quantum)
    (numpy rint is round-half-even and the division by a power of two is exact), value = k * quantum.
  * UE8M0: ml_dtypes float8_e8m0fnu decodes like ours, but its cast rounds to nearest while
    cvt.rp rounds up, so the encode is checked against numpy frexp (smallest 2^k >= x, k clamped
    to [-127, 127], NaN -> 0xFF, x <= 0 -> 0).
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np


def read_dump(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, n, m = np.frombuffer(data, dtype=np.uint64, count=3)
    if magic != 0x31544458564:
        sys.exit(f"dtype_oracle: {path} is not a dtype_dump file (magic {magic:#x})")
    n, m = int(n), int(m)
    pos = 24
    out = {}
    for name, dt, count in [("in32", np.uint32, n), ("bf16", np.uint16, n), ("e4m3", np.uint8, n),
                            ("e5m2", np.uint8, n), ("e2m1", np.uint8, n), ("ue8m0", np.uint8, n),
                            ("in64", np.float64, m), ("bf16_from_64", np.uint16, m),
                            ("dec_e4m3", np.float32, 256), ("dec_e5m2", np.float32, 256),
                            ("dec_e2m1", np.float32, 16), ("dec_ue8m0", np.float32, 256)]:
        size = np.dtype(dt).itemsize * count
        out[name] = np.frombuffer(data, dtype=dt, count=count, offset=pos)
        pos += size
    if pos != len(data):
        sys.exit(f"dtype_oracle: {path} has {len(data)} bytes, expected {pos}")
    return out


def saturating_cast(x, dtype, max_value, nan_code):
    """cvt.rn.satfinite emulation with ml_dtypes: clip (inf included) to +-max, NaN -> nan_code."""
    clipped = np.clip(x, np.float32(-max_value), np.float32(max_value))  # +-inf -> +-max, NaN stays NaN
    with np.errstate(invalid="ignore"):  # NaN inputs are replaced below
        codes = clipped.astype(dtype).view(np.uint8).copy()
    codes[np.isnan(x)] = nan_code
    return codes


def ref_bf16_from_f64(x):
    a = np.abs(x)
    out = np.zeros(x.shape, dtype=np.uint32)
    finite_nonzero = np.isfinite(a) & (a > 0)
    af = a[finite_nonzero]
    _, e = np.frexp(af)  # af = mant * 2^e, mant in [0.5, 1)
    binade = np.maximum(e - 1, -126)
    quantum = np.ldexp(1.0, binade - 7)
    k = np.rint(af / quantum)
    with np.errstate(over="ignore"):
        value = k * quantum  # exact (or inf beyond FP64); >= 2^128 becomes inf in FP32 below
        as32 = value.astype(np.float32)
    out[finite_nonzero] = as32.view(np.uint32) >> 16
    out[np.isinf(a)] = 0x7F80
    out |= np.where(np.signbit(x), 0x8000, 0).astype(np.uint32)
    out[np.isnan(x)] = 0x7FFF
    return out.astype(np.uint16)


def ref_ue8m0(x):
    out = np.zeros(x.shape, dtype=np.int64)
    pos = np.isfinite(x) & (x > 0)
    mant, e = np.frexp(x[pos].astype(np.float64))
    k = np.where(mant == 0.5, e - 1, e)
    out[pos] = np.clip(k, -127, 127) + 127
    out[np.isposinf(x)] = 254
    out[np.isnan(x)] = 0xFF
    return out.astype(np.uint8)


def compare(name, inputs, got, want, fmt_in, failures):
    bad = np.nonzero(got != want)[0]
    if bad.size:
        failures.append(name)
        print(f"MISMATCH {name}: {bad.size} of {got.size} differ; first ones:")
        for i in bad[:8]:
            print(f"  input {fmt_in(inputs[i])}: vortex {int(got[i]):#x}, oracle {int(want[i]):#x}")
    else:
        print(f"ok {name}: {got.size} values identical")


def compare_decode(name, got, want, failures):
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    bad = np.nonzero(~same)[0]
    if bad.size:
        failures.append(name)
        print(f"MISMATCH {name}: codes {[int(i) for i in bad[:8]]}: vortex {got[bad[:8]]}, oracle {want[bad[:8]]}")
    else:
        print(f"ok {name}: {got.size} codes identical")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", required=True, help="path of the dtype_dump executable")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: fresh)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(63)
    print(f"dtype_oracle: seed {seed}, ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dump.bin")
        subprocess.run([args.dump, str(seed), path], check=True)
        d = read_dump(path)

    x = d["in32"].view(np.float32)
    hex32 = lambda u: f"{int(u):#010x}"
    failures = []

    with np.errstate(over="ignore", invalid="ignore"):
        want_bf16 = x.astype(ml_dtypes.bfloat16).view(np.uint16).copy()
    want_bf16[np.isnan(x)] = 0x7FFF  # canonical NaN (cvt.rn.bf16.f32)
    compare("f32->bf16", d["in32"], d["bf16"], want_bf16, hex32, failures)
    compare("f32->e4m3", d["in32"], d["e4m3"], saturating_cast(x, ml_dtypes.float8_e4m3fn, 448.0, 0x7F), hex32, failures)
    compare("f32->e5m2", d["in32"], d["e5m2"], saturating_cast(x, ml_dtypes.float8_e5m2, 57344.0, 0x7F), hex32, failures)
    compare("f32->e2m1", d["in32"], d["e2m1"], saturating_cast(x, ml_dtypes.float4_e2m1fn, 6.0, 0x7), hex32, failures)
    compare("f32->ue8m0", d["in32"], d["ue8m0"], ref_ue8m0(x), hex32, failures)
    compare("f64->bf16", d["in64"], d["bf16_from_64"], ref_bf16_from_f64(d["in64"]), lambda v: repr(float(v)), failures)

    codes = np.arange(256, dtype=np.uint8)
    compare_decode("e4m3->f32", d["dec_e4m3"], codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32), failures)
    compare_decode("e5m2->f32", d["dec_e5m2"], codes.view(ml_dtypes.float8_e5m2).astype(np.float32), failures)
    compare_decode("e2m1->f32", d["dec_e2m1"], codes[:16].view(ml_dtypes.float4_e2m1fn).astype(np.float32), failures)
    compare_decode("ue8m0->f32", d["dec_ue8m0"], codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float32), failures)

    # Sanity: the oracle itself must see the interesting cases (guards against a vacuous input set).
    n_nan, n_denorm = int(np.isnan(x).sum()), int(((d["in32"] & 0x7F800000) == 0).sum())
    if n_nan < 10 or n_denorm < 100_000:
        failures.append("input coverage")
        print(f"MISMATCH input coverage: {n_nan} NaNs, {n_denorm} zero/denormal inputs")

    if failures:
        print(f"dtype_oracle: FAILED ({', '.join(failures)}), seed {seed}")
        return 1
    print(f"dtype_oracle: all conversions identical ({x.size} f32 inputs, {d['in64'].size} f64 inputs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

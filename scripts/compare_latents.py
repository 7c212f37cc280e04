#!/usr/bin/env python3
"""Deviation of an approximate mode (E2) from the BF16 program: compares the latents of two `vortex
generate` output folders (same request and seed) and appends an evidence row.
Usage: compare_latents.py REF_DIR TEST_DIR --label "fp8 vs bf16, 12 steps" [--evidence FILE]
Metrics per stream: rel-L2 = ||t - r|| / ||r||, cosine, max-abs (docs/numerics.md E2). numpy only."""
import argparse, datetime, json, os, struct, sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {e['dtype']}, expected F32")
        b, t = e["data_offsets"]
        out[name] = np.frombuffer(data[b:t], dtype="<f4").reshape(e["shape"]).astype(np.float64)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref")
    ap.add_argument("test")
    ap.add_argument("--label", required=True)
    ap.add_argument("--evidence", default="")
    a = ap.parse_args()
    row = {"schema": "vortex-deviation-1", "time_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "label": a.label, "ref": a.ref, "test": a.test}
    for stream in ("video_latents", "audio_latents"):
        r = read_safetensors(os.path.join(a.ref, stream + ".safetensors"))[stream]
        t = read_safetensors(os.path.join(a.test, stream + ".safetensors"))[stream]
        if r.shape != t.shape:
            raise SystemExit(f"{stream}: shapes differ {r.shape} vs {t.shape}")
        if not np.isfinite(t).all():
            raise SystemExit(f"{stream}: non-finite values in {a.test}")
        d = t - r
        row[stream] = {"rel_l2": float(np.linalg.norm(d) / np.linalg.norm(r)),
                       "cosine": float((r * t).sum() / (np.linalg.norm(r) * np.linalg.norm(t))),
                       "max_abs": float(np.abs(d).max()), "ref_rms": float(np.sqrt((r * r).mean()))}
    for k in ("run.json",):
        for side in ("ref", "test"):
            try:
                with open(os.path.join(getattr(a, side), k)) as f:
                    row[side + "_run"] = {x: json.load(f).get(x) for x in ("precision", "attention", "steps", "seed")}
            except (OSError, ValueError):
                pass
    print(json.dumps(row))
    if a.evidence:
        with open(a.evidence, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main())

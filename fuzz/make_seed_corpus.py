#!/usr/bin/env python3
"""Writes a small seed corpus for safetensors_fuzz: valid files (every dtype, metadata, empty
tensors, gaps) and near-miss malformed ones. Usage: make_seed_corpus.py OUT_DIR"""
import json
import os
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
         "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def image(header, data=b"", raw_header=None):
    text = raw_header if raw_header is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def build(entries, metadata=None, gap=0):
    header, data, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in entries:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        off += gap
        data += b"\0" * gap + bytes((i * 37 + 11) & 0xFF for i in range(n))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    return image(header, data)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seeds = {
        "all_dtypes": build([(f"t.{d}", d, [2, 3]) for d in SIZES], {"format": "pt"}),
        "empty": image({}),
        "empty_tensor": build([("e", "BF16", [0, 5]), ("x", "F32", [1])]),
        "scalar": build([("s", "F32", [])]),
        "gaps": build([("a", "U8", [3]), ("b", "I16", [2])], gap=5),
        "h3ish": build([("blocks.0.attn.qkv_proj.weight", "BF16", [12, 4]),
                        ("blocks.0.mlp.fc1.comfy_quant", "U8", [10])],
                       {"vortex.qkv_layout": "per_head_interleaved"}),
        "overlap": image({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
        "dup": image(None, b"\0" * 4, raw_header=b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},'
                                                 b'"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}'),
        "bad_json": image(None, raw_header=b'{"a": {"dtype": '),
        "truncated": build([("a", "F32", [4])])[:-3],
    }
    for name, blob in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(blob)
    print(f"wrote {len(seeds)} seeds to {out}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch peer timings on the same GPU and in the same run as Vortex's benchmarks (docs/evidence.md
"Compare against the baseline in the same run"). PyTorch is a peer and a reference here, never a
dependency of Vortex. Times the canonical-shape pieces: cuDNN SDPA, BF16 GEMMs, FP8 _scaled_mm, and the
eager elementwise ops of one H3 block. Writes JSONL rows in the evidence schema (docs/evidence.md) through
bench/evidence.py; each row is a baseline for Vortex's rows and has none of its own.
Usage: python3 scripts/peer_torch.py [--evidence-dir benchmarks] [--reps 20]"""
import argparse, datetime, os, sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import evidence  # noqa: E402  (bench/evidence.py: the shared percentiles and row writer)

S, D, I, FF, H, HD = 37810, 5376, 7168, 14336, 56, 128


def timeit(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return ts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--evidence-dir", default="benchmarks")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    dev = torch.cuda.get_device_properties(0)
    env = evidence.environment(gpu=dev.name, sm=f"sm_{dev.major}{dev.minor}", cuda=torch.version.cuda)
    impl = f"pytorch {torch.__version__}"
    rows = []

    def emit(workload, ts, **rates):  # rates: name -> f(p50 ms), e.g. TFLOP/s at the median
        p50 = evidence.quantile(ts, 0.5)
        r = evidence.row(env, workload, impl, ts, **{k: f(p50) for k, f in rates.items()})
        rows.append(r)
        print(f"{workload:48s} p50 {p50:9.3f} ms  " + " ".join(f"{k}={r[k]:.1f}" for k in rates))

    torch.manual_seed(0)
    g = torch.Generator(device="cuda").manual_seed(0)
    # SDPA (cuDNN), canonical shape, BF16.
    q, k, v = (torch.randn(1, H, S, HD, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        st = timeit(lambda: F.scaled_dot_product_attention(q, k, v), args.reps)
    emit("peer sdpa cudnn bf16 S=37810 H=56 D=128", st, tflops=lambda p50: 4 * S * S * I / p50 / 1e9)
    del q, k, v
    # GEMMs at M = 37810 (x @ W^T), BF16 and FP8 per-tensor.
    shapes = {"qkv": (D, 3 * I), "out": (I, D), "fc1": (D, 2 * FF), "fc2": (FF, D)}
    for name, (K, N) in shapes.items():
        x = torch.randn(S, K, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) / K ** 0.5
        st = timeit(lambda: x @ w.t(), args.reps)
        emit(f"peer gemm bf16 {name} M={S} K={K} N={N}", st, tflops=lambda p50: 2 * S * K * N / p50 / 1e9)
        x8 = x.to(torch.float8_e4m3fn)
        w8 = w.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        st = timeit(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), args.reps)
        emit(f"peer gemm fp8 {name} M={S} K={K} N={N}", st, tflops=lambda p50: 2 * S * K * N / p50 / 1e9)
        del x, w, x8, w8
    # Eager elementwise ops of one block (what diffusers runs): RMSNorm + modulate, gate add, SwiGLU.
    x = torch.randn(S, D, device="cuda", dtype=torch.bfloat16, generator=g)
    wn = torch.randn(D, device="cuda", dtype=torch.bfloat16, generator=g)
    sc = torch.randn(D, device="cuda", dtype=torch.bfloat16, generator=g) * 0.1
    sh = torch.randn(D, device="cuda", dtype=torch.bfloat16, generator=g) * 0.1
    norm = torch.nn.RMSNorm(D, eps=1e-5, device="cuda", dtype=torch.bfloat16)
    st = timeit(lambda: norm(x) * (1 + sc) + sh, args.reps)
    emit(f"peer eager rmsnorm+modulate S={S} D={D}", st, gbps=lambda p50: 2 * S * D * 2 / p50 / 1e6)
    a = torch.randn_like(x)
    st = timeit(lambda: x + sc * a, args.reps)
    emit(f"peer eager gate_add S={S} D={D}", st, gbps=lambda p50: 3 * S * D * 2 / p50 / 1e6)
    u = torch.randn(S, 2 * FF, device="cuda", dtype=torch.bfloat16, generator=g)
    st = timeit(lambda: F.silu(u[:, :FF]) * u[:, FF:], args.reps)
    emit(f"peer eager swiglu S={S} F={FF}", st, gbps=lambda p50: 3 * S * FF * 2 / p50 / 1e6)
    # Device-to-device copy ceiling.
    big = torch.empty(2 * 1024 ** 3, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(big)
    st = timeit(lambda: dst.copy_(big), args.reps)
    emit("peer d2d copy 2 GiB", st, gbps=lambda p50: 2 * big.numel() / p50 / 1e6)

    path = os.path.join(args.evidence_dir, f"{datetime.date.today().isoformat()}-{dev.name.lower().replace('nvidia ', '').replace(' ', '-')}-peer-pytorch.jsonl")
    evidence.append_jsonl(path, rows)
    print("evidence:", path)


if __name__ == "__main__":
    sys.exit(main())

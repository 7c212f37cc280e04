#!/usr/bin/env python3
"""PyTorch peer timings on the same GPU and in the same session as Vortex's benchmarks (PERFORMANCE.md
"Compare against the baseline in the same run"). PyTorch is a peer and a reference here, never a
dependency of Vortex. Times the canonical-shape pieces: cuDNN SDPA, BF16 GEMMs, FP8 _scaled_mm, and the
eager elementwise ops of one H3 block. Writes JSONL rows in the evidence schema.
Usage: python3 scripts/peer_torch.py [--evidence-dir benchmarks] [--reps 20]"""
import argparse, datetime, json, os, subprocess, sys

import torch
import torch.nn.functional as F

S, D, I, FF, H, HD = 37810, 5376, 7168, 14336, 56, 128


def clocks():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,driver_version", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout.strip().split(",")
        return {"sm": int(out[0]), "mem": int(out[1])}, out[2].strip()
    except Exception:
        return {"sm": 0, "mem": 0}, ""


def timeit(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    q = torch.tensor(ts, dtype=torch.float64).quantile(torch.tensor([0.1, 0.5, 0.9, 0.95], dtype=torch.float64)).tolist()
    return dict(ms_p10=q[0], ms_p50=q[1], ms_p90=q[2], ms_p95=q[3], n=reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--evidence-dir", default="benchmarks")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    dev = torch.cuda.get_device_properties(0)
    clk, driver = clocks()
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"
    base = dict(schema="vortex-evidence-1", commit=commit, dirty=None, gpu=dev.name, sm=f"sm_{dev.major}{dev.minor}",
                driver=driver, cuda=torch.version.cuda, impl=f"pytorch {torch.__version__}")
    rows = []

    def emit(workload, stats, **extra):
        r = dict(base, time_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), clocks_mhz=clocks()[0],
                 workload=workload, **stats, **extra)
        rows.append(r)
        print(f"{workload:48s} p50 {stats['ms_p50']:9.3f} ms  " + " ".join(f"{k}={v:.1f}" for k, v in extra.items() if isinstance(v, float)))

    torch.manual_seed(0)
    g = torch.Generator(device="cuda").manual_seed(0)
    # SDPA (cuDNN), canonical shape, BF16.
    q, k, v = (torch.randn(1, H, S, HD, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        st = timeit(lambda: F.scaled_dot_product_attention(q, k, v), args.reps)
    emit("peer sdpa cudnn bf16 S=37810 H=56 D=128", st, tflops=4 * S * S * I / st["ms_p50"] / 1e9)
    del q, k, v
    # GEMMs at M = 37810 (x @ W^T), BF16 and FP8 per-tensor.
    shapes = {"qkv": (D, 3 * I), "out": (I, D), "fc1": (D, 2 * FF), "fc2": (FF, D)}
    for name, (K, N) in shapes.items():
        x = torch.randn(S, K, device="cuda", dtype=torch.bfloat16, generator=g)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) / K ** 0.5
        st = timeit(lambda: x @ w.t(), args.reps)
        emit(f"peer gemm bf16 {name} M={S} K={K} N={N}", st, tflops=2 * S * K * N / st["ms_p50"] / 1e9)
        x8 = x.to(torch.float8_e4m3fn)
        w8 = w.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        st = timeit(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), args.reps)
        emit(f"peer gemm fp8 {name} M={S} K={K} N={N}", st, tflops=2 * S * K * N / st["ms_p50"] / 1e9)
        del x, w, x8, w8
    # Eager elementwise ops of one block (what diffusers runs): RMSNorm + modulate, gate add, SwiGLU.
    x = torch.randn(S, D, device="cuda", dtype=torch.bfloat16, generator=g)
    wn = torch.randn(D, device="cuda", dtype=torch.bfloat16, generator=g)
    sc = torch.randn(D, device="cuda", dtype=torch.bfloat16, generator=g) * 0.1
    sh = torch.randn(D, device="cuda", dtype=torch.bfloat16, generator=g) * 0.1
    norm = torch.nn.RMSNorm(D, eps=1e-5, device="cuda", dtype=torch.bfloat16)
    st = timeit(lambda: norm(x) * (1 + sc) + sh, args.reps)
    emit(f"peer eager rmsnorm+modulate S={S} D={D}", st, gbps=2 * S * D * 2 / st["ms_p50"] / 1e6)
    a = torch.randn_like(x)
    st = timeit(lambda: x + sc * a, args.reps)
    emit(f"peer eager gate_add S={S} D={D}", st, gbps=3 * S * D * 2 / st["ms_p50"] / 1e6)
    u = torch.randn(S, 2 * FF, device="cuda", dtype=torch.bfloat16, generator=g)
    st = timeit(lambda: F.silu(u[:, :FF]) * u[:, FF:], args.reps)
    emit(f"peer eager swiglu S={S} F={FF}", st, gbps=3 * S * FF * 2 / st["ms_p50"] / 1e6)
    # Device-to-device copy ceiling.
    big = torch.empty(2 * 1024 ** 3, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(big)
    st = timeit(lambda: dst.copy_(big), args.reps)
    emit("peer d2d copy 2 GiB", st, gbps=2 * big.numel() / st["ms_p50"] / 1e6)

    os.makedirs(args.evidence_dir, exist_ok=True)
    path = os.path.join(args.evidence_dir, f"{datetime.date.today().isoformat()}-{dev.name.lower().replace('nvidia ', '').replace(' ', '-')}-peer-pytorch.jsonl")
    with open(path, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print("evidence:", path)


if __name__ == "__main__":
    sys.exit(main())

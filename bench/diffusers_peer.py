#!/usr/bin/env python3
"""diffusers peer timings for the same run as Vortex's block / step benchmarks (docs/evidence.md: compare
with the baseline in the same run). diffusers is a peer here, never a dependency of Vortex; the wheel given on the
command line is unpacked into a temporary directory and imported from there (nothing installed). Random BF16
weights and inputs (timing only, never zeros); attention is whatever diffusers dispatches (PyTorch SDPA).

  block:       one MiniMaxH3TransformerBlock at S rows (default the canonical 37,810), the peer of
               `vortex bench block --block 24`; two timesteps x three modalities in the AdaLN table.
  transformer: the whole MiniMaxH3Transformer3DModel forward (50 blocks, ~66 GB of BF16 weights made on the
               GPU; patch projections, time embedder and heads in FP32 as `_keep_in_fp32_modules`) at a
               request size (default 512x512, 22 frames, 100 text rows: S = 1,966), the peer of one
               denoiser step of bench/step_graph_bench.cpp. Its forward also runs the 2-block token
               refiner over the text rows, which Vortex runs once per request.

Usage: python3 bench/diffusers_peer.py OUT_DIR --wheel /path/diffusers-0.42.1-py3-none-any.whl
           [--what block|transformer] [--rows 37810] [--width 512 --height 512 --frames 22 --text-rows 100]
           [--reps 20]
Writes OUT_DIR/diffusers_peer.json (commit, GPU, SM clock samples, p10/p50/p90) and prints a table."""
import argparse, atexit, datetime, json, os, shutil, subprocess, sys, tempfile, threading, time, zipfile


def smi(query):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
    except Exception:
        return ""


class ClockSampler:
    """nvidia-smi SM clock every 200 ms while a timing loop runs."""

    def __enter__(self):
        self.samples, self.running = [], True
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def _loop(self):
        while self.running:
            v = smi("clocks.sm")
            if v.isdigit():
                self.samples.append(int(v))
            time.sleep(0.2)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()

    def summary(self):
        s = sorted(self.samples)
        if not s:
            return {"n": 0}
        q = lambda p: s[min(len(s) - 1, int(round(p * (len(s) - 1))))]
        return {"p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "min": s[0], "max": s[-1], "n": len(s)}


def timeit(torch, fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    with ClockSampler() as clk:
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
    q = torch.tensor(ts, dtype=torch.float64).quantile(torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)).tolist()
    return dict(ms_p10=q[0], ms_p50=q[1], ms_p90=q[2], n=reps, sm_clock_mhz=clk.summary())


def randomize_(torch, module, gen):
    # Matrices ~ U(-a, a), a = 1/sqrt(fan_in), so activations stay O(1) through the block; vectors (norm
    # weights, biases) ~ U(0.9, 1.1). Never zeros.
    with torch.no_grad():
        for p in module.parameters():
            if p.ndim > 1:
                a = 1.0 / p.shape[-1] ** 0.5
                p.uniform_(-a, a, generator=gen)
            else:
                p.uniform_(0.9, 1.1, generator=gen)


def bench_block(torch, tm, args, gen):
    S, D = args.rows, 5376
    blk = tm.MiniMaxH3TransformerBlock(hidden_size=D, num_attention_heads=56, attention_head_dim=128, ffn_dim=14336,
                                       time_embed_dim=2688, norm_eps=1e-5, qk_norm_eps=1e-5)
    blk = blk.to(device="cuda", dtype=torch.bfloat16).eval()
    randomize_(torch, blk, gen)
    x = torch.randn(1, S, D, device="cuda", dtype=torch.bfloat16, generator=gen)
    temb = torch.randn(2, 2688, device="cuda", dtype=torch.float32, generator=gen)
    # Two timesteps x three modalities, as every sampling step after the first; text | audio | video rows.
    idx = torch.full((S,), 3 + 2, dtype=torch.long, device="cuda")
    idx[:100] = 3 + 0
    idx[100:514] = 0 + 1
    pos = torch.randint(0, 64, (S, 3), device="cuda", generator=gen)
    rope = tm.MiniMaxH3RotaryPosEmbed(rope_freq_dim=16).to("cuda")(pos)
    with torch.inference_mode():
        stats = timeit(torch, lambda: blk(x, temb, idx, rope), args.reps)
        torch.cuda.reset_peak_memory_stats()
        blk(x, temb, idx, rope)
        stats["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    del blk
    torch.cuda.empty_cache()
    return stats


def request_rows(width, height, frames, text_rows):
    """Vortex's packing (src/model/packing.cpp make_geometry): frames snapped up to 17n + 5."""
    n = max(0, -(-(frames - 5) // 17))
    latent_frames, snapped = 5 * n + 2, 17 * n + 5
    video = latent_frames * (height // 32) * (width // 32)
    audio = 2 * ((5 * snapped + 1) // 3)
    return text_rows, audio, video


def bench_transformer(torch, tm, args, gen):
    text, audio, video = request_rows(args.width, args.height, args.frames, args.text_rows)
    S = text + audio + video
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = tm.MiniMaxH3Transformer3DModel()
    torch.set_default_dtype(torch.float32)
    for name in ("proj_in", "audio_proj_in", "time_embedder", "proj_out", "audio_proj_out"):
        getattr(model, name).float()
    model.eval()
    randomize_(torch, model, gen)
    hs = torch.randn(1, video, 96, device="cuda", dtype=torch.float32, generator=gen)
    ahs = torch.randn(1, audio, 32, device="cuda", dtype=torch.float32, generator=gen)
    ehs = torch.randn(1, text, 5120, device="cuda", dtype=torch.bfloat16, generator=gen)
    timestep = torch.tensor([0.2, 0.35], device="cuda", dtype=torch.float32)  # two distinct noise levels
    # Packed order [text | audio | video] as Vortex packs it; text and video at one timestep, audio at the other.
    text_idx = torch.arange(0, text, device="cuda")
    audio_idx = torch.arange(text, text + audio, device="cuda")
    video_idx = torch.arange(text + audio, S, device="cuda")
    tags = torch.zeros(S, dtype=torch.long, device="cuda")
    tags[text_idx], tags[audio_idx] = 1, 2
    t_idx = torch.zeros(S, dtype=torch.long, device="cuda")
    t_idx[audio_idx] = 1
    pos = torch.randint(0, 64, (S, 3), device="cuda", generator=gen)
    fn = lambda: model(hs, ahs, ehs, timestep, t_idx, tags, pos, video_idx, audio_idx, text_idx, return_dict=False)
    with torch.inference_mode():
        stats = timeit(torch, fn, args.reps)
        torch.cuda.reset_peak_memory_stats()
        fn()
        stats["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    stats["rows"] = S
    del model
    torch.cuda.empty_cache()
    return f"diffusers_transformer_{args.width}x{args.height}x{args.frames}f_S{S}", stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--wheel", required=True, help="diffusers wheel (e.g. diffusers-0.42.1-py3-none-any.whl)")
    ap.add_argument("--rows", type=int, default=37810)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--what", choices=("block", "transformer"), default="block")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--height", type=int, default=512)
    ap.add_argument("--frames", type=int, default=22)
    ap.add_argument("--text-rows", type=int, default=100)
    args = ap.parse_args()
    if not os.path.isfile(args.wheel):
        sys.exit(f"error: wheel not found: {args.wheel}")
    unpacked = tempfile.mkdtemp(prefix="diffusers_wheel_")  # removed at exit; nothing is installed
    atexit.register(shutil.rmtree, unpacked, True)
    with zipfile.ZipFile(args.wheel) as z:
        z.extractall(unpacked)
    sys.path.insert(0, unpacked)
    import torch
    import diffusers.models.transformers.transformer_minimax_h3 as tm
    import diffusers

    os.makedirs(args.out_dir, exist_ok=True)
    dev = torch.cuda.get_device_properties(0)
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    env = dict(schema="vortex.diffusers_peer.v1", commit=commit or "unknown", gpu=dev.name,
               sm=f"sm_{dev.major}{dev.minor}", driver=smi("driver_version"), cuda=torch.version.cuda,
               torch=torch.__version__, diffusers=diffusers.__version__,
               time_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    gen = torch.Generator(device="cuda").manual_seed(0)
    if args.what == "transformer":
        workload, stats = bench_transformer(torch, tm, args, gen)
        r = dict(workload=workload, **stats)
    else:
        r = dict(workload=f"diffusers_block_S{args.rows}", **bench_block(torch, tm, args, gen))
    rows = [r]
    print(f"{r['workload']:32s} p10 {r['ms_p10']:9.3f}  p50 {r['ms_p50']:9.3f}  p90 {r['ms_p90']:9.3f} ms  "
          f"SM clock p50 {r['sm_clock_mhz'].get('p50', 0)} MHz")
    name = "diffusers_peer.json" if args.what == "block" else "diffusers_peer_transformer.json"
    with open(os.path.join(args.out_dir, name), "w") as f:
        json.dump(dict(environment=env, rows=rows), f, indent=1)
    print(f"evidence: {os.path.join(args.out_dir, name)}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Ulysses scaling on several GPUs: canonical 12-step sampling with `vortex generate --gpus N` against one
GPU in the same session, latent bit-identity across N, the communication figures of ulysses_comm_bench
(standalone all-to-all time, all-to-all and link bandwidth), and `vortex bench block --block 24 --gpus N`:
the canonical block inside a real run, with its sp_* communication regions on every rank, the bytes per rank
and the achieved all-to-all bandwidth (set against the link's measured bandwidth).

  python3 bench/ulysses_scaling.py OUT_DIR [--gpus 2,4,8] [--steps 12] [--build build] [--block 24] [--block-reps 10]

Writes OUT_DIR/ulysses_scaling.json (commit, GPU, SM clock samples, per N: sampling seconds of each step
p10/p50/p90, total sampling seconds, speedup vs the same-run one-GPU baseline, latents SHA-256 and whether
they equal the baseline's, the comm benchmark's JSON, the bench block row) and prints a table. The bench
block rows (vortex-evidence-1) are also kept under OUT_DIR/bench_block/. Targets (issue 18): 2 GPUs >= 1.9x,
4 >= 3.6x, 8 >= 6.8x, latents bit-identical.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, threading, time


def sh(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def clocks(stop, out):
    while not stop.is_set():
        try:
            r = subprocess.run(["nvidia-smi", "--query-gpu=index,clocks.sm", "--format=csv,noheader,nounits"],
                               text=True, capture_output=True, timeout=10)
            for line in r.stdout.strip().splitlines():
                i, mhz = [x.strip() for x in line.split(",")]
                out.setdefault(i, []).append(int(mhz))
        except Exception:
            pass
        stop.wait(2.0)


def pct(v):
    v = sorted(v)
    at = lambda q: v[int(q * (len(v) - 1) + 0.5)]
    return {"p10": at(0.1), "p50": at(0.5), "p90": at(0.9)}


def generate(vortex, out, gpus, steps):
    cmd = [vortex, "generate", "--config", "h3", "--synthetic", "--backend", "cuda", "--width", "1344", "--height",
           "768", "--frames", "124", "--synthetic-text", "100", "--steps", str(steps), "--out", out, "--quiet"]
    if gpus:
        cmd += ["--gpus", str(gpus)]
    t0 = time.time()
    sh(cmd)
    wall = time.time() - t0
    run = json.load(open(os.path.join(out, "run.json")))
    return run, wall


def block_rows(evidence_dir):
    rows = []
    for name in sorted(os.listdir(evidence_dir)):  # <date>-<gpu>-bench-block.jsonl: by date
        if name.endswith("-bench-block.jsonl"):
            rows += [json.loads(l) for l in open(os.path.join(evidence_dir, name)) if l.strip()]
    return rows


def bench_block(vortex, evidence_dir, gpus, block, reps):
    """`vortex bench block` on the canonical request; returns the one evidence row it appends."""
    os.makedirs(evidence_dir, exist_ok=True)
    before = len(block_rows(evidence_dir))
    cmd = [vortex, "bench", "block", "--config", "h3", "--backend", "cuda", "--block", str(block), "--reps",
           str(reps), "--evidence-dir", evidence_dir]
    if gpus:
        cmd += ["--gpus", str(gpus)]
    sh(cmd)
    rows = block_rows(evidence_dir)
    if len(rows) != before + 1:
        raise RuntimeError("vortex bench block appended %d rows under %s, expected 1" % (len(rows) - before,
                                                                                        evidence_dir))
    return rows[-1]


def comm_of(row):
    """The per-block communication figures of a bench block row (None off a world)."""
    w = row.get("world")
    comps = {c["name"]: c for c in row["components"]}
    if not w:
        return None
    return {"block_comm_ms_p50": w["block_comm_ms_p50"],
            "qkv_bytes_sent_per_rank": w["qkv_bytes_sent_per_rank"],
            "out_bytes_sent_per_rank": w["out_bytes_sent_per_rank"],
            "qkv_GBps": w.get("qkv_GBps"), "out_GBps": w.get("out_GBps"),
            "sp_ms_p50": {n: comps[n]["ms_p50"] for n in ("sp_pack", "sp_all_to_all_qkv", "sp_all_to_all_out",
                                                          "sp_unpack") if n in comps}}


def find_steps(run):
    return run["timing"]["step_seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--gpus", default="2,4,8")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--build", default="build")
    ap.add_argument("--block", type=int, default=24, help="block for `vortex bench block` (canonical: 24)")
    ap.add_argument("--block-reps", type=int, default=10)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    vortex = os.path.join(a.build, "bin", "vortex")
    bench = os.path.join(a.build, "bin", "ulysses_comm_bench")
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    n_gpus = len(sh(["nvidia-smi", "-L"]).stdout.strip().splitlines())
    counts = [int(x) for x in a.gpus.split(",") if int(x) <= n_gpus]
    commit = sh(["git", "rev-parse", "HEAD"]).stdout.strip()
    gpu = sh(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).stdout.strip().splitlines()[0]
    samples, stop = {}, threading.Event()
    th = threading.Thread(target=clocks, args=(stop, samples), daemon=True)
    th.start()
    tmp = tempfile.mkdtemp(prefix="vortex-ulysses-")
    results = {"schema": "vortex.bench/ulysses_scaling", "commit": commit, "gpu": gpu, "gpus_on_machine": n_gpus,
               "request": "h3 synthetic, 1344x768, 124 frames, 100 text rows (37,810 packed rows), %d steps" % a.steps, "runs": []}
    try:
        base_run, base_wall = generate(vortex, os.path.join(tmp, "u1"), 0, a.steps)
        base = {"gpus": 1, "step_seconds": pct(find_steps(base_run)), "sampling_seconds": sum(find_steps(base_run)),
                "wall_seconds": base_wall, "outputs": base_run.get("outputs", {})}
        evidence = os.path.join(a.out_dir, "bench_block")
        base_block = bench_block(vortex, evidence, 0, a.block, a.block_reps)
        base["block_ms_p50"] = base_block["ms_p50"]
        results["baseline"] = base
        for n in counts:
            run, wall = generate(vortex, os.path.join(tmp, "u%d" % n), n, a.steps)
            steps = find_steps(run)
            entry = {"gpus": n, "step_seconds": pct(steps), "sampling_seconds": sum(steps), "wall_seconds": wall,
                     "speedup_vs_1": base["sampling_seconds"] / sum(steps) if steps else None}
            same = all(run["outputs"][f].get("sha256") == base["outputs"][f].get("sha256")
                       for f in ("video_latents.safetensors", "audio_latents.safetensors"))
            entry["latents_identical_to_1"] = same
            comm = sh([bench, "--gpus", str(n)]).stdout.strip().splitlines()[-1]
            entry["comm"] = json.loads(comm)
            row = bench_block(vortex, evidence, n, a.block, a.block_reps)
            entry["bench_block"] = {"ms_p50": row["ms_p50"], "ms_p10": row["ms_p10"], "ms_p90": row["ms_p90"],
                                    "vs_1_gpu": base["block_ms_p50"] / row["ms_p50"], "comm": comm_of(row),
                                    "config": row["config"]}
            results["runs"].append(entry)
            shutil.rmtree(os.path.join(tmp, "u%d" % n), ignore_errors=True)
    finally:
        stop.set()
        th.join()
        shutil.rmtree(tmp, ignore_errors=True)
    results["sm_clock_mhz"] = {i: pct(v) for i, v in samples.items()}
    path = os.path.join(a.out_dir, "ulysses_scaling.json")
    json.dump(results, open(path, "w"), indent=2)
    print("\n| GPUs | sampling s | speedup | latents == 1 GPU | block %d ms p50 | in-block comm ms p50 | in-block a2a "
          "GB/s | standalone comm ms p50 | standalone a2a GB/s | link GB/s |" % a.block)
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("| 1 | %.1f | 1.00x | - | %.2f | - | - | - | - | - |" % (results["baseline"]["sampling_seconds"],
                                                                  results["baseline"]["block_ms_p50"]))
    for e in results["runs"]:
        c, b = e["comm"], e["bench_block"]
        bc = b["comm"] or {}
        print("| %d | %.1f | %.2fx | %s | %.2f | %.2f | %s | %.2f | %.1f | %.1f |" % (
            e["gpus"], e["sampling_seconds"], e["speedup_vs_1"] or 0, e["latents_identical_to_1"], b["ms_p50"],
            bc.get("block_comm_ms_p50", 0.0), "%.1f" % bc["qkv_GBps"] if bc.get("qkv_GBps") else "-",
            c["block_comm_ms_p50"], c["all_to_all_qkv_GBps_p50"], c["link_p2p_GBps_p50"]))
    print("evidence:", path)


if __name__ == "__main__":
    sys.exit(main())

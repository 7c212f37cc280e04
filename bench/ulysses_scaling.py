#!/usr/bin/env python3
"""Ulysses scaling on several GPUs: canonical 12-step sampling with `vortex generate --gpus N` against one
GPU in the same session, latent bit-identity across N, and the communication figures of
ulysses_comm_bench (per-block all-to-all time, all-to-all and link bandwidth).

  python3 bench/ulysses_scaling.py OUT_DIR [--gpus 2,4,8] [--steps 12] [--build build]

Writes OUT_DIR/ulysses_scaling.json (commit, GPU, SM clock samples, per N: sampling seconds of each step
p10/p50/p90, total sampling seconds, speedup vs the same-run one-GPU baseline, latents SHA-256 and whether
they equal the baseline's, the comm benchmark's JSON) and prints a table. Targets (issue 18): 2 GPUs >= 1.9x,
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


def find_steps(run):
    return run["timing"]["step_seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--gpus", default="2,4,8")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--build", default="build")
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
            results["runs"].append(entry)
            shutil.rmtree(os.path.join(tmp, "u%d" % n), ignore_errors=True)
    finally:
        stop.set()
        th.join()
        shutil.rmtree(tmp, ignore_errors=True)
    results["sm_clock_mhz"] = {i: pct(v) for i, v in samples.items()}
    path = os.path.join(a.out_dir, "ulysses_scaling.json")
    json.dump(results, open(path, "w"), indent=2)
    print("\n| GPUs | sampling s | speedup | latents == 1 GPU | block comm ms p50 | a2a GB/s | link GB/s |")
    print("|---|---|---|---|---|---|---|")
    print("| 1 | %.1f | 1.00x | - | - | - | - |" % results["baseline"]["sampling_seconds"])
    for e in results["runs"]:
        c = e["comm"]
        print("| %d | %.1f | %.2fx | %s | %.2f | %.1f | %.1f |" % (e["gpus"], e["sampling_seconds"], e["speedup_vs_1"] or 0,
              e["latents_identical_to_1"], c["block_comm_ms_p50"], c["all_to_all_qkv_GBps_p50"], c["link_p2p_GBps_p50"]))
    print("evidence:", path)


if __name__ == "__main__":
    sys.exit(main())

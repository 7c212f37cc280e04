#!/usr/bin/env python3
"""Loading and streaming from disk on one GPU (docs/memory.md, issue 27), all in one session:
  1. `vortex synth --config h3 --layers L --layout comfy`: a BF16 checkpoint of h3's first L blocks (the same block
     shapes, fewer of them, so it fits the device's disk) in the layout that streams from disk;
  2. the disk's raw rate: O_DIRECT reads of every shard (16 MiB aligned requests), page cache dropped first;
  3. `vortex generate --checkpoint` runs, canonical request (1344x768x124, 100 synthetic text rows), the page cache
     dropped before each: resident (defaults: the AdaLN projections read into page-locked memory beside the load),
     resident with the projections on the device (no page-locked memory at all), streaming from page-locked host
     memory (--max-vram V), streaming from disk (--max-vram V --max-host-ram H); per run the one-shot wall time, load and sampling time, step times,
     peak device memory (nvidia-smi every 200 ms), host RSS sampled every 100 ms (peak over the whole run and over
     sampling alone) and the latents' sha256;
  4. synthetic full h3 at 512x512x22: resident against --max-vram 24;
  5. `vortex serve --config h3 --synthetic` on loopback: two canonical jobs with different prompts; the second
     job's wall time against its sampling time.
Writes OUT/memory2.jsonl (one row per measurement, with commit, gpu, clocks) and OUT/<run>.log; prints a table.
Usage: memory2_bench.py VORTEX OUT WORK_DIR [--layers 12] [--steps 3] [--vram 13] [--host-ram 4]
"""
import argparse
import hashlib
import json
import mmap
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from residency_bench import smi  # noqa: E402  (bench/residency_bench.py)

GB = 1e9




def drop_page_cache(files):
    """Drops the files' pages from the page cache (root: drop_caches; else POSIX_FADV_DONTNEED per file)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        for p in files:
            fd = os.open(p, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        return "fadvise"


def raw_direct_read(files, chunk=16 << 20):
    buf = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
    total = 0
    t0 = time.time()
    for p in files:
        fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
        try:
            while True:
                n = os.readv(fd, [buf])
                total += n
                if n < chunk:
                    break
        finally:
            os.close(fd)
    s = time.time() - t0
    return {"bytes": total, "seconds": s, "gb_per_s": total / GB / s}


class Sampler:
    """nvidia-smi memory.used every 200 ms and the child's VmRSS every 100 ms, timestamped."""

    def __init__(self, pid):
        self.pid = pid
        self.rss = []  # (t, bytes)
        self.stop = False
        self.smi = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                     "-lms", "200"], stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop:
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            self.rss.append((time.time(), int(line.split()[1]) * 1024))
            except OSError:
                pass
            time.sleep(0.1)

    def finish(self):
        self.stop = True
        self.thread.join()
        self.smi.terminate()
        return [int(x) for x in self.smi.communicate()[0].split() if x.strip().isdigit()]


def run_generate(vortex, name, args, out, timeout):
    d = os.path.join(tempfile.mkdtemp(prefix=f"m2_{name}_"), "run")
    cmd = [vortex, "generate", "--backend", "cuda", "--out", d] + args
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = Sampler(proc.pid)
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    lines = []
    for line in proc.stdout:
        lines.append((time.time(), line.rstrip("\n")))
    _, status, usage = os.wait4(proc.pid, 0)
    killer.cancel()
    wall = time.time() - t0
    gpu = sampler.finish()
    t_sampling = next((t for t, l in lines if "sampling" in l and "vortex generate:" in l and "note" not in l), None)
    rss_sampling = [b for t, b in sampler.rss if t_sampling is not None and t >= t_sampling]
    with open(os.path.join(out, name + ".log"), "w") as f:
        f.write(" ".join(cmd) + "\n")
        for t, l in lines:
            f.write(f"{t - t0:8.2f} {l}\n")
    row = {"run": name, "args": " ".join(args), "exit_status": os.waitstatus_to_exitcode(status),
           "wall_seconds": round(wall, 2), "peak_gpu_mib_nvidia_smi": max(gpu) if gpu else None,
           "host_peak_rss_gb": round(usage.ru_maxrss / 1e6, 2),
           "host_rss_sampling_max_gb": round(max(rss_sampling) / GB, 2) if rss_sampling else None}
    try:
        m = json.load(open(os.path.join(d, "run.json")))
        t = m["timing"]
        s = t["step_seconds"]
        row.update({"step_seconds": s, "step_p50_after_first": statistics.median(s[1:]) if len(s) > 1 else s[0],
                    "load_weights_seconds": t["load_weights_seconds"],
                    "adaln_tables_seconds": t.get("adaln_tables_seconds"), "prepare_seconds": t["prepare_seconds"],
                    "sampling_seconds": t["sampling_seconds"], "total_seconds": t["total_seconds"],
                    "adaln_weights": m.get("request", {}).get("adaln_weights"),
                    "latents_sha256": hashlib.sha256((m["outputs"]["video_latents.safetensors"]["sha256"] +
                                                      m["outputs"]["audio_latents.safetensors"]["sha256"]).encode())
                    .hexdigest()})
    except Exception as e:  # noqa: BLE001 - the run failed; its log says why
        row["error"] = repr(e)
    return row


def against_baseline(row, ref):
    """The first run with latents is the baseline; every run (the baseline too) gets its latents compared with the
    baseline's and its step p50 as a ratio of the baseline's. Returns the baseline."""
    if "latents_sha256" not in row:
        return ref
    ref = ref or row
    row["baseline"] = ref["run"]
    row["latents_equal_baseline"] = row["latents_sha256"] == ref["latents_sha256"]
    row["ratio_step_p50"] = round(row["step_p50_after_first"] / ref["step_p50_after_first"], 3)
    return ref


def call(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, json.loads(r.read())


def run_serve(vortex, out, steps, port=18437, limit=240):
    data = tempfile.mkdtemp(prefix="m2-serve-")
    log = open(os.path.join(out, "serve.log"), "w")
    srv = subprocess.Popen([vortex, "serve", "--config", "h3", "--synthetic", "--backend", "cuda", "--port", str(port),
                            "--data", data], stdout=log, stderr=subprocess.STDOUT)
    row = {"run": "serve_second_prompt", "steps": steps}
    try:
        t0 = time.time()
        while True:
            try:
                if call(port, "GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if srv.poll() is not None or time.time() - t0 > limit:
                row["error"] = "server did not come up"
                return row
            time.sleep(0.5)
        row["startup_seconds"] = round(time.time() - t0, 2)
        jobs = []
        for prompt in ("a red fox running through snow", "waves breaking on a rocky shore at dusk"):
            req = {"width": 1344, "height": 768, "frames": 124, "steps": steps, "seed": 42, "prompt": prompt}
            tc = time.time()
            _, s = call(port, "POST", "/v1/videos", req)
            while True:
                _, st = call(port, "GET", f"/v1/videos/{s['id']}")
                if st["status"] in ("succeeded", "failed", "cancelled"):
                    break
                time.sleep(0.1)
            st["client_seconds"] = time.time() - tc
            jobs.append(st)
        row["jobs"] = [{"status": j["status"], "client_seconds": round(j["client_seconds"], 2),
                        "timing": j.get("timing")} for j in jobs]
        second = jobs[1]
        tm = second.get("timing") or {}
        row["second_client_seconds"] = round(second["client_seconds"], 2)
        row["second_sampling_seconds"] = tm.get("sampling_seconds")
        if tm.get("sampling_seconds"):
            row["second_latency_over_sampling"] = round(second["client_seconds"] / tm["sampling_seconds"], 3)
    except Exception as e:  # noqa: BLE001
        row["error"] = repr(e)
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=60)
        except subprocess.TimeoutExpired:
            srv.kill()
        log.close()
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("vortex")
    ap.add_argument("out")
    ap.add_argument("work")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--vram", default="13")
    ap.add_argument("--host-ram", default="4")
    ap.add_argument("--phases", default="synth,raw,ckpt,s512,serve")
    ap.add_argument("--timeout", type=float, default=120.0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    phases = a.phases.split(",")
    common = {"commit": os.environ.get("VORTEX_COMMIT", "unknown"), "dirty": os.environ.get("VORTEX_DIRTY", "unknown"),
              "gpu": smi("name"), "clocks_max_sm_mhz": smi("clocks.max.sm")}
    rows = []

    def emit(row):
        row = dict(common, **row, clocks_sm_mhz_after=smi("clocks.sm"))
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(os.path.join(a.out, "memory2.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")

    ckdir = os.path.join(a.work, "ckpt")
    index = os.path.join(ckdir, "model.safetensors.index.json")
    if "synth" in phases:
        os.makedirs(ckdir, exist_ok=True)
        t0 = time.time()
        r = subprocess.run([a.vortex, "synth", "--config", "h3", "--layers", str(a.layers), "--layout", "comfy",
                            "--shard-size-gb", "4", "--quiet", "-o", index], capture_output=True, text=True)
        emit({"run": "synth", "exit_status": r.returncode, "seconds": round(time.time() - t0, 2),
              "stderr": r.stderr[-400:]})
    shards = sorted(os.path.join(ckdir, f) for f in os.listdir(ckdir) if f.endswith(".safetensors")) \
        if os.path.isdir(ckdir) else []
    ck_bytes = sum(os.path.getsize(p) for p in shards)
    fs = subprocess.run(["findmnt", "-no", "FSTYPE,SOURCE", "-T", ckdir], capture_output=True, text=True).stdout.strip()
    if "raw" in phases and shards:
        how = drop_page_cache(shards)
        emit(dict({"run": "disk_raw_direct_read", "filesystem": fs, "evict": how, "layers": a.layers},
                  **raw_direct_read(shards)))
    if "ckpt" in phases and shards:
        base = ["--checkpoint", index, "--width", "1344", "--height", "768", "--frames", "124", "--steps",
                str(a.steps), "--synthetic-text", "100", "--seed", "42"]
        runs = [("ckpt_resident", []), ("ckpt_adaln_device", ["--adaln-weights", "device"]),
                ("ckpt_host_stream", ["--max-vram", a.vram]),
                ("ckpt_disk_stream", ["--max-vram", a.vram, "--max-host-ram", a.host_ram])]
        ref = None
        for name, extra in runs:
            drop_page_cache(shards)
            row = run_generate(a.vortex, name, base + extra, a.out, a.timeout)
            row.update({"checkpoint_gb": round(ck_bytes / GB, 2), "layers": a.layers, "filesystem": fs})
            if "load_weights_seconds" in row:
                row["load_gb_per_s"] = round(ck_bytes / GB / row["load_weights_seconds"], 3)
                row["wall_minus_max_load_sampling"] = round(
                    row["wall_seconds"] - max(row["load_weights_seconds"], row["sampling_seconds"]), 2)
            ref = against_baseline(row, ref)
            emit(row)
    if "s512" in phases:
        base = ["--config", "h3", "--synthetic", "--width", "512", "--height", "512", "--frames", "22", "--steps",
                str(a.steps), "--synthetic-text", "100", "--seed", "42"]
        ref = None
        for name, extra in [("s512_resident", []), ("s512_vram24", ["--max-vram", "24"])]:
            row = run_generate(a.vortex, name, base + extra, a.out, a.timeout)
            ref = against_baseline(row, ref)
            emit(row)
    if "serve" in phases:
        emit(run_serve(a.vortex, a.out, max(1, a.steps - 1)))

    print(f"\n{'run':<22}{'wall s':>8}{'load s':>8}{'sampl s':>8}{'step p50':>9}{'ratio':>7}{'GiB':>6}"
          f"{'RSS GB':>7}{'RSS smp':>8}  latents")
    for r in rows:
        if r["run"].startswith(("ckpt", "s512")) and "error" not in r:
            print(f"{r['run']:<22}{r['wall_seconds']:>8.1f}{r['load_weights_seconds']:>8.1f}"
                  f"{r['sampling_seconds']:>8.1f}{r['step_p50_after_first']:>9.3f}{r.get('ratio_step_p50', 1.0):>7.3f}"
                  f"{(r['peak_gpu_mib_nvidia_smi'] or 0) / 1024:>6.1f}{r['host_peak_rss_gb']:>7.1f}"
                  f"{(r['host_rss_sampling_max_gb'] or 0):>8.1f}  {r.get('latents_equal_baseline', 'ref')}")
        else:
            print(r["run"], {k: v for k, v in r.items() if k not in common and k not in ("run", "jobs", "stderr")})
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The canonical H3 request through `vortex serve` on a GPU (issue: serve, device evidence).

Starts `vortex serve --config h3 --synthetic --backend cuda`, waits for /health, then on the resident model:
two consecutive canonical jobs (1344x768, 124 frames, 12 steps) to show that the second one reloads nothing
(its wall time over its sampling time), and a third job cancelled while running (cancel latency from the
job's own timing). Writes one report JSON (--out) with every job status, /health and /metrics, and with
--evidence FILE.jsonl appends one evidence row (docs/evidence.md, bench/evidence.py): the second job's step times.
Standard library only. Usage: bench/serve_canonical.py --vortex build/bin/vortex --out FILE [--steps 12]
  [--evidence benchmarks/<date>-<gpu>-serve.jsonl]
"""
import argparse, json, os, signal, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evidence  # noqa: E402  (bench/evidence.py)

def call(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if r.headers.get("Content-Type", "").startswith("application/json") else raw.decode())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def wait_done(port, job_id, limit):
    t0 = time.time()
    while time.time() - t0 < limit:
        _, s = call(port, "GET", f"/v1/videos/{job_id}")
        if s["status"] in ("succeeded", "failed", "cancelled"):
            return s
        time.sleep(0.2)
    raise SystemExit(f"job {job_id} not finished after {limit} s")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vortex", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--evidence", help="append the evidence row to this .jsonl")
    a = ap.parse_args()
    data = tempfile.mkdtemp(prefix="vortex-serve-")
    srv = subprocess.Popen([a.vortex, "serve", "--config", "h3", "--synthetic", "--backend", "cuda",
                            "--port", str(a.port), "--data", data], stdout=sys.stdout, stderr=sys.stderr)
    ev = {"request": {"width": 1344, "height": 768, "frames": 124, "steps": a.steps, "seed": 42,
                      "prompt": "a red fox running through snow"}}
    try:
        t0 = time.time()
        while True:
            try:
                code, h = call(a.port, "GET", "/health")
                if code == 200:
                    break
            except OSError:
                pass
            if srv.poll() is not None or time.time() - t0 > 300:
                raise SystemExit("server did not come up")
            time.sleep(0.5)
        ev["startup_seconds"] = time.time() - t0
        ev["health"] = h
        jobs = []
        for i in range(2):
            code, s = call(a.port, "POST", "/v1/videos", ev["request"])
            assert code == 201, (code, s)
            jobs.append(wait_done(a.port, s["id"], 900))
        code, s = call(a.port, "POST", "/v1/videos", ev["request"])
        assert code == 201, (code, s)
        while True:  # cancel once two steps have run
            _, st = call(a.port, "GET", f"/v1/videos/{s['id']}")
            if st["status"] == "running" and (st.get("step") or 0) >= 2:
                break
            time.sleep(0.05)
        t_cancel = time.time()
        call(a.port, "DELETE", f"/v1/videos/{s['id']}")
        cancelled = wait_done(a.port, s["id"], 120)
        cancelled["client_seconds_to_terminal"] = time.time() - t_cancel
        jobs.append(cancelled)
        ev["jobs"] = jobs
        ev["metrics"] = call(a.port, "GET", "/metrics")[1]
        second = jobs[1]["timing"]
        ev["second_job_overhead_fraction"] = (second["wall_seconds"] - second["sampling_seconds"]) / second["sampling_seconds"]
        ev["cancel_latency_seconds"] = cancelled["timing"].get("cancel_latency_seconds")
        if a.evidence:
            gpu = evidence.command_output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).split("\n")[0]
            h = ev["health"]
            r = evidence.row(evidence.environment(gpu=gpu), f"serve canonical job 1344x768x124 {a.steps} steps",
                             "vortex serve (resident model, second job)", [1e3 * t for t in second["step_seconds"]],
                             config=f"precision={h.get('precision')} attention={h.get('attention')}",
                             wall_seconds=second["wall_seconds"], sampling_seconds=second["sampling_seconds"],
                             second_job_overhead_fraction=ev["second_job_overhead_fraction"],
                             cancel_latency_seconds=ev["cancel_latency_seconds"])
            evidence.append_jsonl(a.evidence, [r])
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            ev["server_exit_code"] = srv.wait(timeout=120)
        except subprocess.TimeoutExpired:
            srv.kill()
            ev["server_exit_code"] = "killed"
        with open(a.out, "w") as fh:
            json.dump(ev, fh, indent=1)
    print(json.dumps({k: ev.get(k) for k in ("startup_seconds", "second_job_overhead_fraction", "cancel_latency_seconds",
                                               "server_exit_code")}))
    for j in ev.get("jobs", []):
        print(j["id"], j["status"], {k: j["timing"].get(k) for k in ("wall_seconds", "sampling_seconds", "cancel_latency_seconds")})

if __name__ == "__main__":
    main()

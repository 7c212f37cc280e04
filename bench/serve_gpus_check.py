#!/usr/bin/env python3
"""`vortex serve --gpus N` against a plain one-GPU `vortex generate` of the same request (docs/multi_gpu.md).

On h3-tiny synthetic weights: writes one text_embeddings file (random F32 rows), runs
`vortex generate --backend cuda --text-embeddings FILE` (one GPU, no world), then starts
`vortex serve --backend cuda --gpus N`, uploads the same file with the same request, fetches the served
video and audio latents and run.json, and compares them byte for byte with generate's. Then SIGTERM to the
launcher: every rank must stop and the launcher exit 0. Writes OUT/serve_gpus_check.json and prints a table;
exits 1 on any mismatch or failure. Standard library only.
Usage: bench/serve_gpus_check.py OUT [--gpus 1] [--vortex build/bin/vortex] [--steps 3]
  (--gpus 0 --backend cpu: the same check of a plain one-device server, a dry run without a GPU)
"""
import argparse, hashlib, json, os, queue, random, re, signal, struct, subprocess, sys, threading, time, urllib.request


def call(port, method, path, body=None, content_type="application/json"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                 headers={"Content-Type": content_type} if body is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def write_text_embeddings(path, rows, dim, seed):
    rng = random.Random(seed)
    data = struct.pack(f"<{rows * dim}f", *[rng.gauss(0.0, 1.0) for _ in range(rows * dim)])
    header = json.dumps({"text": {"dtype": "F32", "shape": [rows, dim], "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


def multipart(request, upload):
    boundary = "vortex%016x" % random.getrandbits(64)
    parts = [(f'--{boundary}\r\nContent-Disposition: form-data; name="request"\r\n'
              'Content-Type: application/json\r\n\r\n').encode() + json.dumps(request).encode() + b"\r\n",
             (f'--{boundary}\r\nContent-Disposition: form-data; name="text_embeddings"; '
              'filename="text.safetensors"\r\nContent-Type: application/octet-stream\r\n\r\n').encode() + upload + b"\r\n",
             f"--{boundary}--\r\n".encode()]
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--vortex", default="build/bin/vortex")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--backend", default="cuda")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    seed = random.getrandbits(48)
    text = os.path.join(a.out, "text.safetensors")
    write_text_embeddings(text, 8, 128, seed)  # h3-tiny text_dim 128
    size = {"width": 64, "height": 64, "frames": 5, "steps": a.steps, "seed": seed}
    report = {"gpus": a.gpus, "request": size, "checks": {}}
    ok = True

    gen_dir = os.path.join(a.out, "generate")
    cmd = [a.vortex, "generate", "--config", "h3-tiny", "--synthetic", "--backend", a.backend, "--text-embeddings", text,
           "--width", "64", "--height", "64", "--frames", "5", "--steps", str(a.steps), "--seed", str(seed),
           "--out", gen_dir, "--overwrite", "--quiet"]
    g = subprocess.run(cmd, capture_output=True, text=True)
    if g.returncode != 0:
        sys.exit(f"vortex generate failed ({g.returncode}): {g.stderr[-2000:]}")
    ref = {v: open(os.path.join(gen_dir, f"{v}.safetensors"), "rb").read() for v in ("video_latents", "audio_latents")}

    log = open(os.path.join(a.out, "serve.log"), "w")
    world = ["--gpus", str(a.gpus), "--comm-timeout", "120"] if a.gpus > 0 else []
    serve = subprocess.Popen([a.vortex, "serve", "--config", "h3-tiny", "--synthetic", "--backend", a.backend, "--port",
                              "0", "--data", os.path.join(a.out, "data")] + world,
                             stdout=subprocess.PIPE, stderr=log, text=True)
    lines = queue.Queue()  # stdout lines, read on a thread so a silent server cannot block the deadline
    threading.Thread(target=lambda: [lines.put(l) for l in serve.stdout], daemon=True).start()
    port = None
    t0 = time.time()
    try:
        while port is None and time.time() - t0 < 300:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                if serve.poll() is not None:
                    raise RuntimeError(f"vortex serve exited {serve.returncode} before listening (see serve.log)")
                continue
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            port = int(m.group(1)) if m else None
        if port is None:
            raise RuntimeError("vortex serve did not print its address within 300 s")
        status, body = call(port, "GET", "/health")
        health = json.loads(body)
        report["health"] = health
        report["checks"]["health world_size"] = health.get("world_size") == max(a.gpus, 1)
        data, ctype = multipart(size, open(text, "rb").read())
        status, body = call(port, "POST", "/v1/videos", data, ctype)
        if status != 201:
            raise RuntimeError(f"POST /v1/videos: {status} {body[:500]!r}")
        job = json.loads(body)["id"]
        while True:
            _, body = call(port, "GET", f"/v1/videos/{job}")
            j = json.loads(body)
            if j["status"] in ("succeeded", "failed", "cancelled"):
                break
            if time.time() - t0 > 600:
                raise RuntimeError(f"job {job} still {j['status']} after 600 s")
            time.sleep(0.2)
        report["job"] = {"status": j["status"], "error": j["error"], "timing": j["timing"]}
        report["checks"]["job succeeded"] = j["status"] == "succeeded"
        if j["status"] == "succeeded":
            for v in ("video_latents", "audio_latents"):
                _, served = call(port, "GET", f"/v1/videos/{job}/content?variant={v}")
                report[v] = {"served_sha256": sha(served), "generate_sha256": sha(ref[v])}
                report["checks"][f"{v} bytes == generate"] = served == ref[v]
            _, run = call(port, "GET", f"/v1/videos/{job}/content?variant=run_json")
            got = json.loads(run).get("world", {})
            report["run_json_world"] = got
            want = ({"world_size": a.gpus, "parallelism": "ulysses", "communicator": "nccl"} if a.gpus > 0 else
                    {"world_size": 1, "parallelism": "none", "communicator": None})
            report["checks"]["run.json world"] = got == want
            gen_world = json.load(open(os.path.join(gen_dir, "run.json"))).get("world", {})
            report["checks"]["generate run.json world_size 1"] = gen_world.get("world_size") == 1
    except Exception as e:  # noqa: BLE001  (reported, then the server is stopped)
        report["error"] = str(e)
        ok = False
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            code = serve.wait(timeout=120)
        except subprocess.TimeoutExpired:
            serve.kill()
            code = "killed after 120 s"
        report["checks"]["SIGTERM: launcher exits 0"] = code == 0
        report["serve_exit"] = code
    ok = ok and all(report["checks"].values())
    report["ok"] = ok
    with open(os.path.join(a.out, "serve_gpus_check.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(f"vortex serve --gpus {a.gpus} vs vortex generate (h3-tiny 64x64x5, {a.steps} steps, seed {seed})")
    for k, v in report["checks"].items():
        print(f"  {'ok  ' if v else 'FAIL'}  {k}")
    if "error" in report:
        print("  error:", report["error"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

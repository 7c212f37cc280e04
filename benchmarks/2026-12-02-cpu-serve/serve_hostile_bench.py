#!/usr/bin/env python3
"""Issue 26's targets measured on `vortex serve --synthetic --config h3-tiny` (CPU, loopback), as a
process, with raw-socket clients (stdlib only). Writes results.json and serve-*.log next to itself.

Usage: serve_hostile_bench.py PATH/TO/vortex [--corpus fuzz/corpus/http_request]

Measured: crashes over malformed inputs (the parser corpus and seeded mutations of it); /health latency
with 64 slowloris connections and 32 SSE clients that never read; RSS growth under 16 oversized heads
plus 16 oversized bodies; finished jobs reachable after a restart; leftovers after a crash (SIGKILL)
and the restart's reconciliation; cancel latency of a large job; SIGTERM exit time with slow clients.
"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def start(vortex, data, extra=(), log_name="serve.log"):
    log = open(os.path.join(HERE, log_name), "ab")
    p = subprocess.Popen([vortex, "serve", "--synthetic", "--config", "h3-tiny", "--threads", "2", "--data", data,
                          "--port", "0", *extra], stdout=subprocess.PIPE, stderr=log)
    for line in p.stdout:
        s = line.decode()
        if "listening on http://127.0.0.1:" in s:
            return p, int(s.rsplit(":", 1)[1])
    raise RuntimeError("vortex serve did not start")


def raw(port, data, timeout=5.0, half_close=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if half_close:  # the server sees the end of the input at once (an incomplete head is then dropped)
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            out += b
        return out
    except (ConnectionResetError, BrokenPipeError):
        return b""
    finally:
        s.close()


def request(port, method, path, body=None):
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if body is not None:
        b = json.dumps(body).encode()
        head += f"Content-Type: application/json\r\nContent-Length: {len(b)}\r\n"
    else:
        b = b""
    r = raw(port, head.encode() + b"\r\n" + b)
    status = int(r[9:12]) if r.startswith(b"HTTP/1.1 ") else 0
    text = r.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in r else b""
    try:
        return status, json.loads(text)
    except ValueError:
        return status, None


def health_ms(port):
    t = time.perf_counter()
    st, _ = request(port, "GET", "/health")
    return (time.perf_counter() - t) * 1000, st


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def wait_state(port, jid, pred, timeout=120):
    t = time.time()
    while time.time() - t < timeout:
        st, j = request(port, "GET", f"/v1/videos/{jid}")
        if st == 200 and pred(j):
            return j
        time.sleep(0.05)
    return None


def job(steps=2, w=64, h=64, frames=5, seed=1):
    return {"prompt": "a lighthouse at dusk", "width": w, "height": h, "frames": frames, "steps": steps, "seed": seed}


def malformed(vortex, corpus, res):
    data = tempfile.mkdtemp(prefix="vortex_bench_")
    # Mutations of the corpus's valid POST create jobs: cancel them at the end rather than finish them.
    p, port = start(vortex, data, extra=("--on-sigterm", "cancel"), log_name="serve-malformed.log")
    seeds = [open(os.path.join(corpus, f), "rb").read() for f in sorted(os.listdir(corpus))]
    rng = random.Random(26)
    sent = 0
    for i in range(3000):
        s = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(0, 4)):
            if not s:
                break
            at = rng.randrange(len(s))
            op = rng.randrange(3)
            if op == 0:
                s[at] = rng.randrange(256)
            elif op == 1:
                del s[at:at + rng.randint(1, 8)]
            else:
                s[at:at] = bytes([rng.randrange(256)])
        raw(port, bytes(s), timeout=2.0, half_close=True)
        sent += 1
    for path in ["/%FF", "/" + "%C3%A9" * 63 + "%C3", "/v1/videos/%FF", "/v1/videos/x/content?variant=%FF"]:
        request(port, "GET", path)
        sent += 1
    st, _ = request(port, "GET", "/health")
    _, jobs = request(port, "GET", "/v1/videos")
    res["malformed"] = {"inputs": sent, "process_alive": p.poll() is None, "health_after": st,
                        "jobs_created_by_valid_mutations": len(jobs["data"]) if jobs else None,
                        "crashes": 0 if p.poll() is None and st == 200 else 1}
    p.send_signal(signal.SIGTERM)
    p.wait(30)


def slow_clients(vortex, res):
    data = tempfile.mkdtemp(prefix="vortex_bench_")
    p, port = start(vortex, data, log_name="serve-slow.log")
    st, j = request(port, "POST", "/v1/videos", job(steps=1000))
    jid = j["id"]
    wait_state(port, jid, lambda j: j["status"] == "running")
    slow = []
    for _ in range(64):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"G")
        slow.append(s)
    sse = []
    for _ in range(32):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET /v1/videos/{jid}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        sse.append(s)
    stop = threading.Event()

    def drip():
        while not stop.is_set():
            for s in slow:
                try:
                    s.send(b"E")
                except OSError:
                    pass
            time.sleep(1.0)

    t = threading.Thread(target=drip)
    t.start()
    lat = []
    for _ in range(200):
        ms, st = health_ms(port)
        if st == 200:
            lat.append(ms)
        time.sleep(0.02)
    stop.set()
    t.join()
    lat.sort()
    d0 = time.perf_counter()
    st_del, _ = request(port, "DELETE", f"/v1/videos/{jid}")
    del_ms = (time.perf_counter() - d0) * 1000
    res["health_under_slow_clients"] = {
        "slowloris": 64, "sse_never_read": 32, "requests": 200, "answered_200": len(lat),
        "p50_ms": lat[len(lat) // 2], "p99_ms": lat[int(len(lat) * 0.99) - 1], "max_ms": lat[-1],
        "delete_status": st_del, "delete_ms": del_ms}
    for s in slow + sse:
        s.close()
    p.send_signal(signal.SIGTERM)
    p.wait(30)
    # SIGTERM with slow clients connected and a job running: --drain-timeout 3; finish mode (the job outlasts
    # the drain: hard exit) and cancel mode.
    finish_s, rc = sigterm_exit(vortex, data, ("--drain-timeout", "3"), 3)
    cancel_s, rc2 = sigterm_exit(vortex, data, ("--drain-timeout", "3", "--on-sigterm", "cancel"), 4)
    res["sigterm_with_slow_clients"] = {
        "drain_timeout_s": 3, "finish_mode_exit_s": finish_s, "finish_mode_rc": rc,
        "cancel_mode_exit_s": cancel_s, "cancel_mode_rc": rc2}


def sigterm_exit(vortex, data, extra, seed):
    """Seconds from SIGTERM to exit, and the exit code, with a job running and 64 slow clients connected."""
    p, port = start(vortex, data, extra=extra, log_name="serve-slow.log")
    st, j = request(port, "POST", "/v1/videos", job(steps=1000, seed=seed))
    wait_state(port, j["id"], lambda j: j["status"] == "running")
    slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(64)]
    for s in slow:
        s.sendall(b"GE")
    t0 = time.perf_counter()
    p.send_signal(signal.SIGTERM)
    rc = p.wait(30)
    seconds = time.perf_counter() - t0
    for s in slow:
        s.close()
    return seconds, rc


def oversized(vortex, res):
    data = tempfile.mkdtemp(prefix="vortex_bench_")
    p, port = start(vortex, data, log_name="serve-oversized.log")
    time.sleep(0.5)
    before = rss_mb(p.pid)
    peak = [before]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb(p.pid))
            time.sleep(0.005)

    chunk = b"h" * (1 << 20)
    outcomes = []

    def head_flood():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            s.sendall(b"GET / HTTP/1.1\r\nX: ")
            for _ in range(1024):  # up to 1 GB of header line
                s.sendall(chunk)
        except OSError:
            pass
        try:
            outcomes.append(s.recv(64)[:12])
        except OSError:
            outcomes.append(b"reset")
        s.close()

    def body_flood():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            s.sendall(b"POST /v1/videos HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 62914560\r\n\r\n")
            for _ in range(60):
                s.sendall(chunk)
        except OSError:
            pass
        try:
            outcomes.append(s.recv(64)[:12])
        except OSError:
            outcomes.append(b"reset")
        s.close()

    th = threading.Thread(target=sample)
    th.start()
    ts = [threading.Thread(target=head_flood) for _ in range(16)] + [threading.Thread(target=body_flood) for _ in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stop.set()
    th.join()
    st, _ = request(port, "GET", "/health")
    res["oversized"] = {"clients": 32, "rss_before_mb": before, "rss_peak_mb": peak[0],
                        "rss_growth_mb": peak[0] - before,
                        "answers": sorted(set(o.decode(errors="replace") for o in outcomes)), "health_after": st}
    p.send_signal(signal.SIGTERM)
    p.wait(30)


def restart_and_cancel(vortex, res):
    data = tempfile.mkdtemp(prefix="vortex_bench_")
    p, port = start(vortex, data, log_name="serve-restart.log")
    ids = []
    for i in range(8):
        st, j = request(port, "POST", "/v1/videos", job(seed=i))
        ids.append(j["id"])
    for jid in ids:
        wait_state(port, jid, lambda j: j["status"] in ("succeeded", "failed", "cancelled"))
    # Cancel of a large job: one CPU step of it takes longer than the target.
    st, big = request(port, "POST", "/v1/videos", job(steps=2, w=1024, h=576, frames=46, seed=9))
    wait_state(port, big["id"], lambda j: j["phase"] == "sampling", timeout=300)
    time.sleep(1.0)
    t0 = time.perf_counter()
    request(port, "DELETE", f"/v1/videos/{big['id']}")
    j = wait_state(port, big["id"], lambda j: j["status"] in ("cancelled", "failed", "succeeded"), timeout=600)
    res["cancel_large_job"] = {"request": big["request"], "status": j["status"],
                               "cancel_latency_seconds": j["timing"]["cancel_latency_seconds"],
                               "observed_s": time.perf_counter() - t0, "cancel_at_step": j["timing"]["cancel_at_step"]}
    # A crash mid-job: SIGKILL while a job runs, then restart.
    st, crash = request(port, "POST", "/v1/videos", job(steps=1000, seed=10))
    wait_state(port, crash["id"], lambda j: j["step"] >= 1)
    p.send_signal(signal.SIGKILL)
    p.wait(30)
    partial_before = sum(1 for r, d, f in os.walk(data) if os.path.basename(r) == "output.partial")
    p, port = start(vortex, data, log_name="serve-restart.log")
    reachable = sum(1 for jid in ids if request(port, "GET", f"/v1/videos/{jid}")[1]["status"] == "succeeded")
    content_ok = sum(1 for jid in ids if request(port, "GET", f"/v1/videos/{jid}/content?variant=run_json")[0] == 200)
    st, c = request(port, "GET", f"/v1/videos/{crash['id']}")
    orphans = [os.path.join(r, x) for r, d, f in os.walk(data) for x in d + f
               if x == "output.partial" or x.endswith(".tmp")]
    res["restart"] = {"finished_before": len(ids), "reachable_after": reachable, "content_after": content_ok,
                      "crashed_job_status": c["status"], "crashed_job_error": c["error"],
                      "output_partial_before_restart": partial_before, "orphans_after": len(orphans)}
    p.send_signal(signal.SIGTERM)
    p.wait(60)


def main():
    vortex = sys.argv[1]
    corpus = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--corpus" else os.path.join(
        HERE, "..", "..", "fuzz", "corpus", "http_request")
    res = {"machine": os.uname().nodename, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for step in (malformed, slow_clients, oversized, restart_and_cancel):
        t = time.time()
        if step is malformed:
            step(vortex, corpus, res)
        else:
            step(vortex, res)
        print(step.__name__, f"{time.time() - t:.1f} s", flush=True)
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(res, f, indent=2)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()

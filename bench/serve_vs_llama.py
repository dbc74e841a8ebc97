#!/usr/bin/env python3
"""Requests per second of `fgemma serve` and llama.cpp's `llama-server` doing the same work, at
several numbers of concurrent clients (docs/benchmarks.md, "fgemma serve under load").

  bench/serve_vs_llama.py --fgemma build/fgemma \
      --llama-server build/llama.cpp/cmake/bin/llama-server -m MODEL.gguf \
      [--catalog examples/smart_home.json] [--clients 1,8] [-n 48] [-t 2] [--parallel 8]

The same work on both servers, per request of bench/serve_load.py's REQUESTS on the catalog:
  * fgemma: POST /v1/chat/completions with the catalog's tools and `tool_choice: required`
    (the real path: prompt, grammar, prefix cache, the call checked);
  * llama-server: POST /completion with fgemma's prompt token ids for that request (from
    `fgemma bench --tools --json`) and `n_predict` = the tokens fgemma generated for it (greedy,
    `ignore_eos`, `cache_prompt`: each slot keeps the catalog prefix it evaluated last; no
    grammar, which only favours llama-server).
Each server is started once (`--parallel P`, `-t T` threads; fgemma batched unless
--fgemma-args says otherwise), warmed with one untimed round of `max(clients)` concurrent
requests (so every slot holds the catalog prefix), then each client count runs `-n` requests
from that many threads; a row gives requests/s over the wall time and the median latency.
Checks: every fgemma answer is a 200 with a tool call, every llama-server answer a 200 with
exactly `n_predict` tokens. Standard library only; prints a markdown table, or --json rows.
"""
import argparse
import http.client
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def serve_load_requests():
    spec = importlib.util.spec_from_file_location("serve_load", os.path.join(HERE, "serve_load.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.REQUESTS


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, port, name):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}: {' '.join(cmd)}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            pass
        if time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"{name} did not become healthy in 180 s")
        time.sleep(0.2)


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def post(port, path, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    return time.perf_counter() - t0, r.status, data


def run_round(port, bodies, clients, check, timeout):
    """Sends every body once from `clients` threads; returns (wall s, latencies, failures)."""
    lock = threading.Lock()
    todo = list(range(len(bodies)))
    lat, failures = [], []

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            path, body, want = bodies[i]
            try:
                s, status, data = post(port, path, body, timeout)
                why = check(status, data, want)
            except OSError as e:
                s, why = 0.0, f"{type(e).__name__}: {e}"
            with lock:
                lat.append(s)
                if why:
                    failures.append(why)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, lat, failures


def check_fgemma(status, data, _):
    if status != 200:
        return f"fgemma: HTTP {status}: {data[:200]!r}"
    msg = json.loads(data)["choices"][0]["message"]
    return None if msg.get("tool_calls") else f"fgemma: no tool call: {data[:200]!r}"


def check_llama(status, data, n):
    if status != 200:
        return f"llama-server: HTTP {status}: {data[:200]!r}"
    got = json.loads(data).get("tokens_predicted")
    return None if got == n else f"llama-server: {got} tokens, wanted {n}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fgemma", default=os.path.join(HERE, "..", "build", "fgemma"))
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("-m", "--model", required=True, help="the GGUF both servers run")
    ap.add_argument("--catalog", default=os.path.join(HERE, "..", "examples", "smart_home.json"))
    ap.add_argument("--clients", default="1,8", help="concurrent clients, comma-separated")
    ap.add_argument("-n", type=int, default=48, help="timed requests per client count")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=8, help="slots of both servers")
    ap.add_argument("--fgemma-args", default="", help="more fgemma serve flags")
    ap.add_argument("--only", choices=["fgemma", "llama"], help="run one server only")
    ap.add_argument("--timeout", type=float, default=900, help="per request, seconds")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.n < 1 or a.threads < 1 or a.parallel < 1:
        ap.error("-n, -t and --parallel must be >= 1")
    try:
        clients = [int(c) for c in a.clients.split(",")]
    except ValueError:
        ap.error("--clients takes numbers, e.g. 1,8")
    if not clients or min(clients) < 1:
        ap.error("--clients must be >= 1")
    requests = serve_load_requests()
    with open(a.catalog) as f:
        cat = json.load(f)
    tools = cat["tools"] if isinstance(cat, dict) else cat

    # fgemma's prompt and output token ids per request (its warm call).
    work = {}
    for q in requests:
        p = subprocess.run([a.fgemma, "bench", "-m", a.model, "--tools", a.catalog, "--request", q,
                            "-p", "", "-n", "", "-r", "1", "-t", str(a.threads), "--json"],
                           capture_output=True, text=True, check=True)
        row = [r for r in json.loads(p.stdout) if r["test"] == "ttc_warm"][0]
        work[q] = (row["prompt_ids"], len(row["output_ids"]))
    print(f"work: {len(requests)} requests, prompt {min(len(w[0]) for w in work.values())}-"
          f"{max(len(w[0]) for w in work.values())} tokens, output "
          f"{min(w[1] for w in work.values())}-{max(w[1] for w in work.values())} tokens",
          file=sys.stderr)

    def bodies(kind, n, offset):
        out = []
        for i in range(n):
            q = requests[(i + offset) % len(requests)]
            if kind == "fgemma":
                out.append(("/v1/chat/completions",
                            {"messages": [{"role": "user", "content": q}], "tools": tools,
                             "tool_choice": "required"}, None))
            else:
                ids, n_out = work[q]
                out.append(("/completion",
                            {"prompt": ids, "n_predict": n_out, "temperature": 0, "top_k": 1,
                             "ignore_eos": True, "cache_prompt": True, "stream": False}, n_out))
        return out

    servers = []
    if a.only != "llama":
        port = free_port()
        servers.append(("fgemma serve", port, check_fgemma, "fgemma",
                        [a.fgemma, "serve", "-m", a.model, "--port", str(port), "--parallel",
                         str(a.parallel), "-t", str(a.threads)] + a.fgemma_args.split()))
    if a.only != "fgemma":
        port = free_port()
        servers.append(("llama-server", port, check_llama, "llama",
                        [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port",
                         str(port), "--parallel", str(a.parallel), "-c",
                         str(1024 * a.parallel), "-t", str(a.threads), "-tb", str(a.threads),
                         "--no-webui"]))
    rows = []
    ok = True
    for name, port, check, kind, cmd in servers:
        proc = start(cmd, port, name)
        try:
            run_round(port, bodies(kind, max(clients), 0), max(clients), check, a.timeout)
            for c in clients:
                wall, lat, failures = run_round(port, bodies(kind, a.n, c), c, check, a.timeout)
                ok = ok and not failures
                for f in failures[:3]:
                    print(f"{name}: {f}", file=sys.stderr)
                rows.append({"server": name, "clients": c, "requests": a.n,
                             "failed": len(failures), "wall_s": round(wall, 3),
                             "req_per_s": round(a.n / wall, 3),
                             "p50_latency_s": round(statistics.median(lat), 3),
                             "threads": a.threads, "parallel": a.parallel,
                             "command": " ".join(cmd)})
                print(f"{name}: {c} clients: {a.n / wall:.3f} req/s", file=sys.stderr)
        finally:
            stop(proc)
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        print("| server | clients | requests | failed | req/s | p50 latency s |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['server']} | {r['clients']} | {r['requests']} | {r['failed']} | "
                  f"{r['req_per_s']} | {r['p50_latency_s']} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Time to call on llama.cpp's own llama-server, replaying a `fgemma bench --tools ... --json` run.

  bench/server_ttc.py --server BUILD/llama.cpp/cmake/bin/llama-server -m MODEL.gguf \
      --ttc FGEMMA_BENCH.json [-r 5] > rows.json

For each ttc row (catalog, threads) it starts llama-server on a free loopback port (one slot,
that many threads, `-c 2048 -b 512 -ub 512`, the web UI off), and times, from the client, POST
/completion with fgemma's prompt token ids and `n_predict` = the number of tokens fgemma wrote
(greedy, `ignore_eos`, so llama.cpp decodes as many tokens as fgemma did; no grammar):
  ttc_cold: `cache_prompt: false`, the whole prompt is evaluated;
  ttc_warm: before each timed request, an untimed one with the catalog prefix alone (the
            prompt's first `prefix_tokens` ids) leaves that prefix in the slot; the timed request
            (`cache_prompt: true`) reuses it and evaluates the request part only, as fgemma's
            warm call does.
The server's own `timings.prompt_n` (tokens evaluated) is checked, so a warm row that did not reuse
the prefix is an error, not a fast number. One warm-up request per row is not timed. Prints rows in
bench/llama_bench.py --ttc's format (bench/summarize.py reads them). Standard library only.
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, threads):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
             "-t", str(threads), "-tb", str(threads), "-c", "2048", "-b", "512", "-ub", "512",
             "--parallel", "1", "--no-webui"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("llama-server did not become healthy in 120 s")
            time.sleep(0.2)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)

    def complete(self, prompt, n_predict, cache_prompt):
        body = json.dumps({"prompt": prompt, "n_predict": n_predict, "temperature": 0,
                           "top_k": 1, "ignore_eos": True, "cache_prompt": cache_prompt,
                           "stream": False})
        t0 = time.perf_counter()
        self.conn.request("POST", "/completion", body, {"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        data = resp.read()
        ms = (time.perf_counter() - t0) * 1e3
        if resp.status != 200:
            raise RuntimeError(f"llama-server: HTTP {resp.status}: {data[:200]!r}")
        return ms, json.loads(data)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="llama-server binary")
    ap.add_argument("-m", "--model", required=True, help="the GGUF fgemma ran")
    ap.add_argument("--ttc", required=True, help="fgemma bench --tools ... --json output")
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    args = ap.parse_args()
    if args.repetitions < 1:
        ap.error("-r must be >= 1")
    rows = [r for r in json.load(open(args.ttc)) if r.get("test", "").startswith("ttc_")]
    if not rows:
        sys.exit(f"{args.ttc}: no ttc rows (run fgemma bench with --tools ... --json)")
    results = []
    servers = {}
    try:
        for row in rows:
            threads = row["threads"]
            if threads not in servers:
                servers[threads] = Server(args.server, args.model, threads)
            srv = servers[threads]
            prompt, n_out = row["prompt_ids"], len(row["output_ids"])
            prefix = row["prefix_tokens"]
            warm = row["test"] == "ttc_warm"
            times, evaluated = [], []
            for r in range(-1, args.repetitions):  # r = -1: warm-up
                if warm:
                    srv.complete(prompt[:prefix], 0, True)
                    ms, out = srv.complete(prompt, n_out, True)
                else:
                    ms, out = srv.complete(prompt, n_out, False)
                t = out.get("timings", {})
                if out.get("tokens_predicted", n_out) != n_out:
                    raise RuntimeError(f"llama-server predicted {out.get('tokens_predicted')} "
                                       f"tokens, not {n_out}")
                n_eval = t.get("prompt_n", -1)
                want = len(prompt) - prefix if warm else len(prompt)
                # llama-server re-evaluates the last cached token when the whole prompt matches;
                # allow that one token either way.
                if abs(n_eval - want) > 1:
                    raise RuntimeError(f"{row['test']}: llama-server evaluated {n_eval} prompt "
                                       f"tokens, expected {want}")
                if r >= 0:
                    times.append(ms)
                    evaluated.append(n_eval)
            med = statistics.median(times)
            results.append({"engine": "llama.cpp (llama-server)",
                            "model": os.path.basename(args.model), "test": row["test"],
                            "catalog": row["catalog"], "threads": threads,
                            "repetitions": args.repetitions, "ms": med,
                            "stddev_ms": statistics.stdev(times) if len(times) > 1 else 0.0,
                            "samples_ms": times, "prompt_tokens": len(prompt),
                            "prompt_tokens_evaluated": evaluated,
                            "generated_tokens": n_out})
            print(f"llama-server {row['test']} {row['catalog']} t={threads}: {med:.1f} ms",
                  file=sys.stderr)
    finally:
        for s in servers.values():
            s.close()
    json.dump(results, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

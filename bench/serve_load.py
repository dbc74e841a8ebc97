#!/usr/bin/env python3
"""Bounded load test of `fgemma serve` (docs/serve.md), standard library only.

Sends N chat requests from C concurrent clients on loopback, a fraction of them malformed and a
fraction from clients that hang up mid-request, then checks:
  * every good request got 200 and the same call as a lone `fgemma call` (one `fgemma call
    --repl` process answers each distinct request once, on the same catalog);
  * every malformed one got a 4xx with an OpenAI-shaped error;
  * the server is alive afterwards, no slot or queue entry is left busy (/metrics), and its
    resident memory (VmRSS, VmHWM from /proc) before and after.
It stops by itself: N requests, each with a timeout. Exit 1 when a check fails.

  bench/serve_load.py --fgemma build/fgemma -m MODEL -n 500 -c 32      # starts its own server
  bench/serve_load.py --url http://127.0.0.1:8080 --pid PID ...        # an already running one
  bench/serve_load.py --url http://127.0.0.1:8081 --no-check ...       # e.g. llama-server
"""
import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

REQUESTS = [
    "turn the light on in the kitchen", "switch off the bedroom lights",
    "dim the living room light to 30 percent", "set the thermostat to 21 degrees",
    "make it warmer, 23 degrees in the hall", "set a timer for ten minutes",
    "start a 5 minute timer for the pasta", "cancel my timer", "play some jazz",
    "play the news on the kitchen speaker", "pause the music", "skip this song",
    "turn the garage light on", "set the heating to eco mode at 19", "stop the timer",
    "put on relaxing music in the bedroom", "lights off in the office please",
    "I want 20 degrees in the living room", "resume the podcast", "turn up the volume",
]


def malformed(tools, i):
    """The i-th kind of bad request: (body bytes, expected status or None for any 4xx)."""
    good = {"messages": [{"role": "user", "content": "lights on"}], "tools": tools}
    kinds = [
        (b"{not json", 400),
        (json.dumps({"tools": tools}).encode(), 400),  # no messages
        (json.dumps(dict(good, tool_choice="sometimes")).encode(), 400),
        (json.dumps(dict(good, max_tokens=10 ** 9)).encode(), 400),
        (json.dumps(dict(good, messages=[{"role": "user", "content": "   "}])).encode(), 400),
        (json.dumps(dict(good, tools=[])).encode(), 400),
        (json.dumps(dict(good, tool_choice={"type": "function",
                                            "function": {"name": "nope"}})).encode(), 400),
        (json.dumps(dict(good, messages=[{"role": "wizard", "content": "x"}])).encode(), 400),
        (b"[" * 100000, 400),
        (json.dumps(dict(good, messages=[{"role": "user", "content": "x" * (2 << 20)}])).encode(),
         413),
        (json.dumps(dict(good, temperature="hot")).encode(), 400),
        (bytes(random.Random(i).getrandbits(8) for _ in range(300)), 400),
    ]
    return kinds[i % len(kinds)]


def post(url, path, body, headers, timeout):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request("POST", path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def get(url, path, headers, timeout=30):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def hang_up(url, path, body, headers):
    """Sends a streamed request and closes the connection without reading the answer."""
    u = urllib.parse.urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    head = f"POST {path} HTTP/1.1\r\nHost: {u.hostname}\r\nContent-Type: application/json\r\n"
    for k, v in headers.items():
        if k.lower() != "content-type":
            head += f"{k}: {v}\r\n"
    head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    s.sendall(head.encode() + body)
    s.close()


def proc_mem(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS", "VmHWM")):
                    k, v = line.split(":")
                    out[k] = int(v.split()[0]) // 1024
    except OSError:
        pass
    return out


def lone_answers(fgemma, model, catalog, requests):
    p = subprocess.run([fgemma, "call", "-m", model, "--tools", catalog, "--repl"],
                       input="\n".join(requests) + "\n", capture_output=True, text=True,
                       check=True)
    lines = p.stdout.strip().split("\n")
    return {q: json.loads(line) for q, line in zip(requests, lines)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", help="a running server (else one is started with --fgemma)")
    ap.add_argument("--pid", type=int, help="the running server's pid (for its memory)")
    ap.add_argument("--fgemma", default="build/fgemma")
    ap.add_argument("-m", "--model", default=os.environ.get("FGEMMA_MODEL", ""))
    ap.add_argument("--catalog", default="examples/smart_home.json")
    ap.add_argument("--serve-args", default="--parallel 4", help="flags for fgemma serve")
    ap.add_argument("-n", type=int, default=500, help="requests (default 500)")
    ap.add_argument("-c", type=int, default=32, help="concurrent clients (default 32)")
    ap.add_argument("--bad", type=float, default=0.1, help="malformed fraction (default 0.1)")
    ap.add_argument("--hangups", type=float, default=0.02,
                    help="fraction sent by clients that hang up at once (default 0.02)")
    ap.add_argument("--no-check", action="store_true",
                    help="do not compare answers with fgemma call (another server)")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--model-name", default="fgemma", help="the request's model field")
    ap.add_argument("--timeout", type=float, default=600, help="per request, seconds")
    ap.add_argument("--max-tokens", type=int, default=0,
                    help="max_tokens of good requests (default: none, the server's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    a = ap.parse_args()

    with open(a.catalog) as f:
        tools = json.load(f)["tools"]
    server = None
    url, pid = a.url, a.pid
    if url is None:
        if not a.model:
            sys.exit("serve_load: -m MODEL (or $FGEMMA_MODEL) or --url is needed")
        cmd = [a.fgemma, "serve", "-m", a.model, "--port", "0"] + a.serve_args.split()
        if a.api_key:
            cmd += ["--api-key", a.api_key]
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = server.stdout.readline()
        if "listening on" not in line:
            sys.exit(f"serve_load: the server did not start: {line!r}")
        url = line.split("listening on ")[1].split()[0]
        pid = server.pid
    headers = {"Content-Type": "application/json"}
    if a.api_key:
        headers["Authorization"] = f"Bearer {a.api_key}"

    expected = {}
    if not a.no_check:
        if not a.model:
            sys.exit("serve_load: checking answers needs -m MODEL (or --no-check)")
        expected = lone_answers(a.fgemma, a.model, a.catalog, REQUESTS)

    rng = random.Random(a.seed)
    plan = []
    for i in range(a.n):
        x = rng.random()
        if x < a.bad:
            plan.append(("bad", i))
        elif x < a.bad + a.hangups:
            plan.append(("hangup", rng.choice(REQUESTS)))
        else:
            plan.append(("good", rng.choice(REQUESTS)))
    mem_before = proc_mem(pid) if pid else {}
    lock = threading.Lock()
    results = []
    errors = []  # the first words of good requests' failures
    next_i = [0]

    def client():
        while True:
            with lock:
                if next_i[0] >= len(plan):
                    return
                kind, what = plan[next_i[0]]
                next_i[0] += 1
            t0 = time.monotonic()
            if kind == "bad":
                body, want = malformed(tools, what)
                try:
                    status, data = post(url, "/v1/chat/completions", body, headers, a.timeout)
                except (OSError, http.client.HTTPException) as e:
                    status, data = -1, str(e).encode()
                ok = 400 <= status < 500 and (want is None or status == want)
                try:
                    err = json.loads(data)["error"]
                    ok = ok and all(k in err for k in ("message", "type", "param", "code"))
                except (ValueError, KeyError, TypeError):
                    ok = False
                res = ("bad", status, ok, time.monotonic() - t0, None)
            elif kind == "hangup":
                body = json.dumps({"model": a.model_name, "messages": [
                    {"role": "user", "content": what}], "tools": tools, "tool_choice": "required",
                    "stream": True}).encode()
                try:
                    hang_up(url, "/v1/chat/completions", body, headers)
                    res = ("hangup", 0, True, time.monotonic() - t0, None)
                except OSError:
                    res = ("hangup", -1, False, time.monotonic() - t0, None)
            else:
                req = {"model": a.model_name, "messages": [{"role": "user", "content": what}],
                       "tools": tools, "tool_choice": "required"}
                if a.max_tokens:
                    req["max_tokens"] = a.max_tokens
                body = json.dumps(req).encode()
                try:
                    status, data = post(url, "/v1/chat/completions", body, headers, a.timeout)
                except (OSError, http.client.HTTPException) as e:
                    status, data = -1, repr(e).encode()
                if status != 200:
                    with lock:
                        errors.append(f"{status}: {data[:200]!r}")
                ok, call = status == 200, None
                if ok:
                    try:
                        tc = json.loads(data)["choices"][0]["message"]["tool_calls"][0]["function"]
                        call = {"name": tc["name"], "arguments": json.loads(tc["arguments"])}
                    except (ValueError, KeyError, TypeError, IndexError):
                        ok = False
                if ok and expected:
                    ok = call == expected[what]
                res = ("good", status, ok, time.monotonic() - t0, what)
            with lock:
                results.append(res)

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(a.c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0

    # The hung-up requests finish (or are cancelled) on the server's side: wait for no busy
    # slot and no queued request, at most 120 s.
    leaked = None
    if not a.no_check:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                _, m = get(url, "/metrics", headers)
            except OSError:
                break
            busy = [l for l in m.splitlines() if l.startswith(("fgemma_slots_busy ",
                                                                "fgemma_queue_waiting "))]
            if all(l.endswith(" 0") for l in busy):
                leaked = False
                break
            time.sleep(0.2)
        else:
            leaked = True
    alive = True
    try:
        alive = get(url, "/health", headers)[0] == 200
    except OSError:
        alive = False
    mem_after = proc_mem(pid) if pid else {}

    good = [r for r in results if r[0] == "good"]
    bad = [r for r in results if r[0] == "bad"]
    lat = sorted(r[3] for r in good if r[1] == 200)
    by_status = {}
    for r in results:
        by_status[f"{r[0]}:{r[1]}"] = by_status.get(f"{r[0]}:{r[1]}", 0) + 1
    summary = {
        "url": url, "requests": a.n, "clients": a.c, "wall_s": round(wall, 2),
        "good": len(good), "good_ok": sum(r[2] for r in good),
        "good_per_s": round(sum(1 for r in good if r[1] == 200) / wall, 3),
        "bad": len(bad), "bad_4xx_ok": sum(r[2] for r in bad),
        "hangups": sum(1 for r in results if r[0] == "hangup"),
        "latency_p50_s": round(statistics.median(lat), 3) if lat else None,
        "latency_p90_s": round(lat[int(0.9 * (len(lat) - 1))], 3) if lat else None,
        "by_status": by_status, "slot_leak": leaked, "alive": alive,
        "rss_mib_before": mem_before.get("VmRSS"), "rss_mib_after": mem_after.get("VmRSS"),
        "peak_rss_mib": mem_after.get("VmHWM"),
        "errors": sorted(set(e[:120] for e in errors))[:8],
    }
    if a.json:
        print(json.dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k}: {v}")
    if server is not None:
        server.terminate()
        summary["exit"] = server.wait(timeout=300)
        print(f"server exit after SIGTERM: {summary['exit']}")
    failed = (summary["good_ok"] != len(good) or summary["bad_4xx_ok"] != len(bad) or not alive
              or leaked or (server is not None and summary["exit"] != 0))
    if a.no_check:
        failed = not alive
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Greedy decoding through IREE from an `fgemma export` folder and its manifest.json alone.

This is docs/contract.md's "What a consumer does": prefill the prompt with gemma_prefill_at
(select[n-1] = 1; or chunk by chunk with gemma_prefill_with_past), keep each layer's K/V (first
n rows), then loop gemma_with_past with the RoPE rows of the position, sliding layers given only
their last W-1 cache rows, global layers the whole cache. Function names, sizes, RoPE bases and
stop tokens come from the manifest; the argument lists are built here by docs/contract.md's
argument-order rule (not read from the manifest's withPastArgs / prefillWithPastArgs).

Usage:
  iree_decode.py --export DIR --ids 2,818,5279 [--steps 16] [--chunked] [--vmfb-dir DIR]
Compiles each function's .mlir (manifest "files": <function>.mlir, or module.mlir for a
--one-module export) with iree-compile (llvm-cpu, host CPU) unless the .vmfb exists in
--vmfb-dir (default DIR). Prints the generated ids on one line (stop token excluded), and timings
on stderr.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import iree.runtime as rt


def compile_module(export_dir, vmfb_dir, mlir_file):
    """Compiles export_dir/mlir_file (unless its .vmfb is already in vmfb_dir)."""
    vmfb = os.path.join(vmfb_dir, os.path.splitext(mlir_file)[0] + ".vmfb")
    if os.path.exists(vmfb):
        return vmfb
    mlir = os.path.join(export_dir, mlir_file)
    compiler = os.path.join(os.path.dirname(sys.executable), "iree-compile")
    t0 = time.time()
    subprocess.run([compiler, "--iree-hal-target-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
                    mlir, "-o", vmfb], check=True)
    print(f"compiled {mlir_file} in {time.time() - t0:.1f} s", file=sys.stderr)
    return vmfb


class Module:
    """One compiled module in its own context (every module is named `module`)."""

    def __init__(self, vmfb, archive, scope):
        self.config = rt.Config("local-task")
        index = rt.ParameterIndex()
        index.load(archive)
        params = rt.create_io_parameters_module(self.config.vm_instance, index.create_provider(scope=scope))
        hal = rt.create_hal_module(self.config.vm_instance, self.config.device)
        module = rt.VmModule.mmap(self.config.vm_instance, vmfb)
        self.ctx = rt.SystemContext(vm_modules=[params, hal, module], config=self.config)
        self.module = self.ctx.modules[module.name]


class Function:
    def __init__(self, module, name):
        self.fn = module.module[name]

    def __call__(self, *args):
        out = self.fn(*args)
        if not isinstance(out, (list, tuple)):
            out = [out]
        return [np.asarray(o.to_host()) for o in out]


def rope_rows(pos, n, d, base):
    """The RoPE tables of docs/contract.md.

    cos[i] = cos[i+D/2] = cos(a), sin[i] = -sin(a), sin[i+D/2] = sin(a)."""
    half = d // 2
    cos = np.zeros((n, d), np.float32)
    sin = np.zeros((n, d), np.float32)
    for r in range(n):
        p = float(pos + r)
        for i in range(half):
            a = p * math.pow(base, -2.0 * i / d)
            cos[r, i] = cos[r, i + half] = math.cos(a)
            sin[r, i] = -math.sin(a)
            sin[r, i + half] = math.sin(a)
    return cos, sin


def chunk_mask(pos, past, chunk, n_real, window, heads):
    """docs/contract.md additive mask [1, heads, C, P + C]: 0 attend, -1e30 masked."""
    keys = past + chunk
    m = np.full((chunk, keys), -1e30, np.float32)
    for i in range(chunk):
        if i >= n_real:
            m[i, past + i] = 0.0
            continue
        a = pos + i
        for j in range(keys):
            key = pos - past + j
            if key <= a and (window == 0 or key >= a - window + 1):
                m[i, j] = 0.0
    return np.broadcast_to(m, (1, heads, chunk, keys)).copy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", required=True, help="fgemma export folder (manifest.json, .mlir, .irpa)")
    ap.add_argument("--ids", required=True, help="prompt token ids, comma separated (BOS first)")
    ap.add_argument("--steps", type=int, default=16, help="tokens to generate")
    ap.add_argument("--chunked", action="store_true", help="prefill with gemma_prefill_with_past chunks")
    ap.add_argument("--vmfb-dir", default=None, help="where compiled modules are kept (default: --export)")
    a = ap.parse_args()
    man = json.load(open(os.path.join(a.export, "manifest.json")))
    vmfb_dir = a.vmfb_dir or a.export
    os.makedirs(vmfb_dir, exist_ok=True)
    if man.get("embInput"):
        sys.exit("iree_decode.py: embeddings-input exports are not supported here")
    archive = os.path.join(a.export, man["parameters"]["withPast"])
    scope = man["parameterScope"]
    L, D, KV = man["nLayers"], man["headDim"], man["nKvHeads"]
    W, period = man["slidingWindow"], man["globalLayerPeriod"]
    S, C, heads = man["seq"], man["chunk"], man["maskHeads"]
    stops = set(man.get("stopTokens", [man["eot"]]))
    is_global = [l % period == period - 1 for l in range(L)]
    base = {True: man["globalRopeBase"], False: man["slidingRopeBase"]}
    ids = [int(x) for x in a.ids.split(",") if x.strip()]
    n = len(ids)

    modules = {}  # by .mlir file: a --one-module export compiles and loads once

    def load(key):
        fn = man["functions"][key]
        mlir = man.get("files", {}).get(fn, fn + ".mlir")
        if mlir not in modules:
            modules[mlir] = Module(compile_module(a.export, vmfb_dir, mlir), archive, scope)
        return Function(modules[mlir], fn)

    t0 = time.time()
    step = load("withPast")
    cache_k, cache_v = [None] * L, [None] * L  # [1, KV, rows, D] f32, the first `pos` positions
    if not a.chunked:
        if n > S:
            sys.exit(f"iree_decode.py: prompt of {n} tokens > seq {S} (use --chunked)")
        prefill = load("prefillAt")
        tokens = np.zeros((S,), np.int32)
        tokens[:n] = ids
        select = np.zeros((1, S), np.float32)
        select[0, n - 1] = 1.0
        out = prefill(tokens, select)
        for l in range(L):
            cache_k[l] = out[2 * l][:, :, :n, :]
            cache_v[l] = out[2 * l + 1][:, :, :n, :]
        token = int(out[-1].reshape(-1)[0])
    else:
        chunkfn = load("prefillWithPast")
        pos = 0
        for l in range(L):
            cache_k[l] = np.zeros((1, KV, 0, D), np.float32)
            cache_v[l] = np.zeros((1, KV, 0, D), np.float32)
        while pos < n:
            real = min(C, n - pos)
            tokens = np.zeros((C,), np.int32)
            tokens[:real] = ids[pos:pos + real]
            select = np.zeros((1, C), np.float32)
            select[0, real - 1] = 1.0
            args = [tokens]
            seen = set()
            pasts = {}
            for l in range(L):
                g = is_global[l]
                kind = "Global" if g else "Sliding"
                # Sliding layers get their last W-1 rows (the mask's window covers the rest).
                k, v = cache_k[l], cache_v[l]
                if not g:
                    k, v = k[:, :, max(0, k.shape[2] - (W - 1)):, :], v[:, :, max(0, v.shape[2] - (W - 1)):, :]
                pasts[g] = k.shape[2]
                if g not in seen:
                    cos, sin = rope_rows(pos, C, D, base[g])
                    args += [cos, sin]
                args += [np.ascontiguousarray(k), np.ascontiguousarray(v)]
                if g not in seen:
                    args.append(chunk_mask(pos, pasts[g], C, real, 0 if g else W, heads))
                    seen.add(g)
            args.append(select)
            out = chunkfn(*args)
            for l in range(L):
                cache_k[l] = np.concatenate([cache_k[l], out[2 * l][:, :, -C:, :][:, :, :real, :]], axis=2)
                cache_v[l] = np.concatenate([cache_v[l], out[2 * l + 1][:, :, -C:, :][:, :, :real, :]], axis=2)
            token = int(out[-1].reshape(-1)[0])
            pos += real
    t_prefill = time.time() - t0

    generated = []
    pos = n
    t1 = time.time()
    while len(generated) < a.steps and token not in stops:
        generated.append(token)
        if len(generated) == a.steps:
            break
        args = [np.array([token], np.int32)]
        seen = set()
        for l in range(L):
            g = is_global[l]
            if g not in seen:
                cos, sin = rope_rows(pos, 1, D, base[g])
                args += [cos, sin]
                seen.add(g)
            k, v = cache_k[l], cache_v[l]
            if not g:
                k, v = k[:, :, max(0, k.shape[2] - (W - 1)):, :], v[:, :, max(0, v.shape[2] - (W - 1)):, :]
            args += [np.ascontiguousarray(k), np.ascontiguousarray(v)]
        out = step(*args)
        for l in range(L):
            cache_k[l] = np.concatenate([cache_k[l], out[2 * l][:, :, -1:, :]], axis=2)
            cache_v[l] = np.concatenate([cache_v[l], out[2 * l + 1][:, :, -1:, :]], axis=2)
        token = int(out[-1].reshape(-1)[0])
        pos += 1
    t_decode = time.time() - t1
    print(" ".join(str(t) for t in generated))
    print(f"prefill {n} tokens (incl. module load) {t_prefill:.2f} s, {len(generated)} tokens "
          f"{t_decode:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()

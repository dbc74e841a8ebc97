#!/usr/bin/env python3
"""Goldens for LoRA adapters on the real Gemma 3 270M Q4_K_M, from llama.cpp.

Two adapters, one from each side:
- "fgemma": written by `fgemma mklora` (rank 8 on all seven projections, f32, alpha 16,
  values uniform in +-0.01, seed 1; the generator is exact, so the test writes the same file);
- "gguf_py": written here with gguf-py the way llama.cpp's convert_lora_to_gguf.py writes a
  PEFT checkpoint (rank 4 on attn_q, attn_v, ffn_up, ffn_down; lora_a Q8_0, lora_b F16 since its
  rows of 4 do not fit Q8_0 blocks; alpha 8), stored as tests/data/lora_gguf_py.gguf.
For each adapter (at scale 1 and 0.8) and prompts of session_goldens.json, llama.cpp's 32-token
greedy continuation with the margin of each step and the final-position top-1; for the chat
prompt the full final logits as f16 (tests/data/lora_logits_<adapter>.f16).

Usage (llama.cpp built from the pinned sdist's source by scripts/build_llama_cpp.sh):
  scripts/llama_cpp_python.sh scripts/gen_goldens_lora.py MODEL.gguf build/fgemma
"""
import json
import os
import subprocess
import sys

import gguf
import llama_cpp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_goldens_session import LLAMA_CONFIG, PROMPTS, greedy  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")
NAMES = ["short", "chat", "code", "list", "json", "story"]
MKLORA_ARGS = ["--rank", "8", "--alpha", "16", "--amplitude", "0.01", "--seed", "1"]
SCALES = {"fgemma": 1.0, "gguf_py": 0.8}


def write_gguf_py_adapter(model_path, out):
    reader = gguf.GGUFReader(model_path)
    shapes = {t.name: [int(x) for x in t.shape] for t in reader.tensors}  # ggml ne order
    rng = np.random.default_rng(2024)
    w = gguf.GGUFWriter(out, "gemma3")
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", 8.0)
    r = 4
    for layer in range(18):
        for m in ("attn_q", "attn_v", "ffn_up", "ffn_down"):
            name = "blk.%d.%s.weight" % (layer, m)
            n_in, n_out = shapes[name]
            a = (rng.standard_normal((r, n_in)) * 0.02).astype(np.float32)  # PEFT lora_A (r, in)
            b = (rng.standard_normal((n_out, r)) * 0.02).astype(np.float32)  # lora_B (out, r)
            qa = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name + ".lora_a", qa, raw_shape=qa.shape,
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name + ".lora_b", b.astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    model, fgemma = sys.argv[1], sys.argv[2]
    adapters = {
        "fgemma": os.path.join(DATA, "..", "..", "build", "lora_golden_fgemma.gguf"),
        "gguf_py": os.path.join(DATA, "lora_gguf_py.gguf"),
    }
    subprocess.run([fgemma, "mklora", "-m", model, "-o", adapters["fgemma"]] + MKLORA_ARGS,
                   check=True)
    write_gguf_py_adapter(model, adapters["gguf_py"])
    prompts = [(n, t) for n, t in PROMPTS if n in NAMES]
    out = {"generator": "scripts/gen_goldens_lora.py (llama-cpp-python %s)" % llama_cpp.__version__,
           "model": os.path.basename(model), "mklora_args": MKLORA_ARGS, "adapters": []}
    for name, path in adapters.items():
        llm = llama_cpp.Llama(model_path=model, logits_all=True, verbose=False,
                              lora_path=path, lora_scale=SCALES[name], **LLAMA_CONFIG)
        entry = {"name": name, "scale": SCALES[name], "prompts": []}
        for pname, text in prompts:
            toks = llm.tokenize(text.encode(), add_bos=True, special=True)
            final, gen, margins = greedy(llm, toks)
            if pname == "chat":
                final.astype("<f2").tofile(os.path.join(DATA, "lora_logits_%s.f16" % name))
            top = np.argsort(-final, kind="stable")[:2]
            entry["prompts"].append({
                "name": pname, "tokens": toks, "greedy": gen,
                "margins": [round(m, 5) for m in margins],
                "final_top1": int(top[0]), "final_margin": float(final[top[0]] - final[top[1]]),
            })
            print(f"{name} {pname}: greedy {gen[:8]}...", file=sys.stderr)
        out["adapters"].append(entry)
        del llm
    with open(os.path.join(DATA, "lora_goldens.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

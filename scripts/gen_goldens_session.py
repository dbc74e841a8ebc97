#!/usr/bin/env python3
"""Goldens for the session runtime on the real Gemma 3 270M Q4_K_M, from llama.cpp.

For 10 prompts of 5 to ~1200 tokens (tokenized by llama.cpp itself, BOS first): the 32-token
greedy continuation with, at every step, the margin between llama.cpp's best and second-best
logit (a step with a tiny margin is a near-tie that other correct kernels may break the other
way), and the final-position top-1. llama.cpp runs with an f32 KV cache. For three prompts the full final-position logits are stored
as little-endian f16 (tests/data/session_logits_<name>.f16, 512 KiB each) for the NMSE check.

Usage: python scripts/gen_goldens_session.py MODEL.gguf  (needs llama-cpp-python, pinned in
scripts/requirements-reference.txt)
"""
import json
import os
import sys

import llama_cpp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")

PARAGRAPH = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps "
    "out loud as his father had taught him. There were one hundred and twelve of them, worn "
    "smooth in the middle by a century of boots. At the top he trimmed the wick, polished the "
    "great lens with a soft cloth, and checked the clockwork that turned the light. Ships he "
    "would never see depended on that slow rotation: fishing boats from the northern villages, "
    "ferries crossing to the islands, and now and then a cargo vessel heading south with grain. "
    "In winter the storms came in from the west and the whole tower hummed like a plucked wire. "
    "He kept a logbook of every night, the wind, the visibility, the vessels that signalled. "
)

PROMPTS = [
    ("short", "The capital of France is"),
    ("chat", "<start_of_turn>user\nTurn the light on in the kitchen.<end_of_turn>\n<start_of_turn>model\n"),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"),
    ("list", "Three things to pack for a beach holiday:\n1."),
    ("json", '{"name": "set_thermostat", "arguments": {"temperature": 21, "room": "'),
    ("story", PARAGRAPH),
    ("story2x", PARAGRAPH * 2 + "The next morning"),
    ("story600", PARAGRAPH * 4 + "Years later, when the light was automated,"),
    ("story900", PARAGRAPH * 6 + "On the last night before the engineers arrived,"),
    ("story1200", PARAGRAPH * 8 + "When his granddaughter asked about the tower, he said"),
]
FULL_LOGITS = {"short", "chat", "story600"}
# llama.cpp's configuration for the goldens (also the base of llama_self_spread.py and
# gen_goldens_stable.py). KV cache in f32 (type 0; llama.cpp's default f16 alone moves the
# logits by an NMSE of about 1e-3): the goldens should carry the model's error, not the cache's.
LLAMA_CONFIG = dict(n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=2, type_k=0, type_v=0,
                    flash_attn=False)
# Configurations that change only llama.cpp's arithmetic (its other kernels, attention and cache
# precision), for measuring how far it is from itself (llama_self_spread.py) and for choosing
# well-conditioned prompts (gen_goldens_stable.py).
LLAMA_VARIANTS = {
    "ubatch1": dict(n_batch=1, n_ubatch=1),  # token-by-token prefill: its decode kernels
    "flash_attn": dict(flash_attn=True),
    "kv_f16": dict(type_k=1, type_v=1),      # its default cache type
}
STEPS = 32


def greedy(llm, toks, steps=STEPS):
    """Evaluates toks from an empty cache, then decodes greedily: (the final-position logits,
    the steps tokens, the margin of the best over the second-best logit at each step)."""
    llm.reset()
    llm.eval(toks)
    final = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    gen, margins = [], []
    for _ in range(steps):
        lg = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        order = np.argsort(-lg, kind="stable")
        gen.append(int(order[0]))
        margins.append(float(lg[order[0]] - lg[order[1]]))
        llm.eval([gen[-1]])
    return final, gen, margins


def main():
    model = sys.argv[1]
    llm = llama_cpp.Llama(model_path=model, logits_all=True, verbose=False, **LLAMA_CONFIG)
    out = {"generator": "scripts/gen_goldens_session.py (llama-cpp-python %s)" % llama_cpp.__version__,
           "model": os.path.basename(model), "steps": STEPS, "prompts": []}
    for name, text in PROMPTS:
        toks = llm.tokenize(text.encode(), add_bos=True, special=True)
        final, gen, margins = greedy(llm, toks)
        if name in FULL_LOGITS:
            final.astype("<f2").tofile(os.path.join(DATA, "session_logits_%s.f16" % name))
        top = np.argsort(-final, kind="stable")[:2]
        out["prompts"].append({
            "name": name, "n_tokens": len(toks), "tokens": toks, "greedy": gen,
            "margins": [round(m, 5) for m in margins],
            "final_top1": int(top[0]), "final_margin": float(final[top[0]] - final[top[1]]),
            "full_logits": name in FULL_LOGITS,
        })
        print(f"{name}: {len(toks)} tokens, greedy {gen[:8]}...", file=sys.stderr)
    with open(os.path.join(DATA, "session_goldens.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

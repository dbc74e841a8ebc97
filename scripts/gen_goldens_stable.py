#!/usr/bin/env python3
"""Greedy goldens on well-conditioned prompts, from llama.cpp.

A greedy continuation compares two engines token for token only where no step is a near-tie:
at a near-tie, any change of arithmetic may pick the other token (llama.cpp's own AVX2 build
keeps all 32 steps of the session goldens on only 3 of their 10 prompts;
scripts/llama_self_spread.py). This script runs a list of candidate prompts of 5 to ~1200 tokens
through llama.cpp (the golden configuration of gen_goldens_session.py) and through three other
configurations of the same llama.cpp that change only its arithmetic (token-by-token prefill,
flash attention, f16 KV cache), and keeps the prompts where every configuration writes the same
32 tokens and the golden run's margin between its best and second-best logit is at least
MIN_MARGIN at every step. The selection uses llama.cpp's runs only, never fgemma's.

Writes tests/data/stable_goldens.json: every candidate with its margins and whether it was kept.

Usage: python scripts/gen_goldens_stable.py MODEL.gguf  (llama-cpp-python, pinned in
scripts/requirements-reference.txt)
"""
import datetime
import json
import os
import sys

import llama_cpp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")
sys.path.insert(0, HERE)
import gen_goldens_session as session  # noqa: E402  (its paragraph and llama.cpp's configuration)

STEPS = session.STEPS
# Between correct engines a pairwise logit margin moves by up to ~0.5 at 1000+ tokens (copying
# the paragraph: llama.cpp's margin 0.51 where fgemma's was 0.002), so 1.0 leaves room.
MIN_MARGIN = 1.0
BASE = session.LLAMA_CONFIG
OTHERS = session.LLAMA_VARIANTS

P = session.PARAGRAPH


def count(first, n, step=1):
    return ", ".join(str(first + step * i) for i in range(n)) + ","


def chat(text):
    return f"<start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n"


# Natural text is full of near-ties; these are the kinds of text a model continues with
# confidence (counting, tables, markup, copying a paragraph), at lengths from 5 to ~1200 tokens
# (the sliding window is 512) and a few natural ones for comparison.
CANDIDATES = [
    ("count5", "1, 2, 3, 4,"),
    ("tens", "10, 20, 30, 40,"),
    ("letters", "a, b, c, d, e,"),
    ("days", "Monday, Tuesday, Wednesday,"),
    ("constitution", "We the People of the United States, in Order to form a more perfect Union,"),
    ("times2", "2 x 1 = 2\n2 x 2 = 4\n2 x 3 = 6\n"),
    ("lines", "Line 1\nLine 2\nLine 3\n"),
    ("html", "<html>\n<head>\n<title>Home</title>\n</head>\n<body>\n<ul>\n<li>One</li>\n<li>Two</li>\n"),
    ("json_list", '[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}, {"id": 4,'),
    ("chat_light", chat("Turn the light on in the kitchen.")),
    ("count30", count(1, 30)),
    ("count60", count(1, 60)),
    ("count100", count(1, 100)),
    ("times7", "".join(f"7 x {i} = {7 * i}\n" for i in range(1, 41))),
    ("count1000", count(1000, 60)),
    ("ids", ", ".join(f'{{"id": {i}}}' for i in range(1, 81)) + ","),
    ("count150", count(1, 150)),
    ("count200", count(1, 200)),
    ("count250", count(1, 250)),
    ("copy1", P + "The lighthouse keeper climbed"),
    ("copy2", P * 2 + "The lighthouse keeper climbed"),
    ("copy4", P * 4 + "The lighthouse keeper climbed"),
    ("copy6", P * 6 + "The lighthouse keeper climbed"),
    ("copy7", P * 7 + "The lighthouse keeper climbed"),
    ("story_cont", P * 3 + "Years later, when the light was automated,"),
]


def main():
    model = sys.argv[1]
    llm = llama_cpp.Llama(model_path=model, logits_all=True, verbose=False, **BASE)
    rows = []
    for name, text in CANDIDATES:
        toks = llm.tokenize(text.encode(), add_bos=True, special=True)
        _, gen, margins = session.greedy(llm, toks)
        rows.append({"name": name, "n_tokens": len(toks), "tokens": toks, "greedy": gen,
                     "margins": [round(m, 4) for m in margins], "min_margin": round(min(margins), 4),
                     "others_agree": {}})
    del llm
    for cname, cfg in OTHERS.items():
        llm = llama_cpp.Llama(model_path=model, logits_all=True, verbose=False, **{**BASE, **cfg})
        for r in rows:
            r["others_agree"][cname] = session.greedy(llm, r["tokens"])[1] == r["greedy"]
        del llm
    for r in rows:
        r["kept"] = r["min_margin"] >= MIN_MARGIN and all(r["others_agree"].values())
        print(f"{r['name']:13s} {r['n_tokens']:5d} tokens  min margin {r['min_margin']:7.3f}  "
              f"others agree {r['others_agree']}  {'KEPT' if r['kept'] else ''}", file=sys.stderr)
    out = {"generator": "scripts/gen_goldens_stable.py (llama-cpp-python %s)" % llama_cpp.__version__,
           "model": os.path.basename(model), "steps": STEPS, "min_margin": MIN_MARGIN,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
           "prompts": rows}
    with open(os.path.join(DATA, "stable_goldens.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

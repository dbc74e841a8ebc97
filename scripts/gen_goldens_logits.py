#!/usr/bin/env python3
"""Generates tests/data/logits_goldens.json: llama.cpp's logits for a few prompts on a GGUF.

llama.cpp (through llama-cpp-python, scripts/requirements-reference.txt) is the independent
reference of the oracle ladder (docs/design.md). For each prompt we store the token ids (from
llama.cpp's own tokenizer, with BOS), the top-20 (id, logit) pairs and summary statistics of
the final position's logits, and the greedy next 8 tokens with each step's top-1/top-2 margin
(so a test can tell a real disagreement from a near-tie). Two llama.cpp runs per prompt:

  top level: the GGUF as given, llama.cpp defaults (F16 KV cache; quantized matmuls quantize
             activations to Q8): what users of llama.cpp get. The executor's target.
  "f32":     the same weights dequantized to an F32 GGUF (gguf-py), F32 KV cache, no flash
             attention: llama.cpp then computes in f32 throughout, the tight target for the
             reference forward pass (which dequantizes the same weights to f32 at load).

Usage: gen_goldens_logits.py MODEL.gguf [OUT.json]
"""
import hashlib
import json
import os
import sys
import tempfile

import llama_cpp
import gguf
import numpy as np
from gguf.quants import dequantize
from llama_cpp import Llama

# Short and long, plain text and the FunctionGemma format. Token counts are printed; the
# reference test runs the prompts below its token budget (tests/golden/reference_real_test.cc).
PROMPTS = [
    ("capital", "The capital of France is"),
    ("count", "1, 2, 3, 4, 5, 6, 7, 8,"),
    ("function_call",
     "<start_of_turn>developer\nYou are a model that can do function calling with the following "
     "functions<start_function_declaration>declaration:get_weather{description:<escape>Gets the "
     "weather.<escape>,parameters:{properties:{city:{description:<escape>City name<escape>,type:"
     "<escape>STRING<escape>}},required:[<escape>city<escape>],type:<escape>OBJECT<escape>}}"
     "<end_function_declaration><end_of_turn>\n<start_of_turn>user\nWhat's the weather in Tokyo?"
     "<end_of_turn>\n<start_of_turn>model\n"),
    ("story",
     "Once upon a time, in a small village at the edge of a great forest, there lived an old "
     "clockmaker named Elias. Every morning he opened the shutters of his shop, wound the "
     "hundred clocks that hung on its walls, and waited for visitors who rarely came. One winter "
     "evening, as snow fell softly on the cobblestones, a young girl knocked on his door holding "
     "a broken pocket watch. She said it had belonged to her grandmother, and that"),
    ("long",
     " ".join([
         "Photosynthesis is the process by which green plants, algae and some bacteria convert "
         "light energy into chemical energy. During this process, carbon dioxide and water are "
         "combined to form glucose and oxygen, using the energy of sunlight captured by "
         "chlorophyll in the chloroplasts.",
         "The light-dependent reactions take place in the thylakoid membranes, where water is "
         "split and ATP and NADPH are produced. The Calvin cycle, which occurs in the stroma, "
         "uses that ATP and NADPH to fix carbon dioxide into three-carbon sugars.",
         "Factors such as light intensity, temperature and the concentration of carbon dioxide "
         "all influence the rate of photosynthesis. When any one of them is in short supply it "
         "becomes the limiting factor, and increasing the others has little effect.",
         "Because nearly all life on Earth depends directly or indirectly on the sugars made by "
         "photosynthesis, and because it releases the oxygen that animals breathe, it is often "
         "described as the most important chemical process on the planet.",
         "In summary, the three main stages of photosynthesis are",
     ])),
]
# Past the 512-token sliding window: local and global layers see different keys only here.
WINDOW_PROMPT = ("window", " ".join([PROMPTS[3][1] + " she had found it in an old trunk.",
                                     PROMPTS[4][1] + " light absorption, electron transport and "
                                     "carbon fixation."] * 2) +
                 " Question: what was the name of the clockmaker? Answer: his name was")
PROMPTS.append(WINDOW_PROMPT)
TOP_K = 20


def last_logits(llm, n_vocab):
    # llama-cpp-python only copies logits into llm.scores with logits_all=True; read the last
    # output row from the context instead.
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float32).copy()


GREEDY_STEPS = 8


def top_k(logits, k):
    # Stable order: by logit descending, then id ascending.
    idx = np.lexsort((np.arange(len(logits)), -logits.astype(np.float64)))[:k]
    return [[int(i), float(logits[i])] for i in idx]


def to_f32_gguf(src, dst):
    """Writes `src` with every tensor dequantized to F32 (metadata copied)."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch=r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, field.contents(), vtype, sub_type=field.types[-1])
        else:
            w.add_key_value(key, field.contents(), vtype)
    for t in r.tensors:
        data = dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, data.reshape([int(d) for d in reversed(t.shape)]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(llm, tokens):
    """Final-position logits of `tokens`, then greedy steps: (logits, greedy, margins)."""
    n_vocab = llm.n_vocab()
    llm.reset()
    llm.eval(tokens)
    logits = last_logits(llm, n_vocab)
    greedy, margins = [], []
    step_logits = logits
    for _ in range(GREEDY_STEPS):
        order = np.argsort(-step_logits, kind="stable")
        nxt = int(order[0])
        greedy.append(nxt)
        margins.append(float(step_logits[order[0]] - step_logits[order[1]]))
        llm.eval([nxt])
        step_logits = last_logits(llm, n_vocab)
    return logits, greedy, margins


def summary(logits, greedy, margins):
    return {
        "top_k": top_k(logits, TOP_K),
        "stats": {
            "mean": float(logits.mean(dtype=np.float64)),
            "std": float(logits.std(dtype=np.float64)),
            "min": float(logits.min()),
            "max": float(logits.max()),
            "sum_sq": float(np.square(logits, dtype=np.float64).sum()),
        },
        "greedy": greedy,
        "greedy_margins": margins,
    }


def main():
    model = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "data", "logits_goldens.json")
    with open(model, "rb") as f:
        head = hashlib.sha256(f.read(1 << 20)).hexdigest()
    n_ctx = 2048
    llm = Llama(model_path=model, logits_all=False, n_ctx=n_ctx, n_threads=2, verbose=False)
    n_vocab = llm.n_vocab()
    goldens = []
    for name, text in PROMPTS:
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        logits, greedy, margins = run(llm, tokens)
        goldens.append({"name": name, "n_tokens": len(tokens), "tokens": [int(t) for t in tokens]})
        goldens[-1].update(summary(logits, greedy, margins))
        print(f"{name}: {len(tokens)} tokens, top1 {goldens[-1]['top_k'][0]}, greedy {greedy}")
    del llm

    with tempfile.TemporaryDirectory() as tmp:
        f32_path = os.path.join(tmp, "f32.gguf")
        to_f32_gguf(model, f32_path)
        # type_k/type_v 0 = GGML_TYPE_F32.
        llm = Llama(model_path=f32_path, logits_all=False, n_ctx=n_ctx, n_threads=2,
                    verbose=False, type_k=0, type_v=0, flash_attn=False)
        for g in goldens:
            logits, greedy, margins = run(llm, g["tokens"])
            g["f32"] = summary(logits, greedy, margins)
            print(f"{g['name']} (f32): top1 {g['f32']['top_k'][0]}, greedy {greedy}")
        del llm

    doc = {
        "generator": "scripts/gen_goldens_logits.py (llama-cpp-python "
                     + llama_cpp.__version__ + ")",
        "model": os.path.basename(model),
        "model_sha256_first_mib": head,
        "n_vocab": n_vocab,
        "settings": {
            "top_level": "GGUF as given; llama.cpp defaults (F16 KV cache), n_ctx 2048",
            "f32": "weights dequantized to F32 by gguf-py; F32 KV cache; flash_attn off",
        },
        "prompts": goldens,
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote", out)


if __name__ == "__main__":
    main()

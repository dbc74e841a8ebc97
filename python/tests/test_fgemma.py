"""The Python binding over libfgemma.so (run by `make test` through ctest, or by hand):

    FGEMMA_LIBRARY=build/libfgemma.so FGEMMA_TEST_MODEL=tiny.gguf pytest python/tests

FGEMMA_TEST_MODEL: a GGUF (ctest passes a synthetic one from `fgemma mkmodel`); without it,
FGEMMA_CLI (the fgemma binary) makes one; without either the tests skip with the reason.
FGEMMA_TEST_CATALOG: the tool catalog (default: tests/bindings/catalog.json of the repository).
FGEMMA_TEST_PRIOR_MODEL, FGEMMA_TEST_PRIOR_LORA, FGEMMA_TEST_UNMARKED_LORA: the tool prior's
fixture (tests/bindings/CMakeLists.txt: a tiny model, an adapter trained for its tool prior on
tests/bindings/prior_data.jsonl, one that was not); without them those tests skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

import fgemma

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def model_path(tmp_path_factory) -> str:
    p = os.environ.get("FGEMMA_TEST_MODEL")
    if p:
        return p
    cli = os.environ.get("FGEMMA_CLI")
    if not cli:
        pytest.skip("set FGEMMA_TEST_MODEL (a GGUF) or FGEMMA_CLI (to make a synthetic one)")
    out = tmp_path_factory.mktemp("model") / "tiny.gguf"
    subprocess.run([cli, "mkmodel", "-o", str(out), "--context", "4096"], check=True)
    return str(out)


@pytest.fixture(scope="session")
def catalog() -> str:
    p = os.environ.get("FGEMMA_TEST_CATALOG", str(REPO / "tests/bindings/catalog.json"))
    return Path(p).read_text()


@pytest.fixture(scope="session")
def model(model_path):
    m = fgemma.Model(model_path)
    yield m
    m.close()


def test_versions():
    major, minor = fgemma.api_version()
    assert major == 1 and minor >= 0
    assert fgemma.library_version().count(".") == 2


def test_call_returns_a_valid_call(model, catalog):
    caller = model.caller(catalog, threads=1)
    r = caller.call("turn the light on in the kitchen")
    assert isinstance(r, dict)
    names = [t["function"]["name"] for t in json.loads(catalog)["tools"]]
    assert r["name"] in names
    assert isinstance(r["arguments"], dict)
    # Deterministic (greedy) and the JSON text is what call() parsed.
    text = caller.call_json("turn the light on in the kitchen")
    assert json.loads(text) == r
    caller.close()


def test_catalog_as_dict_and_context_manager(model, catalog):
    with model.caller(json.loads(catalog), threads=1, max_calls=2) as caller:
        r = caller.call("stop the music")
        assert isinstance(r, (list, dict))


def test_bad_catalogs_raise(model):
    for bad in ["{not json", '{"tools": []}', "", b'[{"name": "a\xff"}]', "[1, 2]"]:
        with pytest.raises(fgemma.InvalidArgumentError) as e:
            model.caller(bad)
        assert e.value.status == 1 and e.value.message


def test_bad_options_raise(model, catalog):
    with pytest.raises(fgemma.InvalidArgumentError, match="dialect"):
        model.caller(catalog, dialect="klingon")
    with pytest.raises(fgemma.InvalidArgumentError, match="max_calls"):
        model.caller(catalog, max_calls=0)
    with pytest.raises(fgemma.InvalidArgumentError):
        model.caller(catalog, top_p=2.0)
    with pytest.raises(fgemma.InvalidArgumentError, match="tool_channel"):
        model.caller(catalog, tool_channel=-3.0)
    model.caller(catalog, tool_channel=0.5).close()  # the field reaches the library
    with pytest.raises(fgemma.InvalidArgumentError, match="copy_bias"):
        model.caller(catalog, copy_bias=-3.0)
    model.caller(catalog, copy_bias=2.0, argument_check=False, fill_arguments=False).close()
    with pytest.raises(fgemma.InvalidArgumentError, match="blend"):
        model.caller(catalog, blend=1.0)
    model.caller(catalog, blend=0.0).close()
    for bad in (-2, 2):
        with pytest.raises(fgemma.InvalidArgumentError, match="fix_typos"):
            model.caller(catalog, fix_typos=bad)
    with pytest.raises(TypeError):
        model.caller(catalog, colour="blue")


def test_fix_typos_reads_the_catalogs_words(model, catalog):
    # The synthetic model's vocabulary knows "light" and "kitchen" whole, not "ligth" and
    # "kitchn": fix_typos=1 reads the request as the mended text; 0 and the default (-1: off for
    # this FunctionGemma vocabulary) read it as written. Free text: this random model's
    # constrained call is the same for both texts.
    kw = dict(threads=1, constrain="off", max_tokens=12)
    with model.caller(catalog, fix_typos=1, **kw) as on, \
            model.caller(catalog, fix_typos=0, **kw) as off, model.caller(catalog, **kw) as dflt:
        typo, mended = "the ligth in the kitchn, off", "the light in the kitchen, off"
        assert on.call_json(typo) == off.call_json(mended)
        assert off.call_json(typo) != off.call_json(mended)
        assert dflt.call_json(typo) == off.call_json(typo)


def test_bad_requests_raise(model, catalog):
    caller = model.caller(catalog, threads=1)
    for bad in ["", "   ", b"caf\xc3", "lone \udcff surrogate"]:
        with pytest.raises(fgemma.InvalidArgumentError):
            caller.call(bad)
    with pytest.raises(fgemma.InvalidArgumentError, match="NUL"):
        caller.call("a\0b")
    with pytest.raises(TypeError):
        caller.call(42)


def test_closed_handles_raise(model_path, catalog):
    m = fgemma.Model(model_path)
    caller = m.caller(catalog, threads=1)
    m.close()
    m.close()  # twice is fine
    # The caller keeps the model alive.
    assert "name" in caller.call("turn the light on")
    with pytest.raises(fgemma.InvalidArgumentError, match="null model"):
        m.caller(catalog)
    with pytest.raises(fgemma.InvalidArgumentError):
        m.tokenize("x")
    with pytest.raises(fgemma.InvalidArgumentError):
        list(m.generate("x"))
    caller.close()
    with pytest.raises(fgemma.InvalidArgumentError, match="null caller"):
        caller.call("turn the light on")


def test_missing_files_raise(tmp_path):
    with pytest.raises(fgemma.FgemmaError) as e:
        fgemma.Model(tmp_path / "missing.gguf")
    assert e.value.status_name == "NOT_FOUND"
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_text("{}")
    with pytest.raises(fgemma.FgemmaError):
        fgemma.Model(not_gguf)


def test_missing_adapter_raises(model_path, tmp_path):
    with pytest.raises(fgemma.FgemmaError):
        fgemma.Model(model_path, lora=[(tmp_path / "none.gguf", 0.5)])


@pytest.fixture(scope="session")
def prior_files() -> dict:
    env = {k: os.environ.get(f"FGEMMA_TEST_{k.upper()}") for k in
           ("prior_model", "prior_lora", "unmarked_lora")}
    if not all(env.values()):
        pytest.skip("set FGEMMA_TEST_PRIOR_MODEL, FGEMMA_TEST_PRIOR_LORA and "
                    "FGEMMA_TEST_UNMARKED_LORA (ctest makes them)")
    return env


# Trained requests of tests/bindings/prior_data.jsonl and their tools.
PRIOR_REQUESTS = {"lights off in the hall": "set_light", "heat the house in eco mode": "set_mode",
                  "stop the music": "stop_music"}


def prior_names(model: fgemma.Model, catalog: str, tool_channel: float) -> dict:
    with model.caller(catalog, threads=1, tool_channel=tool_channel) as c:
        return {r: c.call(r)["name"] for r in PRIOR_REQUESTS}


def test_prior_lora_runs_the_tool_prior(prior_files, catalog):
    f = prior_files
    # Every accepted form of an adapter list: a path, (path, scale), a list of either.
    for prior in (f["prior_lora"], Path(f["prior_lora"]), (f["prior_lora"], 1.0),
                  [f["prior_lora"]], [(f["prior_lora"], 1.0)]):
        with fgemma.Model(f["prior_model"], prior_lora=prior) as m:
            # The prior weighted to drown the model's own choice names the trained tools.
            assert prior_names(m, catalog, 50) == PRIOR_REQUESTS
    with fgemma.Model(f["prior_model"]) as plain, \
            fgemma.Model(f["prior_model"], prior_lora=f["prior_lora"]) as with_prior, \
            fgemma.Model(f["prior_model"], lora=f["unmarked_lora"],
                         prior_lora=f["prior_lora"]) as both:
        assert prior_names(plain, catalog, 50) != PRIOR_REQUESTS  # the base model's prior
        assert prior_names(both, catalog, 50) == PRIOR_REQUESTS
        # The prior off: the prior's adapter does not decode the calls.
        assert prior_names(with_prior, catalog, 0) == prior_names(plain, catalog, 0)
    with fgemma.Model(f["prior_model"], prior_lora=[]) as m, \
            fgemma.Model(f["prior_model"]) as plain:  # none: a plain load
        assert prior_names(m, catalog, 50) == prior_names(plain, catalog, 50)


def test_prior_lora_errors(prior_files, tmp_path):
    f = prior_files
    with pytest.raises(fgemma.InvalidArgumentError, match="not trained for the tool prior") as e:
        fgemma.Model(f["prior_model"], prior_lora=f["unmarked_lora"])
    assert e.value.status_name == "INVALID_ARGUMENT"
    # The same file is a fine call adapter.
    fgemma.Model(f["prior_model"], lora=f["unmarked_lora"]).close()
    with pytest.raises(fgemma.FgemmaError) as e:
        fgemma.Model(f["prior_model"], prior_lora=[(tmp_path / "none.gguf", 0.5)])
    assert e.value.status_name == "NOT_FOUND"
    with pytest.raises(TypeError):
        fgemma.Model(f["prior_model"], prior_lora=[42])
    with pytest.raises(fgemma.InvalidArgumentError, match="NUL"):
        fgemma.Model(f["prior_model"], prior_lora="a\0b")


def test_prior_lora_needs_api_1_1(model_path, monkeypatch):
    # A 1.0 library (no fg_model_load_ex) still loads models; prior_lora is refused by name.
    real = fgemma._capi.has
    monkeypatch.setattr(fgemma._capi, "has", lambda name: name != "fg_model_load_ex" and real(name))
    fgemma.Model(model_path).close()
    with pytest.raises(fgemma.FgemmaError, match="fg_model_load_ex") as e:
        fgemma.Model(model_path, prior_lora="prior.gguf")
    assert e.value.status_name == "FAILED_PRECONDITION"


def test_tokenize_roundtrip(model):
    ids = model.tokenize("turn the light on")
    assert len(ids) >= 2
    assert model.detokenize(ids[1:]) == "turn the light on"
    long = model.tokenize("word " * 500)  # more ids than the first buffer guess
    assert len(long) > 100
    with pytest.raises(fgemma.InvalidArgumentError):
        model.tokenize(b"\xff")
    with pytest.raises(fgemma.FgemmaError):
        model.detokenize([model.vocab_size])


def test_generate_iterates_and_is_deterministic(model):
    a = "".join(model.generate("Hello", max_tokens=8, temperature=0, threads=1))
    b = "".join(model.generate("Hello", max_tokens=8, temperature=0, threads=1))
    assert a == b
    with model.session(threads=1) as s:
        c = "".join(s.generate("Hello", max_tokens=8, temperature=0))
        assert c == a
        assert s.last_result is not None and s.last_result.generated_tokens <= 8
        assert s.last_result.prompt_tokens > 2


def test_generate_can_be_stopped(model):
    with model.session(threads=1) as s:
        it = s.generate("Hello", max_tokens=64, temperature=0)
        first = next(it, None)
        it.close()  # stops the generation; the session is usable again
        again = "".join(s.generate("Hello", max_tokens=4, temperature=0))
        assert first is None or isinstance(first, str)
        assert isinstance(again, str)


def test_generate_errors_raise(model):
    with pytest.raises(fgemma.InvalidArgumentError):
        list(model.generate(b"\xc0\xaf"))
    with pytest.raises(fgemma.InvalidArgumentError):
        list(model.generate("x", temperature=-1))
    with pytest.raises(fgemma.FgemmaError) as e:
        list(model.generate("word " * 3000, context=256))
    assert e.value.status_name == "OUT_OF_RANGE"


def test_gil_is_released_during_compute(model, catalog):
    # Another Python thread notes when it runs. With the GIL held through a call, no Python code
    # runs anywhere while the call computes, so no note can fall strictly inside a call (its
    # middle 80 %). Calls repeat (at most 30) until one does: a loaded machine only makes the
    # test longer, it cannot make it fail, and a held GIL cannot make it pass.
    caller = model.caller(catalog, threads=1, reuse_request_prefix=False)
    notes = []
    done = threading.Event()

    def note():
        while not done.is_set():
            notes.append(time.perf_counter())
            time.sleep(0.0005)

    t = threading.Thread(target=note)
    t.start()
    inside = 0
    try:
        for _ in range(30):
            start = time.perf_counter()
            caller.call("turn the light on in the kitchen")
            end = time.perf_counter()
            lo, hi = start + 0.1 * (end - start), end - 0.1 * (end - start)
            inside += sum(1 for x in list(notes) if lo < x < hi)
            if inside > 0:
                break
    finally:
        done.set()
        t.join()
    assert inside > 0


def test_threads_share_a_model(model, catalog):
    out = {}

    def work(i):
        with model.caller(catalog, threads=1) as c:
            out[i] = c.call_json("turn the light on in the kitchen")

    ts = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out[0] == out[1]

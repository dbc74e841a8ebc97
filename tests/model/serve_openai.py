"""fgemma serve with the real model and the official `openai` client (pinned in
scripts/requirements.txt): chat.completions.create(..., tools=...) streamed and not, the
tool_choice variants, multi-turn with a tool result, the API key, and the same answer alone and
with other requests beside it. Answers are checked against a lone `fgemma call` on the same
catalog and request.

Run by ctest (label model) through tests/bindings/run_pytest.sh; needs FGEMMA_MODEL and
FGEMMA_CLI (skips with the reason otherwise)."""
import concurrent.futures
import json
import os
import subprocess

import pytest

openai = pytest.importorskip("openai")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOG = os.path.join(ROOT, "examples", "smart_home.json")
CLI = os.environ.get("FGEMMA_CLI", "")
MODEL = os.environ.get("FGEMMA_MODEL", "")
KEY = "test-key-123"

if not CLI or not os.path.exists(CLI):
    pytest.skip("FGEMMA_CLI is not set to the fgemma binary", allow_module_level=True)
if not MODEL or not os.path.exists(MODEL):
    pytest.skip("FGEMMA_MODEL is not set to the real model (make model)", allow_module_level=True)

with open(CATALOG) as f:
    TOOLS = json.load(f)["tools"]


@pytest.fixture(scope="module")
def server():
    # -m given: the base model alone, as `fgemma call -m` runs it.
    # No time limit of the server's or the client's decides the result (a busy machine can be
    # very slow): ctest's timeout bounds the test.
    p = subprocess.Popen([CLI, "serve", "-m", MODEL, "--port", "0", "--parallel", "2",
                          "--timeout", "86400",
                          "--api-key", KEY], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line
    port = int(line.split("127.0.0.1:")[1].split()[0])
    yield port
    p.terminate()
    assert p.wait() == 0


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server}/v1", api_key=KEY, max_retries=0,
                         timeout=86400.0)


def lone_call(request):
    out = subprocess.run([CLI, "call", "-m", MODEL, "--tools", CATALOG, request],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def user(text):
    return [{"role": "user", "content": text}]


def as_call(tool_call):
    return {"name": tool_call.function.name, "arguments": json.loads(tool_call.function.arguments)}


REQUEST = "turn the light on in the kitchen"


def test_required_equals_lone_call(client):
    r = client.chat.completions.create(model="fgemma", messages=user(REQUEST), tools=TOOLS,
                                       tool_choice="required")
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].type == "function"
    assert as_call(choice.message.tool_calls[0]) == lone_call(REQUEST)
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0


def test_streamed_equals_whole(client):
    whole = client.chat.completions.create(model="fgemma", messages=user(REQUEST), tools=TOOLS,
                                           tool_choice="required")
    stream = client.chat.completions.create(model="fgemma", messages=user(REQUEST), tools=TOOLS,
                                            tool_choice="required", stream=True,
                                            stream_options={"include_usage": True})
    name, args, ids, finish, usage = None, "", 0, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        for tc in delta.tool_calls or []:
            assert tc.index == 0
            if tc.id is not None:
                ids += 1
                assert tc.type == "function"
                name = tc.function.name
            args += tc.function.arguments or ""
        if chunk.choices[0].finish_reason is not None:
            finish = chunk.choices[0].finish_reason
    assert ids == 1
    assert finish == "tool_calls"
    assert usage is not None and usage.total_tokens == whole.usage.total_tokens
    assert {"name": name, "arguments": json.loads(args)} == as_call(whole.choices[0].message.tool_calls[0])


def test_named_tool_choice(client):
    r = client.chat.completions.create(
        model="fgemma", messages=user("set a timer for ten minutes"), tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "set_timer"}})
    assert r.choices[0].message.tool_calls[0].function.name == "set_timer"
    json.loads(r.choices[0].message.tool_calls[0].function.arguments)


def test_auto_and_none(client):
    # The base model never learned <start_function_call>: tool_choice "auto", also OpenAI's
    # default when tools are given, runs as "required" (FunctionCaller::constrain()), whole and
    # streamed: the lone call, not text.
    lone = lone_call(REQUEST)
    for choice in ({}, {"tool_choice": "auto"}):
        r = client.chat.completions.create(model="fgemma", messages=user(REQUEST), tools=TOOLS,
                                           **choice)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", c.message.content
        assert as_call(c.message.tool_calls[0]) == lone
    stream = client.chat.completions.create(model="fgemma", messages=user(REQUEST), tools=TOOLS,
                                            stream=True)
    name, args, finish, content = None, "", None, ""
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            if tc.id is not None:
                name = tc.function.name
            args += tc.function.arguments or ""
        if chunk.choices[0].finish_reason is not None:
            finish = chunk.choices[0].finish_reason
    assert finish == "tool_calls" and content == ""
    assert {"name": name, "arguments": json.loads(args)} == lone
    r = client.chat.completions.create(model="fgemma", messages=user(REQUEST), tools=TOOLS,
                                       tool_choice="none", max_tokens=16)
    assert not r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason in ("stop", "length")


def test_multi_turn_with_tool_result(client):
    messages = user(REQUEST) + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "set_light",
                          "arguments": json.dumps({"room": "kitchen", "state": "on"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"ok": True})},
        {"role": "user", "content": "now turn it off in the bedroom"},
    ]
    r = client.chat.completions.create(model="fgemma", messages=messages, tools=TOOLS,
                                       tool_choice="required")
    tc = r.choices[0].message.tool_calls[0]
    assert tc.function.name in [t["function"]["name"] for t in TOOLS]
    json.loads(tc.function.arguments)
    # The same conversation again: the same answer.
    again = client.chat.completions.create(model="fgemma", messages=messages, tools=TOOLS,
                                           tool_choice="required")
    assert as_call(again.choices[0].message.tool_calls[0]) == as_call(tc)


def test_wrong_key_is_401(server):
    bad = openai.OpenAI(base_url=f"http://127.0.0.1:{server}/v1", api_key="wrong", max_retries=0,
                        timeout=86400.0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_same_answer_with_others_beside(client):
    requests = ["turn the light on in the kitchen", "set the thermostat to 21 degrees",
                "play some jazz"]
    alone = {}
    for q in requests:
        r = client.chat.completions.create(model="fgemma", messages=user(q), tools=TOOLS,
                                           tool_choice="required")
        alone[q] = as_call(r.choices[0].message.tool_calls[0])

    def ask(q):
        r = client.chat.completions.create(model="fgemma", messages=user(q), tools=TOOLS,
                                           tool_choice="required")
        return q, as_call(r.choices[0].message.tool_calls[0])

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for q, got in pool.map(ask, requests * 2):
            assert got == alone[q], q

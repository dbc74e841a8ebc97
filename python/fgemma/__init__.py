"""fgemma: FunctionGemma / Gemma 3 function calling, over libfgemma.so's C ABI.

    import fgemma
    model = fgemma.Model("model.gguf", lora=["adapter.gguf"])   # prior_lora=: the tool prior's
    caller = model.caller(catalog_json)            # a JSON string, dict or list
    caller.call("turn the light on")               # -> {'name': ..., 'arguments': {...}}
    for piece in model.generate("Hello", max_tokens=16, temperature=0):
        print(piece, end="")

Errors are FgemmaError (InvalidArgumentError, a ValueError, for bad input) carrying the C
library's status and message. The GIL is released while the library computes, so other Python
threads run meanwhile. A Model may be shared between threads; a FunctionCaller or Session is
used by one thread at a time.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import threading
from typing import Any, Iterator, Optional, Sequence, Tuple, TypeVar, Union

from . import _capi

__version__ = "0.1.0"

__all__ = [
    "FgemmaError", "InvalidArgumentError", "Model", "FunctionCaller", "Session", "GenerateResult",
    "api_version", "library_version",
]

_STATUS_NAMES = ["OK", "INVALID_ARGUMENT", "NOT_FOUND", "OUT_OF_RANGE", "DATA_LOSS",
                 "UNIMPLEMENTED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "IO", "INTERNAL"]
_STOP_REASONS = ["token", "length", "context", "callback"]


class FgemmaError(RuntimeError):
    """An error status of the C library: .status (int), .status_name and the message."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.status_name = _STATUS_NAMES[status] if 0 <= status < len(_STATUS_NAMES) else "UNKNOWN"
        self.message = message
        super().__init__(f"{self.status_name}: {message}")


class InvalidArgumentError(FgemmaError, ValueError):
    """Bad input: a closed handle, an invalid catalog or option, text that is not UTF-8."""


def _error(status: int, message: str) -> FgemmaError:
    return (InvalidArgumentError if status == 1 else FgemmaError)(status, message)


def _check(status: int) -> None:
    if status != 0:
        msg = _capi.lib().fg_last_error()
        raise _error(status, msg.decode("utf-8", "replace") if msg else "")


def _bytes(text: Union[str, bytes], what: str) -> bytes:
    """UTF-8 bytes for the C library. A str with lone surrogates keeps them (surrogatepass),
    so the library reports the text as not UTF-8, as it does for such bytes."""
    if isinstance(text, bytes):
        b = text
    elif isinstance(text, str):
        b = text.encode("utf-8", "surrogatepass")
    else:
        raise TypeError(f"{what} must be str or bytes, not {type(text).__name__}")
    if b"\0" in b:
        raise InvalidArgumentError(1, f"the {what} contains a NUL character")
    return b


def _path(p: Union[str, bytes, os.PathLike], what: str) -> bytes:
    """A file name as the OS's bytes (os.fsencode: any bytes a Linux name may hold)."""
    if not isinstance(p, (str, bytes, os.PathLike)):
        raise TypeError(f"{what} must be a path, not {type(p).__name__}")
    b = os.fsencode(p)
    if b"\0" in b:
        raise InvalidArgumentError(1, f"the {what} contains a NUL character")
    return b


def api_version() -> Tuple[int, int]:
    """The loaded library's C API version (major, minor)."""
    v = _capi.lib().fg_api_version()
    return (v >> 16, v & 0xFFFF)


def library_version() -> str:
    """The loaded library's version string."""
    return _capi.lib().fg_version().decode()


LoraArg = Union[str, os.PathLike, Tuple[Union[str, os.PathLike], float]]

_Self = TypeVar("_Self", bound="_Owned")


class _Owned:
    """A C handle freed by `close()`, `with` or the garbage collector (`_free`: the fg_*_free)."""

    _free = ""
    _handle: Optional[int] = None

    def close(self) -> None:
        h, self._handle = self._handle, None
        if h is not None:
            getattr(_capi.lib(), self._free)(h)

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _loras(lora: Optional[Union[LoraArg, Sequence[LoraArg]]],
           what: str) -> Tuple[Any, int, list]:
    """An fg_lora array (at least one element), its count, and the path bytes it points to
    (to keep alive while the array is used)."""
    if lora is None:
        items: list = []
    elif isinstance(lora, (str, os.PathLike)) or (
            isinstance(lora, tuple) and len(lora) == 2 and isinstance(lora[1], (int, float))):
        items = [lora]
    else:
        items = list(lora)
    arr = (_capi.fg_lora * max(1, len(items)))()
    keep = []
    for i, it in enumerate(items):
        p, scale = (it if isinstance(it, tuple) else (it, 1.0))
        b = _path(p, what)
        keep.append(b)
        arr[i].path = b
        arr[i].scale = float(scale)
    return arr, len(items), keep


class Model(_Owned):
    """A loaded GGUF model (memory-mapped) with its LoRA adapters and tokenizer.

    lora: a path, or a sequence of paths or (path, scale) pairs (scale 1 by default).
    prior_lora: the same forms: adapters the noisy-channel tool prior (the caller option
    tool_channel) runs with instead of `lora`, each trained for the prior (`fgemma tune
    --objective both|channel`; InvalidArgumentError otherwise); None: the prior runs the base
    model, or `lora` when it learnt the prior. Needs C API 1.1 (fg_model_load_ex)."""

    _free = "fg_model_free"

    def __init__(self, path: Union[str, os.PathLike],
                 lora: Optional[Union[LoraArg, Sequence[LoraArg]]] = None,
                 prior_lora: Optional[Union[LoraArg, Sequence[LoraArg]]] = None):
        lib = _capi.lib()
        self._handle: Optional[int] = None
        arr, n, _keep = _loras(lora, "adapter path")  # the paths live until the call returns
        out = ctypes.c_void_p()
        if prior_lora is None:
            _check(lib.fg_model_load(_path(path, "model path"), arr, n, ctypes.byref(out)))
        else:
            prior, n_prior, _keep_prior = _loras(prior_lora, "prior adapter path")
            if not _capi.has("fg_model_load_ex"):
                major, minor = api_version()
                raise FgemmaError(7, f"prior_lora needs C API 1.1 (fg_model_load_ex); the "
                                     f"loaded library has {major}.{minor}")
            o = _capi.fg_model_options()
            lib.fg_model_options_init(ctypes.byref(o))
            o.loras, o.n_loras = arr, n
            o.prior_loras, o.n_prior_loras = prior, n_prior
            _check(lib.fg_model_load_ex(_path(path, "model path"), ctypes.byref(o),
                                        ctypes.byref(out)))
        self._handle = out.value

    def _h(self) -> Optional[int]:
        return self._handle  # None after close(): the library reports a null handle

    @property
    def trained_context(self) -> int:
        v = ctypes.c_int64()
        _check(_capi.lib().fg_model_trained_context(self._h(), ctypes.byref(v)))
        return v.value

    @property
    def vocab_size(self) -> int:
        v = ctypes.c_int32()
        _check(_capi.lib().fg_model_vocab_size(self._h(), ctypes.byref(v)))
        return v.value

    def tokenize(self, text: Union[str, bytes], *, add_bos: bool = True,
                 parse_special: bool = False) -> list:
        """Token ids exactly as llama.cpp's tokenizer (and `fgemma tokenize`) gives them."""
        lib = _capi.lib()
        b = _bytes(text, "text")
        n = ctypes.c_size_t()
        cap = len(b) + 2
        while True:
            buf = (ctypes.c_int32 * cap)()
            st = lib.fg_tokenize(self._h(), b, int(add_bos), int(parse_special), buf, cap,
                                 ctypes.byref(n))
            if st == 3 and n.value > cap:  # OUT_OF_RANGE: the buffer was short
                cap = n.value
                continue
            _check(st)
            return list(buf[: n.value])

    def detokenize(self, ids: Sequence[int], *, special: bool = False) -> str:
        arr = (ctypes.c_int32 * max(1, len(ids)))(*ids)
        out = ctypes.c_void_p()
        _check(_capi.lib().fg_detokenize(self._h(), arr, len(ids), int(special),
                                         ctypes.byref(out)))
        return _capi.take_string(out)

    def caller(self, tools: Union[str, bytes, dict, list], **options: Any) -> "FunctionCaller":
        """A FunctionCaller for a tool catalog (JSON text, or a dict/list to serialize)."""
        return FunctionCaller(self, tools, **options)

    def session(self, *, context: int = 0, threads: int = 0) -> "Session":
        return Session(self, context=context, threads=threads)

    def generate(self, prompt: Union[str, bytes], *, context: int = 0, threads: int = 0,
                 **options: Any) -> Iterator[str]:
        """Generated text, piece by piece (a fresh Session; see Session.generate)."""
        session = Session(self, context=context, threads=threads)
        try:
            yield from session.generate(prompt, **options)
        finally:
            session.close()

    def close(self) -> None:
        """Drops the handle; callers and sessions made from it keep working."""
        super().close()


class FunctionCaller(_Owned):
    """One tool catalog's caller: requests in, calls out (`fgemma call`'s JSON).

    Options are fg_caller_options' fields: dialect, constrain, temperature, top_k, top_p, seed,
    max_calls, max_tokens, context, threads, cache_dir, tool_map (JSON text or dict),
    draft_tokens, reuse_request_prefix, tool_channel, argument_check, copy_bias,
    fill_arguments, blend, fix_typos (-1 the default: on for a base Gemma 3 vocabulary, 0 off,
    1 on; needs C API 1.2)."""

    _free = "fg_caller_free"
    _FIELDS = {"dialect", "constrain", "temperature", "top_k", "top_p", "seed", "max_calls",
               "max_tokens", "context", "threads", "cache_dir", "tool_map", "draft_tokens",
               "reuse_request_prefix", "tool_channel", "argument_check", "copy_bias",
               "fill_arguments", "blend", "fix_typos"}

    def __init__(self, model: Model, tools: Union[str, bytes, dict, list], **options: Any):
        lib = _capi.lib()
        self._handle: Optional[int] = None
        unknown = set(options) - self._FIELDS
        if unknown:
            raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
        if isinstance(tools, (dict, list)):
            tools = json.dumps(tools)
        catalog = _bytes(tools, "catalog")
        if "fix_typos" in options and api_version() < (1, 2):
            major, minor = api_version()
            raise FgemmaError(7, f"fix_typos needs C API 1.2; the loaded library has "
                                 f"{major}.{minor}")
        o = _capi.fg_caller_options()
        lib.fg_caller_options_init(ctypes.byref(o))
        keep = []
        for k, v in options.items():
            if k == "tool_map":
                v = json.dumps(v) if isinstance(v, dict) else v
                k = "tool_map_json"
            if k in ("dialect", "constrain", "cache_dir", "tool_map_json"):
                if v is None:
                    continue
                b = _path(v, k) if k == "cache_dir" else _bytes(v, k)
                keep.append(b)
                setattr(o, k, b)
            elif k in ("reuse_request_prefix", "argument_check", "fill_arguments"):
                setattr(o, k, int(bool(v)))
            else:
                setattr(o, k, v)
        out = ctypes.c_void_p()
        _check(lib.fg_caller_create(model._h(), catalog, ctypes.byref(o), ctypes.byref(out)))
        self._handle = out.value
        self.max_calls = o.max_calls

    def call_json(self, request: Union[str, bytes]) -> str:
        """The JSON text `fgemma call` prints for this request (same bytes, no newline)."""
        out = ctypes.c_void_p()
        valid = ctypes.c_int()
        _check(_capi.lib().fg_caller_call(self._handle, _bytes(request, "request"),
                                          ctypes.byref(out), ctypes.byref(valid)))
        return _capi.take_string(out)

    def call(self, request: Union[str, bytes]) -> Any:
        """The call as a dict ({'name', 'arguments'}), a list with max_calls > 1, or
        {'content', 'calls', 'error'} when the model's output was not a valid call."""
        return json.loads(self.call_json(request))



class GenerateResult:
    """What the last Session.generate did: prompt_tokens, generated_tokens, stop_reason
    ('token', 'length', 'context' or 'callback')."""

    def __init__(self, r: _capi.fg_generate_result):
        self.prompt_tokens = r.prompt_tokens
        self.generated_tokens = r.generated_tokens
        self.stop_reason = _STOP_REASONS[r.stop_reason] if 0 <= r.stop_reason < 4 else "?"


class Session(_Owned):
    """KV caches and threads for one generation at a time (`fgemma run`)."""

    _free = "fg_session_free"

    def __init__(self, model: Model, *, context: int = 0, threads: int = 0):
        self._handle: Optional[int] = None
        out = ctypes.c_void_p()
        _check(_capi.lib().fg_session_create(model._h(), context, threads, ctypes.byref(out)))
        self._handle = out.value
        self.last_result: Optional[GenerateResult] = None

    def generate(self, prompt: Union[str, bytes], *, max_tokens: int = 64,
                 temperature: float = 1.0, top_k: int = 64, top_p: float = 0.95, seed: int = 0,
                 raw: bool = False, no_special: bool = False) -> Iterator[str]:
        """Yields the text of each token as it is generated (the library computes on a
        background thread with the GIL released). Closing the iterator early stops the
        generation. Errors are raised from the iterator."""
        lib = _capi.lib()
        o = _capi.fg_generate_options()
        lib.fg_generate_options_init(ctypes.byref(o))
        o.max_tokens, o.temperature, o.top_k, o.top_p = max_tokens, temperature, top_k, top_p
        o.seed, o.raw, o.no_special = seed, int(raw), int(no_special)
        p = _bytes(prompt, "prompt")
        handle = self._handle
        q: "queue.Queue[tuple]" = queue.Queue(maxsize=64)
        stop = threading.Event()
        result = _capi.fg_generate_result()

        def on_token(_user: Any, token: int, text: Any, n: int) -> int:
            if stop.is_set():
                return 1
            piece = ctypes.string_at(text, n) if n else b""
            q.put(("piece", piece))
            return 1 if stop.is_set() else 0

        cb = _capi.TOKEN_CALLBACK(on_token)

        def run() -> None:
            try:
                st = lib.fg_session_generate(handle, p, ctypes.byref(o), cb, None,
                                             ctypes.byref(result))
                if st != 0:
                    msg = lib.fg_last_error()  # per thread: read on the thread that failed
                    q.put(("error", _error(st, msg.decode("utf-8", "replace") if msg else "")))
                else:
                    q.put(("done", None))
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                q.put(("error", e))

        worker = threading.Thread(target=run, name="fgemma-generate", daemon=True)
        worker.start()
        try:
            while True:
                kind, value = q.get()
                if kind == "piece":
                    # The library never splits a UTF-8 sequence between pieces; stray invalid
                    # bytes (sampled byte tokens) become U+FFFD.
                    if value:
                        yield value.decode("utf-8", "replace")
                elif kind == "error":
                    raise value
                else:
                    break
            self.last_result = GenerateResult(result)
        finally:
            stop.set()
            while worker.is_alive():  # unblock a callback waiting on a full queue
                try:
                    q.get(timeout=0.05)
                except queue.Empty:
                    pass
            worker.join()



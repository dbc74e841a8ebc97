"""ctypes declarations of libfgemma.so's C ABI (include/fgemma/fgemma.h, API version 1.x).

The library is found in this order: $FGEMMA_LIBRARY (a path), a libfgemma.so copied into this
package's folder, then the system's library path (ctypes.util.find_library, libfgemma.so.1).
ctypes releases the GIL for the duration of every call into the library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path
from typing import Optional

API_VERSION_MAJOR = 1

c_int32_p = ctypes.POINTER(ctypes.c_int32)


class fg_lora(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("scale", ctypes.c_float)]


class fg_model_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("loras", ctypes.POINTER(fg_lora)),
        ("n_loras", ctypes.c_size_t),
        ("prior_loras", ctypes.POINTER(fg_lora)),
        ("n_prior_loras", ctypes.c_size_t),
    ]


class fg_caller_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dialect", ctypes.c_char_p),
        ("constrain", ctypes.c_char_p),
        ("temperature", ctypes.c_double),
        ("top_k", ctypes.c_int64),
        ("top_p", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("max_calls", ctypes.c_int32),
        ("max_tokens", ctypes.c_int64),
        ("context", ctypes.c_int64),
        ("threads", ctypes.c_int32),
        ("cache_dir", ctypes.c_char_p),
        ("tool_map_json", ctypes.c_char_p),
        ("draft_tokens", ctypes.c_int32),
        ("reuse_request_prefix", ctypes.c_int32),
        ("tool_channel", ctypes.c_double),
        ("argument_check", ctypes.c_int32),
        ("copy_bias", ctypes.c_double),
        ("fill_arguments", ctypes.c_int32),
        ("blend", ctypes.c_double),
        ("fix_typos", ctypes.c_int32),  # API 1.2
    ]


class fg_generate_options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("max_tokens", ctypes.c_int64),
        ("temperature", ctypes.c_double),
        ("top_k", ctypes.c_int64),
        ("top_p", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("raw", ctypes.c_int32),
        ("no_special", ctypes.c_int32),
    ]


class fg_generate_result(ctypes.Structure):
    _fields_ = [
        ("prompt_tokens", ctypes.c_int64),
        ("generated_tokens", ctypes.c_int64),
        ("stop_reason", ctypes.c_int32),
    ]


TOKEN_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t
)

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def _candidates() -> list[str]:
    out = []
    env = os.environ.get("FGEMMA_LIBRARY")
    if env:
        out.append(env)
    here = Path(__file__).resolve().parent
    out += [str(p) for p in sorted(here.glob("libfgemma.so*"))]
    found = ctypes.util.find_library("fgemma")
    if found:
        out.append(found)
    out += ["libfgemma.so.1", "libfgemma.so"]
    return out


def _declare(lib: ctypes.CDLL) -> None:
    P = ctypes.c_void_p
    S = ctypes.c_int  # fg_status
    sig = {
        "fg_api_version": (ctypes.c_uint32, []),
        "fg_version": (ctypes.c_char_p, []),
        "fg_last_error": (ctypes.c_char_p, []),
        "fg_status_name": (ctypes.c_char_p, [ctypes.c_int]),
        "fg_free": (None, [P]),
        "fg_model_load": (S, [ctypes.c_char_p, ctypes.POINTER(fg_lora), ctypes.c_size_t,
                              ctypes.POINTER(P)]),
        "fg_model_options_init": (None, [ctypes.POINTER(fg_model_options)]),
        "fg_model_load_ex": (S, [ctypes.c_char_p, ctypes.POINTER(fg_model_options),
                                 ctypes.POINTER(P)]),
        "fg_model_free": (None, [P]),
        "fg_model_trained_context": (S, [P, ctypes.POINTER(ctypes.c_int64)]),
        "fg_model_vocab_size": (S, [P, ctypes.POINTER(ctypes.c_int32)]),
        "fg_tokenize": (S, [P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, c_int32_p,
                            ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
        "fg_detokenize": (S, [P, c_int32_p, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(P)]),
        "fg_caller_options_init": (None, [ctypes.POINTER(fg_caller_options)]),
        "fg_caller_create": (S, [P, ctypes.c_char_p, ctypes.POINTER(fg_caller_options),
                                 ctypes.POINTER(P)]),
        "fg_caller_free": (None, [P]),
        "fg_caller_call": (S, [P, ctypes.c_char_p, ctypes.POINTER(P),
                               ctypes.POINTER(ctypes.c_int)]),
        "fg_session_create": (S, [P, ctypes.c_int64, ctypes.c_int32, ctypes.POINTER(P)]),
        "fg_session_free": (None, [P]),
        "fg_generate_options_init": (None, [ctypes.POINTER(fg_generate_options)]),
        "fg_session_generate": (S, [P, ctypes.c_char_p, ctypes.POINTER(fg_generate_options),
                                    TOKEN_CALLBACK, P, ctypes.POINTER(fg_generate_result)]),
    }
    for name, (res, args) in sig.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            if name in _SINCE_1_1:
                continue  # a 1.0 library: has() says so, and the feature refuses
            raise
        f.restype = res
        f.argtypes = args


# Functions a 1.0 library lacks (API version 1.1 added them).
_SINCE_1_1 = {"fg_model_options_init", "fg_model_load_ex"}


def has(name: str) -> bool:
    """Whether the loaded library exports the C function `name`."""
    return hasattr(lib(), name)


def lib() -> ctypes.CDLL:
    """The loaded library (loaded and checked on first use)."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for cand in _candidates():
            try:
                loaded = ctypes.CDLL(cand)
            except OSError as e:
                errors.append(f"{cand}: {e}")
                continue
            _declare(loaded)
            major = loaded.fg_api_version() >> 16
            if major != API_VERSION_MAJOR:
                raise ImportError(f"{cand} has C API version {major}.x; this package needs "
                                  f"{API_VERSION_MAJOR}.x")
            _lib = loaded
            return _lib
        raise ImportError("libfgemma.so not found (install it with `make install`, or set "
                          "FGEMMA_LIBRARY to its path): " + "; ".join(errors))


def take_string(ptr: ctypes.c_void_p) -> str:
    """Copies a string fgemma allocated and frees it."""
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        lib().fg_free(ptr)

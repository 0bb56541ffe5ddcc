"""Loading strategies: one module each. A strategy only loads, through the recorder it is handed.

``get_strategy(name, **params)`` builds one; ``AVAILABLE`` lists the names, ``FLAGS`` the SGLang flags that select
each (with default parameters), ``PARAMS`` the constructor parameters each accepts. ``parse_spec`` reads the
``NAME[:key=value[:key=value...]]`` form a command line can pass. A strategy may also define ``prepare(ctx, plan)``
(set-up before the timed load) and ``close()``.
"""

from __future__ import annotations

import hashlib
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

import torch

from ckptprof.loader.strategies.base import LoadContext, Strategy, StrategyUnavailable
from ckptprof.loader.strategies.fastsafetensors import FastSafetensors
from ckptprof.loader.strategies.instanttensor import InstantTensor
from ckptprof.loader.strategies.no_mmap import SGLangNoMmap
from ckptprof.loader.strategies.pipelined import Pipelined
from ckptprof.loader.strategies.pipelined_shared import PipelinedShared
from ckptprof.loader.strategies.pread import SafetensorsPread
from ckptprof.loader.strategies.prefetch import SGLangPrefetch
from ckptprof.loader.strategies.runai import RunaiStreamer
from ckptprof.loader.strategies.sglang import SGLang
from ckptprof.loader.strategies.sglang_mt import SGLangMultiThread
from ckptprof.loader.strategies.vllm import VllmEager, VllmLazy, VllmMultiThread, VllmPrefetch

__all__ = [
    "AVAILABLE",
    "FLAGS",
    "PARAMS",
    "StrategyUnavailable",
    "get_strategy",
    "param_digests",
    "parse_spec",
]


def _mt_completed(num_threads: int = 8) -> SGLangMultiThread:
    return SGLangMultiThread(num_threads=num_threads, in_order=False)


def _mt_in_order(num_threads: int = 8) -> SGLangMultiThread:
    return SGLangMultiThread(num_threads=num_threads, in_order=True)


_FACTORIES: dict[str, Callable[..., Any]] = {
    "sglang": SGLang,
    "sglang-mt": _mt_in_order,
    "sglang-mt-completed": _mt_completed,
    "no-mmap": SGLangNoMmap,
    "prefetch": SGLangPrefetch,
    "pipelined": Pipelined,
    "pipelined-shared": PipelinedShared,
    "fastsafetensors": FastSafetensors,
    "runai-streamer": RunaiStreamer,
    "instanttensor": InstantTensor,
    "safetensors-pread": SafetensorsPread,
    "vllm": VllmLazy,
    "vllm-eager": VllmEager,
    "vllm-prefetch": VllmPrefetch,
    "vllm-mt": VllmMultiThread,
}

AVAILABLE: tuple[str, ...] = tuple(_FACTORIES)


def _params(factory: Callable[..., Any]) -> dict[str, Any]:
    return {
        p.name: p.default
        for p in inspect.signature(factory).parameters.values()
        if p.default is not inspect.Parameter.empty
    }


PARAMS: dict[str, dict[str, Any]] = {name: _params(f) for name, f in _FACTORIES.items()}


def get_strategy(name: str, **params: Any) -> Strategy:
    """The strategy ``name`` built with ``params`` (e.g. ``get_strategy("sglang-mt", num_threads=16)``)."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; available: {', '.join(AVAILABLE)}") from None
    unknown = sorted(set(params) - set(PARAMS[name]))
    if unknown:
        accepted = ", ".join(PARAMS[name]) or "none"
        raise ValueError(f"strategy {name!r} has no parameter {', '.join(unknown)} (accepted: {accepted})")
    for key, value in params.items():
        _check_type(name, factory, key, value)
    strategy: Strategy = factory(**params)
    return strategy


def _check_type(name: str, factory: Callable[..., Any], key: str, value: Any) -> None:
    """Refuse a parameter of the wrong kind by name (``pipelined:readers=x``), before it fails deep inside a rank."""
    signature_owner = getattr(factory, "__init__", factory) if isinstance(factory, type) else factory
    hint = typing.get_type_hints(signature_owner).get(key)
    if hint is None:
        return
    kinds = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    if value is None and type(None) in kinds:
        return
    if isinstance(value, bool):  # a bool is an int to isinstance, never to a user
        ok = bool in kinds
    else:
        ok = any(
            (kind in (int, float, str) and isinstance(value, kind))
            or (kind is float and isinstance(value, int))
            for kind in kinds
        )
    if not ok:
        wanted = " or ".join(getattr(k, "__name__", str(k)) for k in kinds if k is not type(None))
        raise ValueError(
            f"strategy {name!r}: {key}={value!r} is not {'an' if wanted[0] in 'aeiou' else 'a'} {wanted}"
        )


FLAGS: dict[str, str] = {name: get_strategy(name).flags for name in AVAILABLE}


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"sglang-mt:num_threads=16"`` -> ``("sglang-mt", {"num_threads": 16})``; validated against the strategy."""
    name, *parts = spec.strip().split(":")
    params: dict[str, Any] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(
                f"strategy {spec!r}: expected NAME:key=value, got {part!r} (strategies: {', '.join(AVAILABLE)})"
            )
        params[key.strip()] = _parse_value(value.strip())
    get_strategy(name, **params)  # raises on an unknown name or parameter
    return name, params


def param_digests(ctx: LoadContext) -> dict[str, str]:
    """A blake2b digest of every parameter's loaded bytes, keyed ``role/name``.

    Only the rows the load wrote are hashed: the padding of an uneven last rank is never written, and on a GPU
    it holds whatever the allocator left there.
    """
    out: dict[str, str] = {}
    for (role, name), param in sorted(ctx.params.items()):
        sl = ctx.slices.get((role, name))
        loaded = param
        if sl is not None and sl.dim is not None and sl.length != param.shape[sl.dim]:
            loaded = param.narrow(sl.dim, 0, sl.length)
        host = loaded.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy()
        out[f"{role}/{name}"] = hashlib.blake2b(host.data, digest_size=16).hexdigest()
    return out

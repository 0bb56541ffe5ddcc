"""Where each pass of bench_faithful_overhead.py spends its models' loads, measured alike on both sides.

A diagnostic for issue #32 item 4, on only with ``CKPTPROF_BENCH_BREAKDOWN=1``: the ratio faithful/reference says
how much the faithful pass costs, not where. With it on, every model load of either pass (the faithful strategy's
``load_model``, the reference's ``load_model``) is bracketed by the same readings, and inside it the rank's thread's
waits for the pool (``Future.result``) and its copies (``LoadContext.copy``) are summed:

- ``load_s``: the models' loads, clock to clock (the faithful wall less its recorder start and disk samples);
- ``wait_s`` / ``copy_s``: of that, the rank's thread waiting for a pool task / inside a copy into a parameter;
- ``thread_cpu_s``: the rank's thread's CPU; ``process_cpu_s``: every thread's (pool, delivery, queue feeder);
- ``vcsw`` / ``ivcsw``: the process's voluntary and involuntary context switches;
- ``gc_s`` / ``gc_n``: the cyclic garbage collector's passes during the loads (any thread), and their time.

Both sides pay the same two clock reads per copy and per wait, so the ratio measured with it on is not the bar's
(run the benchmark without it for that); the difference between the sides' components is what it is for.
"""

from __future__ import annotations

import functools
import gc
import os
import resource
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

ENABLED = os.environ.get("CKPTPROF_BENCH_BREAKDOWN", "") not in ("", "0")
FIELDS = ("load_s", "wait_s", "copy_s", "thread_cpu_s", "process_cpu_s", "vcsw", "ivcsw", "gc_s", "gc_n")

_totals: dict[str, float] = dict.fromkeys(FIELDS, 0.0)
_in_load = threading.local()
_installed = False
_loads_open = 0
_gc_began = 0.0


def reset() -> None:
    """Zero the sums before a pass."""
    for name in FIELDS:
        _totals[name] = 0.0


def taken() -> dict[str, float]:
    """The sums since ``reset``, rounded for the JSON (empty when the breakdown is off)."""
    if not ENABLED:
        return {}
    return {name: round(value, 6) for name, value in _totals.items()}


def _timed_model_load(load: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(load)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _loads_open
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        cpu0, thread0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
        _in_load.on = True
        _loads_open += 1
        try:
            return load(*args, **kwargs)
        finally:
            _loads_open -= 1
            _in_load.on = False
            t1, thread1, cpu1 = time.perf_counter(), time.thread_time(), time.process_time()
            usage1 = resource.getrusage(resource.RUSAGE_SELF)
            _totals["load_s"] += t1 - t0
            _totals["thread_cpu_s"] += thread1 - thread0
            _totals["process_cpu_s"] += cpu1 - cpu0
            _totals["vcsw"] += usage1.ru_nvcsw - usage0.ru_nvcsw
            _totals["ivcsw"] += usage1.ru_nivcsw - usage0.ru_nivcsw

    return wrapper


def _summed(field: str, call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` timed into ``field`` when the rank's thread makes it inside a model load (pool threads' calls and
    calls outside a load are not counted)."""

    @functools.wraps(call)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not getattr(_in_load, "on", False):
            return call(*args, **kwargs)
        began = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            _totals[field] += time.perf_counter() - began

    return wrapper


def _gc_timed(phase: str, info: dict[str, Any]) -> None:
    """A ``gc.callbacks`` entry: each collection that starts and stops inside a model load, counted and timed."""
    global _gc_began
    if _loads_open <= 0:
        return
    if phase == "start":
        _gc_began = time.perf_counter()
    elif _gc_began:
        _totals["gc_s"] += time.perf_counter() - _gc_began
        _totals["gc_n"] += 1
        _gc_began = 0.0


def install() -> None:
    """Bracket both sides' model loads and sum their waits and copies (once per process; a no-op unless
    ``ENABLED``)."""
    global _installed
    if not ENABLED or _installed:
        return
    import reference_loader

    from ckptprof.loader.strategies import base, sglang, sglang_mt

    reference_loader.load_model = _timed_model_load(reference_loader.load_model)
    for cls in (sglang.SGLang, sglang_mt.SGLangMultiThread):
        cls.load_model = _timed_model_load(cls.load_model)  # type: ignore[method-assign]
    base.LoadContext.copy = _summed("copy_s", base.LoadContext.copy)  # type: ignore[method-assign]
    Future.result = _summed("wait_s", Future.result)  # type: ignore[method-assign]
    gc.callbacks.append(_gc_timed)
    _installed = True

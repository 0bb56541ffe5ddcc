"""Ablations of the faithful replay's instrumentation, for finding where its overhead over the plain loop goes.

Not part of ckptprof: ``benchmarks/gpu/faithful_overhead_ablate.sh`` puts this folder first on ``PYTHONPATH``, so
every Python process of the benchmark - the pytest process and each spawned rank - imports it at start-up and takes
out the pieces ``CKPTPROF_ABLATE`` names (comma-separated) from the faithful pass only. The reference loop is never
touched, so a variant whose ratio falls to ~1.0 names what costs:

- ``delivery``: no delivery thread: closed shards wait for the rank's flush after its wall, instead of a thread
  waking every 0.1 s during the load to put them on the queue (whose feeder thread pickles them beside it).
- ``counters``: no per-thread fault and storage counters at each shard's open and close, no residency query
  (``sglang``'s and the kept descriptors' of ``sglang-mt``).
- ``spans``: no clock reads around each copy.
- ``gc``: the cyclic garbage collector off in every process, both passes (a control, not a fix).
- ``pool`` (``sglang-mt``): the pool's task is SGLang's open and the shard's record opening, nothing else (no
  residency query, no counters, no shard or deserialize block).
- ``consume`` (``sglang-mt``): the rank's thread narrows and copies a shard's tensors and closes its record, nothing
  else (no shard block, no counters, no copy spans, no counts).
"""

from __future__ import annotations

import gc
import os
from typing import Any

WANTED = {name for name in os.environ.get("CKPTPROF_ABLATE", "").split(",") if name}
KNOWN = {"delivery", "counters", "spans", "gc", "pool", "consume"}


def _apply() -> None:
    unknown = WANTED - KNOWN
    if unknown:
        raise SystemExit(f"CKPTPROF_ABLATE: unknown {sorted(unknown)}; known {sorted(KNOWN)}")
    if "gc" in WANTED:
        gc.disable()
    if not WANTED - {"gc"}:
        return
    from ckptprof.loader import recorder
    from ckptprof.loader.strategies import base, sglang

    if "delivery" in WANTED:
        # No delivery thread at all: closed shards are kept, and handed over on the rank's flush, after its wall.
        def keep(self: recorder.WallOnlyRecorder, role: str, timing: recorder.ShardTiming) -> None:
            self._pending.append((role, timing))

        def hand_over(self: recorder.WallOnlyRecorder) -> None:
            batch = []
            while self._pending:
                batch.append(self._pending.popleft())
            if batch:
                self._hand_over(batch)

        recorder.WallOnlyRecorder._deliver = keep  # type: ignore[method-assign]
        recorder.WallOnlyRecorder._models_end = hand_over  # type: ignore[method-assign]
    if "counters" in WANTED:
        recorder.Recorder._thread_counts = lambda self: (0, 0)  # type: ignore[method-assign]
        sglang.SGLang._nonresident = lambda self, path, size: 0  # type: ignore[method-assign]
        base.KeptDescriptors.nonresident = lambda self, path, size: 0  # type: ignore[method-assign]
    if WANTED & {"pool", "consume"}:
        _strip_multithread(WANTED)
    if "spans" in WANTED:
        recorder.WallOnlyRecorder.copy_began = lambda self: 0.0  # type: ignore[method-assign]
        recorder.WallOnlyRecorder.copy_ended = lambda self, began: None  # type: ignore[method-assign]


def _strip_multithread(wanted: set[str]) -> None:
    from pathlib import Path

    from safetensors import safe_open

    from ckptprof.loader.strategies import sglang_mt

    cls = sglang_mt.SGLangMultiThread
    if "pool" in wanted:

        def open_only(self: Any, ctx: Any, shard: Any, rec: Any) -> Any:
            opened = sglang_mt._Opened(timing=rec.open_shard(Path(shard.path).name))
            with safe_open(shard.path, framework="pt", device="cpu") as handle:
                opened.tensors = {name: handle.get_tensor(name) for name in list(handle.keys())}
            return opened

        cls._open = open_only  # type: ignore[method-assign]
    if "consume" in wanted:

        def copy_only(self: Any, ctx: Any, role: str, opened: Any, rec: Any) -> None:
            for name, full in opened.tensors.items():
                src = ctx.narrow(role, name, full)
                if src is not None:
                    ctx.copy(role, name, src)
            opened.tensors.clear()
            rec.close_shard(opened.timing)

        cls._consume = copy_only  # type: ignore[method-assign]


if WANTED:
    _apply()

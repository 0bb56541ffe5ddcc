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

The ``pool`` and ``consume`` variants that stripped ``sglang-mt``'s pool task and copying loop (used on the CPU while
finding its excess, reports/h200/2026-12-03b-h200-faithful-overhead-stretched) are gone: the faithful pass no longer
calls the methods they replaced, so they would have taken out nothing.
"""

from __future__ import annotations

import gc
import os

WANTED = {name for name in os.environ.get("CKPTPROF_ABLATE", "").split(",") if name}
KNOWN = {"delivery", "counters", "spans", "gc"}


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
    if "spans" in WANTED:
        recorder.WallOnlyRecorder.copy_began = lambda self: 0.0  # type: ignore[method-assign]
        recorder.WallOnlyRecorder.copy_ended = lambda self, began: None  # type: ignore[method-assign]


if WANTED:
    _apply()

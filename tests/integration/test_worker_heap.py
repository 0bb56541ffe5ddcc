"""A rank's heap before its timed load: what the imports made is collected and frozen first, so that the first
full collection (0.3-0.4 s with vLLM 0.11.0 imported, on the 2-core VM) cannot land inside one round's load and not
the next's (it did: the engine tier's faithful target walls read 0.36 s against 0.015 s for the replica)."""

from __future__ import annotations

import gc
from pathlib import Path

import torch

from ckptprof.loader.plan import build_plan
from ckptprof.loader.worker import replay_rank


def test_the_heap_built_before_the_load_is_out_of_the_collectors_reach(small_draft: Path) -> None:
    # GIVEN a process whose set-up left many live objects behind (an engine's import does: vLLM's, torch's)
    imported = [[index] for index in range(200_000)]  # lists: always tracked by the collector
    seen: dict[str, int] = {}

    def at_the_start_line() -> None:
        # the ranks' barrier: the last thing before the timed wall
        seen["frozen"] = gc.get_freeze_count()
        seen["young"] = gc.get_count()[0]

    threads = torch.get_num_threads()
    gc.unfreeze()
    try:
        result = replay_rank(
            build_plan(small_draft, devices="cpu", strategy="sglang"), 0, wait_for_all=at_the_start_line
        )
    finally:
        torch.set_num_threads(threads)
        gc.unfreeze()
    assert result.status == "ok", result.error
    # THEN the load starts with those objects frozen (a full collection no longer walks them) and no young garbage
    assert seen["frozen"] >= len(imported), seen
    assert seen["young"] < 1000, seen

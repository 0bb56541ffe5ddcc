"""A rank's heap before its timed load: what the imports made is collected first, so that the first full collection
(0.3-0.4 s with vLLM 0.11.0 imported, on the 2-core VM) cannot land inside one round's load and not the next's (it
did: the engine tier's faithful target walls read 0.36 s against 0.015 s for the replica)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import torch

from ckptprof.loader.plan import build_plan
from ckptprof.loader.worker import replay_rank


def test_a_full_collection_runs_before_the_start_line_not_inside_the_load(small_draft: Path) -> None:
    # GIVEN a process whose set-up left many live objects behind (an engine's import does: vLLM's, torch's)
    imported = [[index] for index in range(200_000)]  # lists: always tracked by the collector
    events: list[tuple[str, int]] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            events.append(("full collection", len(imported)))

    def at_the_start_line() -> None:
        # the ranks' barrier: the last thing before the timed wall
        events.append(("start line", 0))

    threads = torch.get_num_threads()
    gc.callbacks.append(on_gc)
    try:
        result = replay_rank(
            build_plan(small_draft, devices="cpu", strategy="sglang"), 0, wait_for_all=at_the_start_line
        )
    finally:
        gc.callbacks.remove(on_gc)
        torch.set_num_threads(threads)
    assert result.status == "ok", result.error
    # THEN the rank walked that heap once before its start line, and no full collection came inside its load
    names = [name for name, _ in events]
    assert "start line" in names, names
    start = names.index("start line")
    assert "full collection" in names[:start], names
    assert "full collection" not in names[start:], names

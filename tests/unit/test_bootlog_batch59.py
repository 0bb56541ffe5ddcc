"""Batch 59 (reports/cpu/2026-12-06t-bootlog-unseen): vLLM loads an MTP drafter inside the target's load_model, so
`Model loading took N seconds` is the whole load (not the drafter's), and the KV cache and graphs that follow are the
engine's (the target's), even in an excerpt that opens at the drafter's load."""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
PRISMAQUANT = REAL / "vllm-dockerbuildfiles-qwen36-35b-prismaquant-mtp-spark-v0202-ready.log"

# vLLM 0.20's records of a target and its MTP drafter (the shapes of the log above; gpu_model_runner.py,
# default_loader.py, llm_base_proposer.py), one worker.
TARGET = b"""(EngineCore pid=199) INFO 05-21 21:03:31 [gpu_model_runner.py:4777] Starting to load model org/model...
(EngineCore pid=199) INFO 05-21 21:07:45 [default_loader.py:384] Loading weights took 170.92 seconds
"""
DRAFTER = b"""(EngineCore pid=199) INFO 05-21 21:07:45 [gpu_model_runner.py:4801] Loading drafter model...
(EngineCore pid=199) INFO 05-21 21:08:08 [default_loader.py:384] Loading weights took 21.64 seconds
(EngineCore pid=199) INFO 05-21 21:08:08 [llm_base_proposer.py:1445] Detected MTP model. Sharing target model embedding weights with the draft model.
(EngineCore pid=199) INFO 05-21 21:08:08 [llm_base_proposer.py:1501] Detected MTP model. Sharing target model lm_head weights with the draft model.
(EngineCore pid=199) INFO 05-21 21:08:08 [gpu_model_runner.py:4879] Model loading took 21.42 GiB memory and 276.698589 seconds
"""
AFTER = b"""(EngineCore pid=199) INFO 05-21 21:10:12 [gpu_worker.py:436] Available KV cache memory: 60.5 GiB
(EngineCore pid=199) INFO 05-21 21:10:12 [kv_cache_utils.py:1319] GPU KV cache size: 1,000,000 tokens
(EngineCore pid=199) INFO 05-21 21:10:29 [gpu_model_runner.py:5000] Graph capturing finished in 2 secs, took 0.5 GiB
"""


def seconds(data: bytes) -> dict[tuple[str, str | None], float | None]:
    return {(phase.name, phase.model): phase.seconds for phase in analyze_bytes(data).phases}


def test_the_drafters_load_is_its_own_weights_not_the_whole_load_model() -> None:
    """GIVEN the target's load, then the drafter's: its `Loading weights took 21.64`, the MTP drafter sharing the
    target's embedding, and load_model's `Model loading took ... 276.7 seconds` WHEN read THEN the drafter's load is
    its 21.64 s from `Loading drafter model...`, and the target's stays its own."""
    got = seconds(TARGET + DRAFTER + AFTER)
    assert got[("load-weights", "draft")] == 21.64
    assert got[("load-weights", "target")] == 170.92


def test_the_real_log_names_the_targets_load_as_its_longest_phase() -> None:
    """GIVEN the batch-59 log itself WHEN read THEN the longest phase is the target's 2m51s load, not a 4m37s draft."""
    report = analyze_bytes(PRISMAQUANT.read_bytes())
    assert "longest phase: load-weights (target) 2m51s" in report.summary
    draft = [phase for phase in report.phases if (phase.name, phase.model) == ("load-weights", "draft")]
    assert [(phase.start, phase.seconds) for phase in draft] == [("05-21 21:07:45", 21.64)]


def test_an_excerpt_opening_at_the_drafters_load_reads_the_kv_cache_and_graphs_as_the_targets() -> None:
    """GIVEN an excerpt that opens at `Loading drafter model...` (no target load in it) WHEN read THEN the KV cache and
    graphs after it are the engine's, the target's, as in the whole log."""
    got = seconds(DRAFTER + AFTER)
    assert set(got) >= {("load-weights", "draft"), ("kv-cache", "target"), ("cuda-graph", "target")}
    assert ("kv-cache", "draft") not in got and ("cuda-graph", "draft") not in got

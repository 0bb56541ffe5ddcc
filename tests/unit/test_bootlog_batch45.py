"""Batch 45 (reports/cpu/2026-12-06d-bootlog-unseen): verl runs SGLang's rollout engine inside a Ray actor. Ray tags the
actor's lines `(WorkerDict pid=26070)`, and behind that tag SGLang's scheduler processes print their own records
(`[2025-11-20 21:43:53 TP0] ...`). Before the engine starts, verl loads its own models through transformers, whose
`Loading checkpoint shards` bars no engine draws."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.parse import parse_record

ACTOR = b"\x1b[36m(WorkerDict pid=26070)\x1b[0m "
HF_BARS = (
    ACTOR + b"\n"
    b"Loading checkpoint shards:   0%|          | 0/2 [00:00<?, ?it/s]\n" + ACTOR + b"\n"
    b"Loading checkpoint shards: 100%|##########| 2/2 [01:03<00:00, 31.60s/it]\n"
)


def _sglang(second: int, rank: str, message: str) -> bytes:
    return ACTOR + f"[2025-11-20 21:43:{second:02d} {rank}] {message}\n".encode()


def test_an_sglang_record_behind_a_launchers_tag_names_its_own_rank() -> None:
    record = parse_record("(WorkerDict pid=26070) [2025-11-20 21:43:53 TP1] Init torch distributed begin.")
    assert (record.timestamp, record.rank, record.style) == ("2025-11-20 21:43:53", "TP1", "sglang")
    assert record.message == "Init torch distributed begin."
    assert record.pid == "26070"  # the launcher's: the boot learns that its tag's other lines are no rank's


def test_a_rank_dying_behind_the_launchers_tag_is_named_by_its_own_record() -> None:
    """GIVEN TP1's traceback announced by its own record, its body and error line behind the actor's tag alone WHEN
    the log is read THEN TP1 failed in init-distributed, with the error line's words; the launcher is no rank."""
    log = (
        HF_BARS
        + _sglang(53, "TP0", "Init torch distributed begin.")
        + _sglang(55, "TP1", "Scheduler hit an exception: Traceback (most recent call last):")
        + ACTOR
        + b'  File "/x/sglang/srt/model_executor/model_runner.py", line 629, in init_torch_distributed\n'
        + ACTOR
        + b"torch.distributed.DistNetworkError: The client socket has timed out after 600000ms\n"
    )
    report = analyze_bytes(log)
    assert report.state == "failed"
    assert report.failure is not None and report.failure.rank == "TP1"
    assert report.failure.phase == "init-distributed"
    assert (
        report.error == "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms"
    )
    assert [(phase.name, phase.ranks) for phase in report.phases] == [("init-distributed", 1)]


def test_a_training_frameworks_own_loads_before_the_engine_are_not_the_boots() -> None:
    """GIVEN transformers' load bars, then the engine's init-distributed and its own load WHEN the log is read THEN the
    boot's phases are the engine's alone, its load the target's (the bars counted no first load), and the bars stay
    in the report as no phase's."""
    log = (
        HF_BARS
        + _sglang(53, "TP0", "Init torch distributed begin.")
        + _sglang(54, "TP0", "Init torch distributed ends. mem usage=0.00 GB")
        + _sglang(54, "TP0", "Load weight begin. avail mem=70.00 GB")
        + _sglang(
            59, "TP0", "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=62.00 GB"
        )
    )
    report = analyze_bytes(log)
    assert [(phase.name, phase.model) for phase in report.phases] == [
        ("init-distributed", None),
        ("load-weights", "target"),
    ]
    hf = [bar for bar in report.progress if bar.desc == "Loading checkpoint shards"]
    assert hf and all(bar.model is None for bar in hf)


def test_an_engines_own_load_bar_before_init_distributed_stays_a_load() -> None:
    """GIVEN an excerpt that opens in the engine's own load bar (a known kind), then init-distributed of what follows
    WHEN the log is read THEN that bar's load is kept: only bars of no engine's kind are another program's."""
    log = b"Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:01<00:00,  1.00it/s]\n" + _sglang(
        53, "TP0", "Init torch distributed begin."
    )
    names = [phase.name for phase in analyze_bytes(log).phases]
    assert "load-weights" in names and "init-distributed" in names


def test_an_untagged_engines_load_after_the_frameworks_bars_is_the_target() -> None:
    """GIVEN transformers' bars, then a single-process engine whose records name no rank (untagged, as the bars are)
    WHEN the log is read THEN its load is its first, the target's, not a second load read as a draft's."""
    log = HF_BARS + b"".join(
        f"[2025-11-20 21:43:{second:02d}] {message}\n".encode()
        for second, message in (
            (53, "Init torch distributed begin."),
            (54, "Init torch distributed ends. mem usage=0.00 GB"),
            (54, "Load weight begin. avail mem=70.00 GB"),
            (59, "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=62.00 GB"),
        )
    )
    phases = [(phase.name, phase.model) for phase in analyze_bytes(log).phases]
    assert phases == [("init-distributed", None), ("load-weights", "target")]

"""Ray folds a line several workers print alike into one (`... [repeated 2x across cluster]`): the workers whose copies
it folded show no line of their own. Their ends are in the fold, not missing (blind batch 37: a ready TP8 x PP2 boot's
load read "running" for 679 s, two workers said never to have ended it)."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

CONFIG = b"INFO 04-20 18:29:00 llm_engine.py:240] Initializing a V0 LLM engine (v0.8.3) with config: model='m', tensor_parallel_size=3\n"
READY = b"INFO 04-20 18:42:00 api_server.py:1] Application startup complete.\n"


def _worker(pid: int, second: int, message: str) -> bytes:
    return f"(RayWorkerWrapper pid={pid}) INFO 04-20 18:{second // 60:02d}:{second % 60:02d} model_runner.py:1] {message}\n".encode()


def _boot(end: bytes) -> bytes:
    starts = b"".join(_worker(pid, 1830, "Starting to load model m...") for pid in (11, 12, 13))
    return (
        CONFIG
        + starts
        + end
        + b"INFO 04-20 18:41:35 executor_base.py:112] # cuda blocks: 5378, # CPU blocks: 7767\n"
        + READY
    )


def test_ends_folded_by_ray_end_the_phase_where_the_shown_end_does() -> None:
    """GIVEN three workers that began the load and one end line that Ray folded two more copies into WHEN the log is
    read THEN the load ended where that line says, on every worker, and the warning says where the two others' ends
    went."""
    report = analyze_bytes(
        _boot(_worker(11, 2438, "Loading weights took 20.00 seconds [repeated 2x across cluster]"))
    )
    load = report.phases[0]
    assert (load.name, load.end, load.ranks) == ("load-weights", "04-20 18:40:38", 3)
    assert [warning for warning in report.warnings if "load-weights" in warning] == [
        "load-weights (target): `Loading weights took` of pid12, pid13 not in the log: Ray folded 2 workers' copies "
        "of it into others' lines (`[repeated Nx across cluster]`)"
    ]


def test_a_fold_smaller_than_the_workers_without_an_end_leaves_the_phase_open() -> None:
    """GIVEN one folded copy where two workers show no end WHEN the log is read THEN the fold does not account for
    them: the load has not ended everywhere, as before."""
    report = analyze_bytes(
        _boot(_worker(11, 2438, "Loading weights took 20.00 seconds [repeated 1x across cluster]"))
    )
    load = report.phases[0]
    assert (load.name, load.end) == ("load-weights", None)
    assert any("never logged by pid12, pid13" in warning for warning in report.warnings), report.warnings


def test_a_bar_of_a_load_whose_ends_ray_folded_is_not_stalled() -> None:
    """GIVEN a load bar left at 3/8, then the load's end lines (two copies folded) and minutes of later records WHEN
    the log is read THEN the bar is not warned about as stalled: its load is over."""
    bar = b"Loading safetensors checkpoint shards:  38% Completed | 3/8 [00:30<00:50, 10.00s/it]\n"
    end = _worker(11, 2438, "Loading weights took 20.00 seconds [repeated 2x across cluster]")
    later = b"INFO 04-20 18:50:00 metrics.py:1] Avg prompt throughput: 0.0 tokens/s\n"
    starts = b"".join(_worker(pid, 1830, "Starting to load model m...") for pid in (11, 12, 13))
    report = analyze_bytes(CONFIG + starts + bar + end + later)
    assert not [warning for warning in report.warnings if "since" in warning], report.warnings

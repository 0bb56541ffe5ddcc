"""A phase ends at its own end record, at a duration the log states, or when the same rank begins its next phase;
never at the end of the log (#33 item 4)."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes


def test_a_phase_whose_release_logs_no_end_ends_when_the_rank_begins_its_next_one() -> None:
    # GIVEN an SGLang release that logs no `Init torch distributed ends`
    log = b"""[2025-02-04 05:21:35 TP0] Init torch distributed begin.
[2025-02-04 05:21:40 TP0] Load weight begin. avail mem=22.76 GB
[2025-02-04 05:29:17 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=8.37 GB
"""
    report = analyze_bytes(log)
    init = report.phases[0]
    # THEN init-distributed took the 5 s up to the load, not the 7m42s to the log's last line
    assert (init.name, init.end, init.seconds) == ("init-distributed", "2025-02-04 05:21:40", 5.0)
    # AND the report still says the end line was never logged
    assert any("`Init torch distributed ends` never logged" in warning for warning in report.warnings)


def test_the_next_phase_of_another_rank_does_not_end_it() -> None:
    log = b"""[2025-02-04 05:21:35 TP0] Init torch distributed begin.
[2025-02-04 05:21:35 TP1] Init torch distributed begin.
[2025-02-04 05:21:40 TP0] Load weight begin. avail mem=22.76 GB
[2025-02-04 05:21:50 TP1] Load weight begin. avail mem=22.76 GB
"""
    init = analyze_bytes(log).phases[0]
    assert (init.name, init.end, init.seconds) == ("init-distributed", "2025-02-04 05:21:50", 15.0)


def test_a_stated_duration_wins_over_the_timestamps_and_is_marked_stated() -> None:
    # GIVEN a load whose record states 5.38 s although 9 s passed between its lines (the download came first)
    log = b"""INFO 03-01 07:56:43 [gpu_model_runner.py:1299] Starting to load model meta-llama/Llama-3.2-1B...
INFO 03-01 07:56:47 [weight_utils.py:273] Time spent downloading weights for meta-llama/Llama-3.2-1B: 3.58 seconds
INFO 03-01 07:56:52 [default_loader.py:423] Loading weights took 5.38 seconds
"""
    load = analyze_bytes(log).phases[0]
    assert (load.name, load.seconds, load.stated) == ("load-weights", 5.38, True)
    assert load.to_dict()["stated"] is True


def test_a_duration_read_from_timestamps_is_not_marked_stated() -> None:
    log = b"""[2025-02-04 05:21:40 TP0] Load weight begin. avail mem=22.76 GB
[2025-02-04 05:29:17 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=8.37 GB
"""
    load = analyze_bytes(log).phases[0]
    assert (load.seconds, load.stated) == (457.0, False)

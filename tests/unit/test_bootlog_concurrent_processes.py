"""Processes that share a name with no rank in it (issue #33 item 2): Llumnix runs one vLLM engine in each of its Ray
actors, and every line of each is tagged `(Llumlet pid=N)`. Four ids interleaving under one name are four engines, each
a rank of its own told by its id; one id that replaces another (a restarted server's `(APIServer pid=N)`) is one
process. Also the span of such a log: Llumnix's and Ray's dated stamps, first seen at the log's end, are not where the
boot began (batch 62's Llumnix log read "ready -788918415.6 s after the first log record")."""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes
from ckptprof.bootlog.boot import Boot
from ckptprof.bootlog.clock import LogClock
from ckptprof.bootlog.summary import seconds_between

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"
LLUMNIX = REAL / "vllm-llumnix-qwen25-7b-v063-ray-llumlet-4-instances-eager-ready-sigterm.log"


def _engines(pids: tuple[int, ...]) -> bytes:
    """Each engine's load and KV cache, their lines interleaved as Ray relays them (the lines of v0.6.3's engine)."""
    steps = (
        "INFO 07-16 12:30:12 model_runner.py:1056] Starting to load model /mnt/model/Qwen2.5-7B...",
        "INFO 07-16 12:30:15 model_runner.py:1067] Loading model weights took 14.2716 GB",
        "INFO 07-16 12:30:19 distributed_gpu_executor.py:57] # GPU blocks: 2170, # CPU blocks: 4681",
    )
    return b"".join(f"(Llumlet pid={pid}) {step}\n".encode() for step in steps for pid in pids)


def test_interleaved_ids_under_one_name_are_one_rank_each() -> None:
    """GIVEN four `(Llumlet pid=N)` engines loading at once WHEN read THEN the load and the KV cache each count four
    ranks."""
    report = analyze_bytes(_engines((22645, 22646, 22647, 22648)))
    ranks = {phase.name: phase.ranks for phase in report.phases}
    assert ranks["load-weights"] == 4 and ranks["kv-cache"] == 4, ranks


def test_one_engine_under_the_name_is_the_untagged_process() -> None:
    """GIVEN one `(Llumlet pid=N)` engine WHEN read THEN one rank: a name with one id is one process, as before."""
    report = analyze_bytes(_engines((22645,)))
    assert {phase.ranks for phase in report.phases if phase.name != "ready"} == {1}


def test_an_id_that_replaces_another_is_not_a_second_process() -> None:
    """GIVEN a name whose id changes once and never goes back (a process replaced) WHEN asked THEN it is one process;
    GIVEN the first id again after the second THEN the name's processes run at once: every id but the first is a rank of
    its own from then on."""
    boot = Boot(1, LogClock())
    assert not boot.concurrent_process("APIServer", "10")
    assert not boot.concurrent_process("APIServer", "10")
    assert not boot.concurrent_process("APIServer", "11")
    assert not boot.concurrent_process("APIServer", "11")
    # 10 again: both run; the first stays the untagged process, the second is counted beside it
    assert not boot.concurrent_process("APIServer", "10")
    assert boot.concurrent_process("APIServer", "11")
    assert boot.concurrent_process("APIServer", "12")
    assert not boot.concurrent_process("Scaler", "12")


def test_the_names_kept_are_bounded() -> None:
    """GIVEN a log that invents endless names and ids WHEN asked THEN the boot keeps a bounded number of them."""
    boot = Boot(1, LogClock())
    for index in range(10_000):
        boot.concurrent_process(f"Actor{index % 500}", str(index))
    assert len(boot.process_pids) <= 64
    assert all(len(pids) <= 64 for pids in boot.process_pids.values())


def test_a_launchers_dated_stamps_at_the_end_do_not_move_the_boots_start() -> None:
    """GIVEN vLLM's year-less records, then Ray's dated SIGTERM lines after the server was ready WHEN read THEN the
    boot starts at vLLM's first record and the ready time is positive."""
    ready = b"(APIServerActorVLLM pid=23614) INFO:     Application startup complete.\n"
    sigterm = b"[2025-07-16 12:30:41,565 E 21841 21841] logging.cc:496: *** SIGTERM received at time=1752669041 ***\n"
    report = analyze_bytes(_engines((1, 2)) + ready + sigterm)
    assert report.first_timestamp == "07-16 12:30:12"
    assert "ready 7.0 s after the first log record" in report.summary, report.summary


def test_the_real_llumnix_log_is_ready_fifty_seconds_after_its_first_record() -> None:
    report = analyze_bytes(LLUMNIX.read_bytes())
    assert report.state == "ready"
    assert "ready 50.0 s after the first log record" in report.summary, report.summary
    assert {phase.name: phase.ranks for phase in report.phases}["load-weights"] == 4


def test_a_dated_and_a_year_less_stamp_are_compared_in_one_year() -> None:
    """GIVEN one stamp with a year and one without WHEN their distance is asked THEN the year-less one is read in the
    dated one's year (read apart, it fell 25 years off)."""
    assert seconds_between("2025-07-16 12:30:26", "07-16 12:30:41") == 15.0
    assert seconds_between("07-16 12:30:26", "2025-07-16 12:30:41") == 15.0
    assert seconds_between("07-16 12:30:26", "07-16 12:30:27") == 1.0

"""How fast `ckptprof log` reads what servers really write: a file made of the real-log corpus
(tests/fixtures/logs/real: SGLang and vLLM boots, bars, tracebacks, collector prefixes), repeated to 64 MiB.

Issue #33 item 7 asks 30 MB/s of the pure-Python reader on this file; extra_info says whether the run met it
(``target_MBps``, ``meets_target``, on the median round). The corpus is nearly all boot records: a line in two or
three is one the parser must read, against one in twenty in a serving log (bench_bootlog.py). `pytest benchmarks
--benchmark-disable` reads 2 MB of it once.

The file repeats a 10.2 MB corpus (583 logs on 2026-12-06 night) about 6.6 times: whatever the reader caches per process
(compiled patterns, parsed timestamps) is warm after the first copy, so a single real log read once is slower per byte
than this (reports/cpu/2026-12-03-bootlog-speed).
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from ckptprof.bootlog import COMPILED, BootReport, analyze_path

REAL = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs" / "real"
FULL_BYTES = 64 << 20  # issue #33 item 7: the corpus concatenated to >= 64 MiB
SMOKE_BYTES = 2_000_000
ROUNDS = 5  # the median of these is what extra_info reports; the VM's speed drifts from round to round
# Issue #33 item 7: CPU MB/s of the pure-Python reader, recorded (not asserted: the floor below is) with whether
# the median round met it. Not met on 2026-12-04: 18.2-18.6 MB/s on the 2-core development VM (Python 3.11), 14.5-14.6
# on an H200 host's Xeon (Python 3.12); reports/cpu/2026-12-04b-bootlog-speed says what bounds it. Nor on 2026-12-05,
# after the first speed work (11% fewer instructions, 6-14% faster than the day's start): 16-18 MB/s on a slower hour of
# the same VM (reports/cpu/2026-12-05q-bootlog-speed); 22-23 MB/s on a faster hour, where the whole-block passes alone
# take about 200 of the 560 ms that 30 MB/s allows a 16 MiB read (reports/cpu/2026-12-05v-bootlog-speed). Late that day:
# 23.3 MB/s; a front end that reads the same lines as far as parse_record, and no further, takes 355 of those 560 ms
# (reports/cpu/2026-12-05zg-bootlog-speed-floor). 2026-12-06: 25.6 MB/s on a quiet hour of the VM, 517 logs
# (reports/cpu/2026-12-06j-bootlog-unseen); later that day 27.6, and about 3% of every figure before it was this file
# repeating the corpus, which the reader's memos had grown to remember (reports/cpu/2026-12-06k-bootlog-speed;
# tests/unit/test_bootlog_corpus_repeats.py keeps them from it). That afternoon the VM was an AMD EPYC one, about twice
# as slow at everything: 12.5-13.2 MB/s for the same reader, 12.8-13.4 after a change that took 7% of its instructions
# off, 18.0-18.3 on a GPU host's Xeon (reports/cpu/2026-12-06l-bootlog-speed). Compare trees on one machine, never
# figures across machines. That evening, with 546 logs: 17.1 MB/s on a faster hour of the AMD VM; the evening's reader,
# which reads more of the corpus, paired with the afternoon's: 2% slower on the new corpus, the same on the old
# (reports/cpu/2026-12-06n-bootlog-unseen). 2026-12-07 night, 754 logs: 26.4 MB/s median on a fast hour of the Xeon VM;
# one read of 16 MiB is 5.30 G instructions, 40% of them in the regex engine and 17% in the interpreter loop, and the
# passes over whole blocks take about a quarter of the time (reports/cpu/2026-12-07zb-bootlog-instructions).
TARGET_MBPS = 30.0
# A floor on the best round, asserted only when benchmarking: below the slowest build measured (15.2 MB/s, the H200
# host's Python 3.12; 18.9 on the VM). The reader compiled with mypyc (CKPTPROF_COMPILE=1, setup.py; optional) read
# 21-25 MB/s of this corpus on the VM (2026-12-04): its regular expressions and byte scans are not compiled code.
# The machines' speeds differ and drift by 10% from hour to hour: the ratio below is the check that holds on any.
FLOOR_MBPS = 12.0
# The reader's CPU time over that of a bare walk through the same file's lines, timed alongside: 51-68 for the
# pure-Python build on the VM and on the H200 host (2026-12-04; 56 on CI's 2 MB), against 66-68 before that day's
# changes. Held under --benchmark-disable too, where the MB/s floor is not: a reader about half as fast fails it.
READ_WITHIN_LINE_WALK = 130.0
# Memory stays flat: the parser holds one 1 MiB block, bounded state and at most 32 boots' state.
PEAK_BYTES = 48 << 20


def real_corpus() -> bytes:
    return b"".join(path.read_bytes().rstrip(b"\n") + b"\n" for path in sorted(REAL.glob("*.log")))


def write_corpus_file(path: Path, size: int) -> Path:
    corpus = real_corpus()
    with path.open("wb") as out:
        written = 0
        while written < size:
            piece = corpus[: size - written]
            out.write(piece)
            written += len(piece)
    return path


@pytest.fixture(scope="module")
def corpus_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    disabled = request.config.getoption("benchmark_disable", default=False)
    folder = tmp_path_factory.mktemp("real-corpus")
    return write_corpus_file(folder / "servers.log", SMOKE_BYTES if disabled else FULL_BYTES)


def test_bootlog_reads_the_real_corpus(benchmark: BenchmarkFixture, corpus_file: Path) -> None:
    """GIVEN a file made of the real-log corpus WHEN `ckptprof log` reads it THEN it reports the last boot (one
    of the corpus's), counts the boots, and keeps its speed and its memory."""
    cpu_s: list[float] = []
    wall_s: list[float] = []
    ratios: list[float] = []

    def analyse() -> BootReport:
        wall, cpu = time.perf_counter(), time.process_time()
        report = analyze_path(str(corpus_file))
        wall_s.append(time.perf_counter() - wall)
        cpu_s.append(time.process_time() - cpu)
        cpu = time.process_time()
        with corpus_file.open("rb") as fh:
            walked = sum(len(line) for line in fh)  # the reference: every line visited, nothing read from it
        ratios.append(cpu_s[-1] / max(time.process_time() - cpu, 1e-9))
        assert walked == corpus_file.stat().st_size
        return report

    report = benchmark.pedantic(analyse, rounds=1 if benchmark.disabled else ROUNDS, iterations=1)
    while len(ratios) < 3:  # --benchmark-disable ran it once: the ratio's median needs a few rounds
        analyse()
    assert report.framework in ("sglang", "vllm")
    assert report.boots > 1
    megabytes = corpus_file.stat().st_size / 1e6
    benchmark.extra_info["MB"] = round(megabytes, 1)
    benchmark.extra_info["boots"] = report.boots
    benchmark.extra_info["compiled"] = COMPILED
    benchmark.extra_info["MBps"] = round(megabytes / min(wall_s), 1)
    benchmark.extra_info["MBps_cpu"] = round(megabytes / max(min(cpu_s), 1e-9), 1)
    benchmark.extra_info["MBps_cpu_median"] = round(megabytes / max(statistics.median(cpu_s), 1e-9), 1)
    benchmark.extra_info["target_MBps"] = TARGET_MBPS
    benchmark.extra_info["meets_target"] = benchmark.extra_info["MBps_cpu_median"] >= TARGET_MBPS
    benchmark.extra_info["rounds"] = len(cpu_s)
    benchmark.extra_info["cpu_over_line_walk"] = round(statistics.median(ratios), 1)
    assert benchmark.extra_info["cpu_over_line_walk"] <= READ_WITHIN_LINE_WALK, benchmark.extra_info
    if not benchmark.disabled:
        assert benchmark.extra_info["MBps_cpu"] >= FLOOR_MBPS, benchmark.extra_info


def test_bootlog_memory_is_flat_on_the_real_corpus(tmp_path: Path) -> None:
    """Reading the corpus twice over takes no more memory than reading it once: nothing grows with the log.

    Whole copies, not a prefix and twice that prefix: a block's transient peak (its unwrapped copies) depends on what it
    holds, and the corpus's heaviest block need not lie in its first megabytes (after blind batch 34 the first 2 MB
    peaked at 6.5 MB and the first 4 MB at 10.5 MB, while 8 and 16 MB stayed at 10.8 and 11.1)."""
    once = len(real_corpus())
    peaks = []
    for size in (once, 2 * once):
        log = write_corpus_file(tmp_path / f"{size}.log", size)
        tracemalloc.start()
        analyze_path(str(log))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert max(peaks) < PEAK_BYTES, peaks
    assert peaks[1] < 1.5 * peaks[0], peaks

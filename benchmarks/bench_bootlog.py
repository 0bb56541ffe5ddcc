"""How fast `ckptprof log` reads a large TP8 EAGLE-3 boot log (target: >= 30 MB/s on a 2-core machine), and
whether `ckptprof log --follow` keeps up with a server writing 10 MB/s.

The log is generated in memory: the boot itself (records on 8 ranks, shard bars redrawn with carriage returns
and other ranks' records glued to their frames), then hours of serving traffic, a share of it tqdm frames, until
it reaches the size asked for. `pytest benchmarks --benchmark-disable` runs it once on a small log.
"""

from __future__ import annotations

import io
import random
import statistics
import threading
import time
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from ckptprof.bootlog import BootReport, analyze_stream, follow_log

FULL_BYTES = 50_000_000
SMOKE_BYTES = 1_000_000
RANKS = 8
# The parser's CPU time over that of a bare walk through the same bytes' lines (io.BytesIO iteration), timed
# alongside: 33-40 measured on the 2-core VM (2026-12). The bound holds under --benchmark-disable too, where the
# absolute MB/s floor (a figure of one machine) is not asserted; a parser half as fast as now fails it.
PARSE_WITHIN_LINE_WALK = 70.0


def line_walk(data: bytes) -> int:
    """The reference: every line of ``data`` visited once, nothing read from it."""
    return sum(len(line) for line in io.BytesIO(data))


def _stamp(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"2025-11-29 {10 + hours % 14:02d}:{minutes:02d}:{secs:02d}"


def _boot_section(rng: random.Random) -> list[str]:
    lines = [
        f"[{_stamp(0)}] server_args=ServerArgs(model_path='/data/kimi-k2', tp_size={RANKS}, pp_size=1, dp_size=1, "
        "nnodes=1, speculative_algorithm='EAGLE3', speculative_draft_model_path='/data/eagle3')\n"
    ]
    clock = 2
    for message in (
        "Init torch distributed begin.",
        "Init torch distributed ends. elapsed=0.53 s, mem usage=0.09 GB",
    ):
        lines += [f"[{_stamp(clock)} TP{rank}] {message}\n" for rank in range(RANKS)]
    for model_seconds in (48, 39):
        lines += [
            f"[{_stamp(clock)} TP{rank}] Load weight begin. avail mem=139.12 GB\n" for rank in range(RANKS)
        ]
        frames = []
        for done in range(65):
            frames.append(
                f"\rLoading safetensors checkpoint shards: {100 * done // 64:3d}% Completed | {done}/64 "
                f"[00:{done * model_seconds // 64 % 60:02d}<00:10,  1.64it/s]"
            )
            if done % 4 == 0:
                frames.append(
                    f"[{_stamp(clock + done)} TP{rng.randrange(1, RANKS)}] Using default MoE kernel config\n"
                )
        lines.append("".join(frames) + "\n")
        clock += model_seconds
        lines += [
            f"[{_stamp(clock)} TP{rank}] Load weight end. elapsed={model_seconds}.44 s, type=X, avail mem=25.2 GB\n"
            for rank in range(RANKS)
        ]
    for begin, end in (("Capture cuda graph begin.", "Capture cuda graph end. Time elapsed: 21.35 s."),) * 2:
        lines += [f"[{_stamp(clock)} TP{rank}] {begin}\n" for rank in range(RANKS)]
        clock += 21
        lines += [f"[{_stamp(clock)} TP{rank}] {end}\n" for rank in range(RANKS)]
    lines.append(f"[{_stamp(clock + 7)}] The server is fired up and ready to roll!\n")
    return lines


def _serving_line(rng: random.Random, second: int) -> str:
    kind = rng.random()
    stamp = _stamp(second)
    if kind < 0.04:  # a tqdm bar of some client-side job: exercises the frame parser, not just the pre-filter
        done = rng.randrange(100)
        return f"\rProcessing requests: {done:3d}%|#####     | {done}/100 [00:10<00:12,  4.50it/s]\n"
    if kind < 0.40:
        return (
            f"[{stamp} TP0] Decode batch. #running-req: {rng.randrange(64)}, #token: {rng.randrange(10**6)}, "
            "token usage: 0.12, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0\n"
        )
    if kind < 0.60:
        return (
            f"[{stamp} TP0] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: {rng.randrange(8192)}, "
            "token usage: 0.01, #running-req: 3, #queue-req: 0\n"
        )
    if kind < 0.85:
        return f'[{stamp}] INFO:     127.0.0.1:{rng.randrange(30000, 60000)} - "POST /generate HTTP/1.1" 200 OK\n'
    return f"[{stamp} TP{rng.randrange(RANKS)}] Cache flushed successfully; memory pool stats nominal\n"


def make_tp8_log(size_bytes: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    parts = _boot_section(rng)
    total = sum(len(part) for part in parts)
    second = 200
    while total < size_bytes:
        line = _serving_line(rng, second)
        parts.append(line)
        total += len(line)
        second += rng.random() < 0.05
    return "".join(parts).encode()


@pytest.fixture(scope="module")
def tp8_log(request: pytest.FixtureRequest) -> bytes:
    disabled = request.config.getoption("benchmark_disable", default=False)
    return make_tp8_log(SMOKE_BYTES if disabled else FULL_BYTES)


def test_bootlog_parse_speed(benchmark: BenchmarkFixture, tp8_log: bytes) -> None:
    """GIVEN a generated TP8 EAGLE-3 log WHEN it is analysed from a stream THEN it parses at >= 30 MB/s."""
    log = tp8_log[:SMOKE_BYTES] if benchmark.disabled else tp8_log
    wall_s: list[float] = []
    cpu_s: list[float] = []
    ratios: list[float] = []

    def analyse() -> BootReport:
        wall, cpu = time.perf_counter(), time.process_time()
        report = analyze_stream(io.BytesIO(log))
        wall_s.append(time.perf_counter() - wall)
        cpu_s.append(time.process_time() - cpu)
        cpu = time.process_time()
        assert line_walk(log) == len(log)
        ratios.append(cpu_s[-1] / max(time.process_time() - cpu, 1e-9))
        return report

    report = benchmark.pedantic(analyse, rounds=1 if benchmark.disabled else 3, iterations=1)
    while len(ratios) < 3:  # --benchmark-disable ran it once: the ratio's median needs a few rounds
        analyse()
    assert report.framework == "sglang"
    assert report.state == "ready"
    megabytes = len(log) / 1e6
    benchmark.extra_info["MB"] = round(megabytes, 1)
    benchmark.extra_info["MBps"] = round(megabytes / min(wall_s), 1)
    # CPU time is what the parser costs; wall time also counts whatever else shares this 2-core machine.
    benchmark.extra_info["MBps_cpu"] = round(megabytes / max(min(cpu_s), 1e-9), 1)
    benchmark.extra_info["cpu_over_line_walk"] = round(statistics.median(ratios), 1)
    assert benchmark.extra_info["cpu_over_line_walk"] <= PARSE_WITHIN_LINE_WALK, benchmark.extra_info
    if not benchmark.disabled:
        assert benchmark.extra_info["MBps_cpu"] >= 30, benchmark.extra_info


# -- --follow against a writer ------------------------------------------------------------------------------------

LOGS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "logs"
FOLLOW_PIECES = 50
FOLLOW_PAUSE_S = 0.02  # 50 pieces of ~200 kB, 20 ms apart: ~10 MB/s
# Following reads each byte once, like a one-shot read, plus a poll and a redrawn status line now and then: its
# CPU time stays within this factor of a one-shot parse of the same bytes in the same thread (1.1-1.6 measured on
# the 2-core VM, 2026-12).
FOLLOW_CPU_WITHIN = 3.0
# Keeping up: once the writer has written `ready`, the follower is done within this share of a one-shot parse of
# the whole log (a follower that kept up has only the last piece left: 0.1-0.2 measured; one that fell behind has
# up to the whole log).
FOLLOW_LAG_WITHIN = 1.0
# A one-shot parse of that log over a bare walk through its lines: every line is a record read whole (no ready line
# yet), 97 measured on the VM (2026-12-07); a reader that searched the rest of its block again from every line took
# about 3,300.
SERVING_PARSE_WITHIN_LINE_WALK = 250.0


def _busy_log() -> list[bytes]:
    """A TP8 boot, ~10 MB of prefill lines in FOLLOW_PIECES pieces, then `ready` last (decode statistics would say
    the server serves, and the follower would stop at the first)."""
    boot = (LOGS / "sglang_tp8_ready.log").read_bytes().replace(b"The server is fired up", b"Warmup done,")
    filler = b"[2025-11-29 10:02:00 TP0] Prefill batch. #new-seq: 12, #new-token: 34567, token usage: 0.12\n"
    filler *= 110_000
    size = len(filler) // FOLLOW_PIECES
    ready = b"[2025-11-29 10:03:00] The server is fired up and ready to roll!\n"
    return [boot, *(filler[i : i + size] for i in range(0, len(filler), size)), ready]


def _follow_once(path: Path, pieces: list[bytes]) -> dict[str, float]:
    """Follow ``path`` while a thread writes ``pieces`` into it; then parse the same bytes at once, in the same
    thread, as the reference. Seconds of wall and of this thread's CPU for both, and the follower's lag."""
    path.write_bytes(b"")
    written = threading.Event()
    last_write = [0.0]

    def write() -> None:
        with path.open("ab") as log:
            for piece in pieces:
                log.write(piece)
                log.flush()
                time.sleep(FOLLOW_PAUSE_S)
            last_write[0] = time.perf_counter() - FOLLOW_PAUSE_S
        written.set()

    writer = threading.Thread(target=write, daemon=True)
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    writer.start()
    # (timeout_s is a hang guard; the bounds are the ratios below)
    outcome = follow_log(str(path), timeout_s=120, poll_s=FOLLOW_PAUSE_S, status=io.StringIO())
    follow_end, follow_cpu = time.perf_counter(), time.thread_time() - cpu0
    writer.join()
    assert (outcome.exit_code, outcome.reason) == (0, "ready")
    assert outcome.report.last_timestamp == "2025-11-29 10:03:00"  # it read through to the last line
    data = b"".join(pieces)
    wall1, cpu1 = time.perf_counter(), time.thread_time()
    reference = analyze_stream(io.BytesIO(data))
    parse_wall, parse_cpu = time.perf_counter() - wall1, time.thread_time() - cpu1
    cpu2 = time.thread_time()
    walked = sum(
        len(line) for line in io.BytesIO(data)
    )  # the reference: every line visited, nothing read from it
    walk_cpu = time.thread_time() - cpu2
    assert walked == len(data)
    assert reference.state == "ready" and reference.last_timestamp == outcome.report.last_timestamp
    return {
        "MB": len(data) / 1e6,
        "follow_s": follow_end - wall0,
        "follow_cpu_s": follow_cpu,
        "lag_s": max(0.0, follow_end - last_write[0]),
        "parse_s": parse_wall,
        "parse_cpu_s": parse_cpu,
        "walk_cpu_s": walk_cpu,
    }


def test_follow_keeps_up_with_10_mb_per_second(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    """GIVEN a server writing a boot and ~10 MB of serving lines in about 1 s WHEN followed THEN the follower costs
    no more than a few one-shot parses of the same bytes and is done soon after `ready` is written, both measured
    against a one-shot parse timed alongside (so the bound holds on a busy machine and under --benchmark-disable)."""
    pieces = _busy_log()
    runs: list[dict[str, float]] = []
    benchmark.pedantic(
        lambda: runs.append(_follow_once(tmp_path / "server.log", pieces)),
        rounds=1 if benchmark.disabled else 3,
        iterations=1,
    )
    cpu_ratio = statistics.median(r["follow_cpu_s"] / max(r["parse_cpu_s"], 1e-9) for r in runs)
    lag_ratio = statistics.median(r["lag_s"] / max(r["parse_s"], 1e-9) for r in runs)
    # The boot is not ready until the last line, so every prefill line is read (prefilter.UNTIL_READY_NEEDLES): each
    # line once, not the rest of its block again from every line (27.9 s a parse of these 10 MB on the VM until
    # 2026-12-07, 0.8 s since).
    walk_ratio = statistics.median(r["parse_cpu_s"] / max(r["walk_cpu_s"], 1e-9) for r in runs)
    info = {
        "MB": round(runs[0]["MB"], 1),
        "follow_s": round(statistics.median(r["follow_s"] for r in runs), 3),
        "follow_cpu_over_parse_cpu": round(cpu_ratio, 3),
        "lag_over_parse": round(lag_ratio, 3),
        "parse_cpu_over_line_walk": round(walk_ratio, 1),
    }
    benchmark.extra_info.update(info)
    assert cpu_ratio <= FOLLOW_CPU_WITHIN, info
    assert lag_ratio <= FOLLOW_LAG_WITHIN, info
    assert walk_ratio <= SERVING_PARSE_WITHIN_LINE_WALK, info

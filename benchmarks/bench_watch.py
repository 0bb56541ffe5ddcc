"""What watching costs the load it watches (issue 35): the TP2 stand-in server (tests/integration/
test_watch_standin.py) loads the same warm checkpoint unwatched and under ``ckptprof watch --`` at the default
interval, rounds interleaved, in one run; the ratio of the load's walls (as the stand-in's launcher times them) is the
slowdown: of the fastest rounds and of the medians. Warm and without sleeps, both ranks keep both cores of a 2-core VM busy: any CPU the
watcher takes comes out of the load, the worst case for it. ``extra_info`` also holds the watcher's own CPU cost
per sample of the running stand-in (ms), measured in this process.

``CKPTPROF_BENCH_WATCH_ROUNDS`` (default 5) sets the rounds of each, ``CKPTPROF_BENCH_WATCH_PASSES`` (default 6)
how many times each rank reads its shards (a longer load); ``CKPTPROF_BENCH_WATCH_MAX_RATIO`` (unset: no gate; on a quiet
machine 1.02, the target) fails a slower watched load. What is always held: the watcher's CPU per second of watching
stays under 2% of one core, the most it can take from a CPU-bound load.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.synth import synthesize
from ckptprof.watch.watcher import DEFAULT_INTERVAL_S, REDISCOVER_S, Watcher, attach

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "tests" / "integration" / "test_watch_standin.py"
ROUNDS = int(os.environ.get("CKPTPROF_BENCH_WATCH_ROUNDS", "5"))
PASSES = int(os.environ.get("CKPTPROF_BENCH_WATCH_PASSES", "6"))
# The end-to-end gate is opt-in: on a shared VM the rounds' noise (20-60%) swamps a 2% effect either way.
MAX_RATIO = float(os.environ.get("CKPTPROF_BENCH_WATCH_MAX_RATIO", "0") or 0)
# The watcher's own CPU, as a share of one core, bounds what it can take from the load: held to the 2% target.
MAX_CPU_SHARE = 0.02
_TOOK = re.compile(r"stand-in load took ([0-9.]+) s")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    disabled = request.config.getoption("benchmark_disable", default=False)
    out = tmp_path_factory.mktemp("bench-watch") / "llama"
    synthesize(
        out, preset="llama", shards=8, size=16_000_000 if disabled else 128_000_000, seed=11, dtype="fp32"
    )
    fs.warm_cache(sorted(out.glob("*.safetensors")))
    return out


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _standin(ckpt: Path, passes: int) -> list[str]:
    cmd = [sys.executable, str(STANDIN), "--model-path", str(ckpt), "--tp", "2", "--delay-s", "0"]
    return [*cmd, "--serve-s", "0", "--passes", str(passes)]


def _load_s(cmd: list[str]) -> float:
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = _TOOK.search(done.stdout)
    assert found, done.stdout[-2000:]
    return float(found.group(1))


def _watcher_cpu_ms(ckpt: Path) -> tuple[float, float]:
    """The watcher's CPU (ms) per sample of the two ranks and the eight shards, and per look for new ranks (the
    launcher's descendants walked with psutil), in this process."""
    cmd = [sys.executable, str(STANDIN), "--model-path", str(ckpt), "--tp", "2", "--delay-s", "0.01"]
    server = subprocess.Popen([*cmd, "--serve-s", "30"], env=_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            if "ready to roll" in line:
                break
        watcher = Watcher(attach(server.pid))
        watcher._discover()
        assert len(watcher.record.ranks) == 2
        began = time.process_time()
        for _ in range(100):
            watcher._sample()
        sample = (time.process_time() - began) / 100
        began = time.process_time()
        for _ in range(20):
            watcher._discover()
        discover = (time.process_time() - began) / 20
        watcher.residency.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return sample * 1000, discover * 1000


def test_watching_slows_the_load_by_under_the_target(benchmark: Any, ckpt: Path) -> None:
    rounds = 1 if benchmark.disabled else ROUNDS
    passes = 1 if benchmark.disabled else PASSES
    watch = [sys.executable, "-m", "ckptprof", "watch", "-o"]
    plain: list[float] = []
    watched: list[float] = []
    rounds_done = iter(range(rounds))

    def pair() -> None:
        """One unwatched load, then one watched (interleaved: drift on the VM falls on both alike)."""
        k = next(rounds_done)
        plain.append(_load_s(_standin(ckpt, passes)))
        out = ckpt.parent / f"watch-{k}-{time.monotonic_ns()}"
        watched.append(_load_s([*watch, str(out), "--", *_standin(ckpt, passes)]))

    benchmark.pedantic(pair, rounds=rounds, iterations=1)
    ratio = statistics.median(watched) / statistics.median(plain)
    # The fastest round of each: on a VM shared with other work, noise only ever adds time, so the minimums are the
    # steadier comparison (the medians are kept beside them).
    best_ratio = min(watched) / min(plain)
    per_sample_ms, per_discovery_ms = _watcher_cpu_ms(ckpt)
    # CPU per second of watching: a sample every interval, a look for new ranks every REDISCOVER_S
    per_s_ms = per_sample_ms / DEFAULT_INTERVAL_S + per_discovery_ms / REDISCOVER_S
    benchmark.extra_info.update(
        {
            "plain_load_s": plain,
            "watched_load_s": watched,
            "ratio": round(ratio, 4),
            "best_ratio": round(best_ratio, 4),
            "interval_s": DEFAULT_INTERVAL_S,
            "watcher_cpu_per_sample_ms": round(per_sample_ms, 3),
            "watcher_cpu_per_discovery_ms": round(per_discovery_ms, 3),
            "watcher_cpu_share_of_one_core": round(per_s_ms / 1000, 5),
        }
    )
    print(
        f"\nwatch overhead: plain {statistics.median(plain):.3f} s, watched {statistics.median(watched):.3f} s, "
        f"ratio {ratio:.4f}; fastest rounds {min(plain):.3f} / {min(watched):.3f} s, ratio {best_ratio:.4f} "
        f"({rounds} rounds each); watcher CPU {per_sample_ms:.2f} ms per sample, {per_discovery_ms:.2f} ms per "
        f"look for ranks = {per_s_ms / 10:.2f}% of one core at {DEFAULT_INTERVAL_S:g} s"
    )
    assert per_sample_ms > 0
    assert per_s_ms / 1000 < MAX_CPU_SHARE, benchmark.extra_info
    if MAX_RATIO and not benchmark.disabled:
        assert best_ratio < MAX_RATIO, benchmark.extra_info

"""``ckptprof watch`` end to end on a load through a real engine release (the engine tier: ``.ci/engines.sh``).

``ckptprof watch -- ckptprof run CKPT --tp 2 --cache cold --faithful`` with the release on the path: the faithful
pass's two rank processes drive the installed SGLang's or vLLM's own weight iterator (the release's default). What
watch saw is held against what is true: the run's own rank processes (``ckptprof:TP<r>``, the decomposed pass's by
the pid the run saves), each pass's bytes from storage against the run's own per-rank count and, together, against
the checkpoint's size (cold: the run drops its pages before each pass), every shard resident at the end, and the
session rendered by ``ckptprof report`` and held against the run's by ``ckptprof compare``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_runs import Engine

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.synth import synthesize
from ckptprof.units import human_bytes
from ckptprof.watch.against_run import compare, table
from ckptprof.watch.session_file import was_full

REAL_ENGINE = os.environ.get("CKPTPROF_REAL_ENGINE", "")
pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        not REAL_ENGINE, reason="the engine tier: CKPTPROF_REAL_ENGINE=sglang==X (.ci/engines.sh)"
    ),
]

REPO = Path(__file__).resolve().parents[2]
TP = 2
# A pass's ranks together fetch each byte once, cold (test_real_engine.py's STORAGE_TOLERANCE: readahead past a
# file's end and page granularity add a little); one rank's share as watch saw it against the run's own count.
SUM_TOLERANCE = (0.99, 1.02, 1 << 20)
RANK_SLACK = 1 << 20
# What a rank process may read from storage besides the checkpoint after its load began, which watch (the process's
# whole count) sees and the run (its shard walls' count) does not: late imports while it reports. Its reads before
# the load (start-up, the engine's import: 5.4 MB on sglang 0.5.23's faithful rank 0 in one CI run, where the host
# reclaims idle page cache proactively, DAMON's pageout) are measured (read_bytes_before_load) and taken off.
LATE_READS = 4 << 20
# How long each rank waits after each shard it reports (the tests' CKPTPROF_FAULT_DELAY_S, loader/ranks.py): ten
# intervals of watch's sampling, so that a busy machine's late sample still falls before the rank exits.
LINGER_S = 1.0


def _env(**extra: str) -> dict[str, str]:
    # the release's folder stays on PYTHONPATH (the tier puts it there), the checkout before it
    return {
        **extra,
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }


def _droppable(folder: Path) -> bool:
    probe = folder / "drop-probe"
    probe.write_bytes(os.urandom(1 << 20))
    try:
        return fs.drop_cache([probe]).ok
    finally:
        probe.unlink()


def _ckptprof(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ckptprof", *args]
    return subprocess.run(cmd, env=_env(**env), capture_output=True, text=True, timeout=timeout)


class Watched:
    def __init__(
        self, ckpt: Path, watch_dir: Path, run_dir: Path, done: subprocess.CompletedProcess[str]
    ) -> None:
        self.ckpt, self.watch_dir, self.run_dir, self.done = ckpt, watch_dir, run_dir, done
        self.watch: dict[str, Any] = json.loads((watch_dir / "session.json").read_text())
        self.run: dict[str, Any] = json.loads((run_dir / "session.json").read_text())
        self.ckpt_bytes = sum(p.stat().st_size for p in ckpt.glob("*.safetensors"))


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory, engine: Engine) -> Watched:
    root = tmp_path_factory.mktemp("watch-engine")
    if not _droppable(root):
        pytest.skip("the page cache cannot be dropped here: a cold load's storage bytes would be 0")
    ckpt = root / "ckpt"
    synthesize(ckpt, preset="eagle3-draft", shards=4, size=24_000_000, seed=11)
    watch_dir, run_dir = root / "watch", root / "run"
    run = ["run", str(ckpt), "--tp", str(TP), "--devices", "cpu", "--cache", "cold", "--faithful"]
    run += ["--no-probe", *engine.argv(), "-q", "-o", str(run_dir)]
    # the engine's import takes tens of seconds on a busy 2-core machine: no time is asserted, the limit is generous
    args = ["watch", "-o", str(watch_dir), "--interval", "0.1", "--timeout", "840", "--", sys.executable]
    # A server lives on after its load; a run's rank process exits the instant its shards are reported, and its
    # /proc/PID/io goes with it: reads of its last interval go unseen (docs/watch.md). Here a pass's load takes tens
    # of milliseconds, less than one interval, so without a wait watch saw 0 B of a rank that read 21 MB. Each rank
    # waits after every shard it reports (the faithful pass reports them after its wall), as a server would stay:
    # watch's last sample of a rank then holds all it read. The bytes are untouched by the wait.
    done = _ckptprof(*args, "-m", "ckptprof", *run, timeout=900, CKPTPROF_FAULT_DELAY_S=str(LINGER_S))
    assert done.returncode == 0, (
        f"ckptprof {' '.join(args)} -m ckptprof {' '.join(run)}:\n{done.stderr[-4000:]}"
    )
    return Watched(ckpt, watch_dir, run_dir, done)


def test_the_faithful_pass_ran_through_the_installed_engines_own_iterator(
    watched: Watched, engine: Engine
) -> None:
    config = watched.run["config"]
    identity = config["faithful_engine"]
    assert (identity["package"], identity["version"]) == (engine.package, engine.version)
    source = config["faithful_source"]
    assert source.startswith(f"{engine.title}'s own ") and "installed here" in source, source


def test_watch_found_each_passes_rank_processes_by_their_titles(watched: Watched) -> None:
    w, run = watched.watch, watched.run
    assert w["observed"] == "live-server" and w["end_reason"] == "exited"
    assert w["target"]["engine"] == "ckptprof" and w["target"]["started_by_watch"] is True
    # two ranks for the decomposed pass, two new ones for the faithful pass through the engine, titled the same
    assert sorted((r["label"], r["title"]) for r in w["ranks"]) == [
        ("TP0", "ckptprof:TP0"),
        ("TP0", "ckptprof:TP0"),
        ("TP1", "ckptprof:TP1"),
        ("TP1", "ckptprof:TP1"),
    ]
    c = compare(w, run)
    run_pids = {r["pid"] for r in run["ranks"]}
    assert [row["watch"]["matched_by"] for row in c["ranks"]] == ["pid"] * TP
    assert [row["watch"]["pids"] for row in c["ranks"]] == [[r["pid"]] for r in run["ranks"]]
    for row in c["ranks"]:
        faithful = row["watch_faithful"]
        assert faithful is not None and len(faithful["pids"]) == 1 and faithful["pids"][0] not in run_pids
    assert c["unmatched_watch_ranks"] == []
    assert not [n for n in w["notes"] if "while the server went on" in n]


def test_each_passes_bytes_from_storage_are_the_runs_own_and_the_checkpoint_once(watched: Watched) -> None:
    c = compare(watched.watch, watched.run)
    total = watched.ckpt_bytes
    assert c["checkpoint_bytes"] == watched.watch["totals"]["checkpoint_bytes"] == total
    low, high, slack = SUM_TOLERANCE
    before_all = 0
    for name, seen_key, own_key, before_key in (
        ("decomposed", "watch", "storage_bytes", "read_bytes_before_load"),
        ("faithful", "watch_faithful", "faithful_storage_bytes", "faithful_read_bytes_before_load"),
    ):
        seen = [row[seen_key]["read_bytes"] for row in c["ranks"]]
        own = [row["run"][own_key] for row in c["ranks"]]
        before = [row["run"][before_key] for row in c["ranks"]]
        # each rank's bytes as watch saw them from outside are what the rank process had read before its load plus
        # its own count inside its shard walls, never less, and more only by a few late reads
        for rank, (s, o, b) in enumerate(zip(seen, own, before, strict=True)):
            assert s is not None and o is not None and b is not None, (name, rank, seen, own, before)
            assert -RANK_SLACK <= s - b - o <= RANK_SLACK + LATE_READS, (name, rank, seen, own, before)
        # and together, less what they read before loading, the checkpoint once (a page is charged to the rank that
        # faulted it first)
        loading = sum(seen) - sum(before)
        assert low * total <= loading <= high * total + slack + len(seen) * LATE_READS, (
            name,
            seen,
            before,
            total,
        )
        before_all += sum(before)
    extra = 2 * len(c["ranks"]) * LATE_READS
    loading_all = c["watch_read_bytes"] - before_all
    assert low * 2 * total <= loading_all <= high * 2 * total + 2 * slack + extra, (
        c["watch_read_bytes"],
        before_all,
    )


def test_every_shard_filled_the_page_cache_after_the_cold_drop(watched: Watched) -> None:
    model = watched.watch["models"][0]
    assert [(m["role"], m["path"], m["from"]) for m in watched.watch["models"]] == [
        ("target", str(watched.ckpt), "run TARGET")
    ]
    sizes = {p.name: p.stat().st_size for p in watched.ckpt.glob("*.safetensors")}
    assert sorted((s["file"], s["bytes"]) for s in model["shards"]) == sorted(sizes.items())
    assert all(was_full(s) for s in model["shards"])
    c = compare(watched.watch, watched.run)
    assert c["shards_full_while_watched"] == c["shards"] == len(sizes)
    # each shard was seen dropped and filling again to full
    assert c["residency_full_s"] is not None and c["residency_from_s"] is not None


def test_report_renders_the_watch_session(watched: Watched) -> None:
    shown = _ckptprof("report", str(watched.watch_dir))
    assert shown.returncode == 0, shown.stderr
    assert "observed on a live server by ckptprof watch" in shown.stdout
    for r in watched.watch["ranks"]:
        assert str(r["pid"]) in shown.stdout
        # with what it read after watch's last look, recovered from its parent at its reap when it ended between two
        # samples (watch/reaped.py; the report's note says so): whether it did is the machine's timing
        recovered = (r.get("recovered_from_parent") or {}).get("read_bytes") or 0
        assert human_bytes(r["at_last_sight"]["read_bytes"] + recovered) in shown.stdout


def test_compare_holds_the_watch_against_the_runs_own_session(watched: Watched) -> None:
    expected = table(compare(watched.watch, watched.run))
    for pair in ((watched.watch_dir, watched.run_dir), (watched.run_dir, watched.watch_dir)):
        held = _ckptprof("compare", *map(str, pair))
        assert held.returncode == 0, held.stderr
        assert held.stdout.startswith(expected)
    shards = len(watched.watch["models"][0]["shards"])
    assert f"shards whole in page cache while watched: {shards}/{shards}" in expected

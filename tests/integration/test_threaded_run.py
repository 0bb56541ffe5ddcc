"""`ckptprof run` on SGLang's multithread path (the default of 0.5.16+) on the CPU: the per-shard table and the
rank's columns say what happened (#32 item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.analysis.attribution import shard_work_s, slowest_shards
from ckptprof.cli.main import main
from ckptprof.render.rows import RANK_HEADERS, rank_rows
from ckptprof.session import Session


def test_a_multithread_run_keeps_queued_time_apart_and_its_columns_add_up(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a replay of sglang-mt (a pool of threads opens files ahead of the rank's loop)
    out = tmp_path / "run"
    argv = ["run", str(small_draft), "--strategy", "sglang-mt:num_threads=4", "--devices", "cpu"]
    code = main([*argv, "--no-probe", "-q", "--cache", "warm", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    session = Session.load(out / "session.json")
    (rank,) = session.ranks
    (model,) = rank.models
    # THEN every shard's wall is its work plus the time it queued, worked on by a pool thread and the rank's own
    for shard in model.shards:
        assert shard.work_s is not None and shard.queued_s is not None
        assert shard.work_s + shard.queued_s == pytest.approx(shard.wall_s, abs=1e-9)
        assert any(t.startswith("ckptprof-mt") for t in shard.threads or []), shard.threads
        assert "MainThread" in (shard.threads or [])
    # each shard's work fits in the model's wall, however long it queued; summed, the work is thread-seconds: it can
    # exceed the wall when threads read at once (seen: 18.1 ms of work in a 14.6 ms load), never by more than the
    # threads that did it
    assert all((s.work_s or 0.0) <= model.wall_s * 1.05 for s in model.shards)
    threads = {t for s in model.shards for t in s.threads or []}
    assert sum(s.work_s or 0.0 for s in model.shards) <= model.wall_s * len(threads) * 1.05
    # the slowest shards are ranked by work
    works = [shard_work_s(s) for _, _, s in slowest_shards(session, len(model.shards))]
    assert works == sorted(works, reverse=True)
    # and the rank's columns are parts of its wall that add up to it, no busy time above it
    parts = model.wall_parts_s or {}
    assert sum(parts.values()) == pytest.approx(model.wall_s, rel=1e-6)
    assert all(v <= model.wall_s + 1e-9 for v in (model.busy_s or {}).values())
    row = dict(zip(RANK_HEADERS, rank_rows(session)[0], strict=True))
    assert sum(float(row[k].rstrip("%")) for k in ("read", "deser", "h2d", "other")) == pytest.approx(
        100, abs=2
    )

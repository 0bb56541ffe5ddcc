from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ckptprof.analysis.memory import memory_summary, worst_rank
from ckptprof.loader import memory
from ckptprof.session import ModelInfo, RankResult, Session, ShardInfo

GB = 10**9


def test_status_fields_are_read_in_bytes(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
    assert memory.peak_rss_bytes(status) == 2048 * 1024
    assert memory.current_rss_bytes(status) == 1024 * 1024
    assert memory.current_rss_bytes(tmp_path / "missing") == 0


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_resetting_the_peak_forgets_an_earlier_allocation() -> None:
    big = np.ones(256 * 1024 * 1024, dtype=np.uint8)  # 256 MiB, touched
    del big
    before = memory.peak_rss_bytes()
    if not memory.reset_peak_rss():
        pytest.skip("this kernel refuses clear_refs")
    after = memory.peak_rss_bytes()
    assert after < before - 200 * 1024 * 1024  # the old 256 MiB peak is gone
    assert after >= memory.current_rss_bytes() - 64 * 1024 * 1024


def _session(ranks: list[RankResult]) -> Session:
    shards = [ShardInfo(file="a.safetensors", bytes=GB), ShardInfo(file="b.safetensors", bytes=3 * GB // 10)]
    return Session(
        models=[
            ModelInfo(role="target", path="/ckpt", fs_type="ext4", shards=shards, total_bytes=13 * GB // 10)
        ],
        ranks=ranks,
    )


def test_the_summary_names_the_worst_rank_and_what_the_load_added() -> None:
    ranks = [
        RankResult(
            rank=0,
            device="cuda:0",
            peak_rss_bytes=16 * GB // 10,
            rss_before_load_bytes=6 * GB // 10,
            load_peak_rss_bytes=15 * GB // 10,
        ),
        RankResult(
            rank=1,
            device="cuda:0",
            peak_rss_bytes=17 * GB // 10,
            rss_before_load_bytes=7 * GB // 10,
            load_peak_rss_bytes=17 * GB // 10,
        ),
    ]
    worst = worst_rank(_session(ranks))
    assert worst is not None and worst.rank == 1 and worst.load_growth_bytes == GB
    text = memory_summary(_session(ranks))
    assert text is not None
    assert text.startswith("rank 1 peak RSS during the load 1.70 GB (700.00 MB resident when it started")
    assert "+1.00 GB during the load" in text and "largest shard 1.00 GB" in text
    assert "outside the load" not in text  # rank 1's life peak was its load's


def test_the_probes_buffers_are_not_counted_as_the_loads_peak() -> None:
    """GIVEN a rank whose process peaked at 790 MB while the probe ran, and at 313 MB during the load THEN the
    load's peak leads and the process's peak is named apart (it used to lead: "peak RSS 790 MB")."""
    MB = 10**6
    rank = RankResult(
        rank=0,
        device="cpu",
        peak_rss_bytes=790 * MB,
        rss_before_load_bytes=299 * MB,
        load_peak_rss_bytes=313 * MB,
    )
    text = memory_summary(_session([rank]))
    assert text is not None
    assert text.startswith("rank 0 peak RSS during the load 313.00 MB (299.00 MB resident when it started")
    assert "the process peaked at 790.00 MB outside the load (the probe's buffers, earlier passes)" in text


def test_old_sessions_without_the_load_fields_say_only_what_they_have() -> None:
    text = memory_summary(_session([RankResult(rank=0, device="cpu", peak_rss_bytes=GB)]))
    assert text is not None and "during the load" not in text
    assert "peak RSS 1.00 GB over the process's life" in text
    assert memory_summary(_session([])) is None

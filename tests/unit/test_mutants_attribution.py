"""Where the time went, per shard and per rank: figures pinned where mutation testing found them unchecked (#36)."""

from __future__ import annotations

from ckptprof.analysis.attribution import (
    PhaseTotals,
    cold_share,
    faithful_delta,
    overlap_shares,
    rank_skew,
    shard_totals,
)
from ckptprof.session import RankModel, RankResult, Session, ShardTiming


def ranks(*walls: float) -> Session:
    return Session(
        ranks=[
            RankResult(rank=i, device="cpu", models=[RankModel(role="t", wall_s=w)])
            for i, w in enumerate(walls)
        ]
    )


def test_rank_skew_is_the_slowest_over_the_median() -> None:
    assert rank_skew(ranks(1.0, 2.0, 4.0)) == 2.0  # median 2, not the fastest 1
    assert rank_skew(ranks(2.0, 3.0)) == 3.0 / 2.5
    assert rank_skew(ranks(5.0)) == 1.0
    assert rank_skew(ranks(0.0, 0.0, 3.0)) == 1.0  # ranks that measured nothing are left out
    assert rank_skew(ranks(0.0, 2.0, 3.0)) == 3.0 / 2.5


def test_cold_share_takes_the_larger_of_residency_and_the_kernels_count() -> None:
    assert cold_share(ShardTiming(file="s", bytes=100, nonresident_bytes=25, storage_bytes=40)) == 0.4
    assert cold_share(ShardTiming(file="s", bytes=100, nonresident_bytes=25, storage_bytes=10)) == 0.25
    assert cold_share(ShardTiming(file="s", bytes=100, storage_bytes=300)) == 1.0  # read-around: at most all
    assert cold_share(ShardTiming(file="s", bytes=0, storage_bytes=1)) == 1.0
    assert cold_share(ShardTiming(file="s", bytes=0, nonresident_bytes=1)) == 1.0
    assert cold_share(ShardTiming(file="s", bytes=0)) == 0.0


def test_shard_totals_split_the_read_by_what_was_cold() -> None:
    t = shard_totals(
        ShardTiming(
            file="s",
            bytes=100,
            nonresident_bytes=50,
            read_s=2.0,
            deserialize_s=0.5,
            h2d_s=0.25,
            wall_s=3.0,
            h2d_bytes=80,
            storage_bytes=40,
            major_faults=3,
            status="failed",
        )
    )
    assert (t.read_s, t.storage_read_s, t.deserialize_s, t.h2d_s, t.wall_s) == (2.0, 1.0, 0.5, 0.25, 3.0)
    assert (t.bytes, t.h2d_bytes, t.storage_bytes, t.nonresident_bytes, t.major_faults) == (
        100,
        80,
        40,
        50,
        3,
    )
    assert (t.shards, t.failed_shards, t.other_s, t.phase_sum_s) == (1, 1, 0.25, 2.75)
    total = t + t
    assert (total.storage_read_s, total.failed_shards, total.major_faults, total.wall_s) == (2.0, 2, 6, 6.0)


def test_overlapping_phases_credit_storage_first() -> None:
    t = PhaseTotals(read_s=3.0, storage_read_s=2.0, deserialize_s=1.0, h2d_s=1.0, wall_s=4.0)
    # storage 2 of the 4 s wall; the other 2 s split 1:1:1 over page cache, deserialize, h2d (nothing outside)
    assert overlap_shares(t, 4.0) == {
        "storage": 0.5,
        "page_cache": 0.5 / 3,
        "deserialize": 0.5 / 3,
        "h2d": 0.5 / 3,
        "other": 0.0,
    }
    assert overlap_shares(t, 0.0)["other"] == 0.0
    # storage busy longer than the wall is capped at the wall
    assert overlap_shares(t, 1.0, storage_s=5.0)["storage"] == 1.0
    # nothing but storage: the rest of the wall is "other"
    assert overlap_shares(PhaseTotals(read_s=1.0, storage_read_s=1.0), 2.0, other_s=0.0)["other"] == 0.5


def test_faithful_delta_compares_with_the_median_of_the_decomposed_passes() -> None:
    s = ranks(3.0)
    assert faithful_delta(s) is None
    s.ranks[0].models[0].faithful_wall_s = 2.0
    assert faithful_delta(s) == 0.5
    s.ranks[0].models[0].decomposed_walls = [2.0, 2.5, 9.0]
    assert faithful_delta(s) == 0.25

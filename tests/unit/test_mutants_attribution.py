"""Where the time went, per shard and per rank: figures pinned where mutation testing found them unchecked (#36)."""

from __future__ import annotations

from ckptprof.analysis.attribution import (
    PhaseTotals,
    checkpoint_bytes,
    cold_share,
    faithful_delta,
    faithful_load_wall,
    load_wall,
    overlap_shares,
    path_attribution,
    rank_skew,
    rank_totals,
    rank_walls,
    run_totals,
    sampled_attribution,
    shard_totals,
    slowest_shards,
)
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardTiming


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


def test_phase_totals_add_field_by_field() -> None:
    a = PhaseTotals(1.0, 2.0, 3.0, 4.0, 5.0, 6, 7, 8, 9, 10, 11, 12)
    b = PhaseTotals(0.5, 0.25, 0.125, 2.0, 4.0, 100, 200, 300, 400, 500, 600, 700)
    assert a + b == PhaseTotals(1.5, 2.25, 3.125, 6.0, 9.0, 106, 207, 308, 409, 510, 611, 712)


def two_models() -> Session:
    def model(role: str, wall: float, faithful: float | None = None) -> RankModel:
        shard = ShardTiming(file=f"{role}.st", read_s=wall / 2, wall_s=wall, bytes=int(wall * 10))
        return RankModel(role=role, wall_s=wall, shards=[shard], faithful_wall_s=faithful)

    return Session(
        ranks=[
            RankResult(rank=0, device="cpu", models=[model("target", 4.0, 3.0), model("draft", 1.0, 0.5)]),
            RankResult(rank=1, device="cpu", models=[model("target", 6.0, 2.0)]),
            RankResult(rank=2, device="cpu", status="failed", models=[]),
            RankResult(rank=3, device="cpu", status="failed", models=[model("target", 2.0)]),
        ]
    )


def test_walls_and_totals_per_rank_and_role() -> None:
    s = two_models()
    # a failed rank with nothing recorded has no wall; one that recorded a model keeps it
    assert rank_walls(s) == {0: 5.0, 1: 6.0, 3: 2.0}
    assert rank_walls(s, "draft") == {0: 1.0, 1: 0.0, 3: 0.0}
    assert (load_wall(s), load_wall(s, "draft"), load_wall(Session())) == (6.0, 1.0, 0.0)
    assert rank_totals(s, 0) == PhaseTotals(read_s=2.5, wall_s=5.0, bytes=50, shards=2)
    assert rank_totals(s, 0, "draft").wall_s == 1.0 and rank_totals(s, 1, "draft") == PhaseTotals()
    assert run_totals(s, "target").wall_s == 12.0
    # the slowest rank's faithful walls over its models
    assert faithful_load_wall(s) == 3.5
    assert faithful_load_wall(Session()) == 0.0
    # slowest shards first, at most n
    assert [(r, role, t.wall_s) for r, role, t in slowest_shards(s, 2)] == [
        (1, "target", 6.0),
        (0, "target", 4.0),
    ]
    assert len(slowest_shards(s)) == 4
    assert checkpoint_bytes(Session()) == 0


def faithful_session(busy: float | None, storage_read: float) -> Session:
    shard = ShardTiming(
        file="s", bytes=100, nonresident_bytes=100, read_s=storage_read, h2d_s=1.0, wall_s=storage_read + 2.0
    )
    model = RankModel(
        role="t",
        wall_s=storage_read + 2.0,
        shards=[shard],
        faithful_wall_s=4.0,
        faithful_disk_busy_s=busy,
        disk="vda",
    )
    return Session(ranks=[RankResult(rank=0, device="cpu", models=[model])])


def test_path_attribution_credits_the_longer_storage_figure() -> None:
    # the device was busy 3 s of the 4 s faithful wall, more than the decomposed 2 s of reads: its io_ticks win
    shares, source = path_attribution(faithful_session(3.0, 2.0))
    assert source == "io_ticks of vda"
    assert shares is not None and shares["storage"] == 0.75
    # the decomposed reads (3.5 s) said more than the device (1 s): they win, and the device's share is given
    shares, source = path_attribution(faithful_session(1.0, 3.5))
    assert source == "decomposed storage time, more than the io_ticks of vda (25% of the faithful wall)"
    assert shares is not None and shares["storage"] == 3.5 / 4.0
    # no device figure: the decomposed time
    shares, source = path_attribution(faithful_session(None, 2.0))
    assert source == "decomposed storage time" and shares is not None and shares["storage"] == 0.5
    assert path_attribution(ranks(1.0)) == (None, None)


def test_sampled_attribution_splits_the_running_time() -> None:
    s = faithful_session(None, 2.0)
    model = s.ranks[0].models[0]
    model.deserialize_s = 0.0
    model.shards[0].deserialize_s = 1.0
    model.shards[0].wall_s = 4.0  # reads 2, deserialize 1, h2d 1: nothing outside the phases
    model.wall_s = 4.0
    model.faithful_sampled_shares = {"storage": 0.5, "page_cache": 0.1, "cpu": 0.3, "waiting": 0.1}
    # without the copies' spans the running share splits as the decomposed pass timed deserialize : h2d (1 : 1)
    assert sampled_attribution(s) == {
        "storage": 0.5,
        "page_cache": 0.1,
        "deserialize": 0.15,
        "h2d": 0.15,
        "other": 0.3 - 0.15 - 0.15 + 0.1,
    }
    # with them, running and waiting inside the copies are h2d
    model.faithful_sampled_copy_shares = {"cpu": 0.2, "waiting": 0.05}
    shares = sampled_attribution(s)
    assert shares is not None
    assert (shares["deserialize"], shares["h2d"], shares["other"]) == (0.3 - 0.2, 0.2 + 0.05, 0.1 - 0.05)
    assert sampled_attribution(ranks(1.0)) is None


def test_per_role_and_per_rank_figures_pick_their_own() -> None:
    s = two_models()
    s.models = [
        ModelInfo(role="target", path="/t", fs_type="ext4", total_bytes=100),
        ModelInfo(role="draft", path="/d", fs_type="ext4", total_bytes=7),
    ]
    assert (checkpoint_bytes(s), checkpoint_bytes(s, "draft")) == (107, 7)
    assert rank_totals(s, 1).wall_s == 6.0  # rank 0 is listed first: skipped, not the end of the search
    # six shards: the default keeps the five slowest
    many = ranks(*(float(w) for w in range(1, 7)))
    for r in many.ranks:
        r.models[0].shards = [ShardTiming(file="s", wall_s=r.models[0].wall_s)]
    assert [t.wall_s for _, _, t in slowest_shards(many)] == [6.0, 5.0, 4.0, 3.0, 2.0]
    # a faithful delta over two models adds both sides
    s.ranks[0].models[1].decomposed_walls = None
    assert faithful_delta(s) == ((4.0 + 1.0 + 6.0) - (3.0 + 0.5 + 2.0)) / (3.0 + 0.5 + 2.0)


def test_path_attribution_for_one_role() -> None:
    s = faithful_session(3.0, 2.0)
    s.ranks[0].models.append(
        RankModel(role="draft", wall_s=1.0, faithful_wall_s=1.0, faithful_disk_busy_s=0.0)
    )
    shares, source = path_attribution(s, "t")
    assert source == "io_ticks of vda" and shares is not None and shares["storage"] == 0.75
    assert path_attribution(s, "none") == (None, None)


def test_sampled_attribution_of_a_rank_with_no_running_time() -> None:
    s = faithful_session(None, 2.0)
    model = s.ranks[0].models[0]
    model.shards[0].h2d_s = 0.0
    model.shards[0].wall_s = 2.0
    model.wall_s = 2.0
    model.faithful_sampled_shares = {"storage": 0.6, "page_cache": 0.1, "cpu": 0.2, "waiting": 0.1}
    # nothing ran outside the reads in the decomposed pass: the sampled running time is all "other"
    assert sampled_attribution(s) == {
        "storage": 0.6,
        "page_cache": 0.1,
        "deserialize": 0.0,
        "h2d": 0.0,
        "other": 0.2 + 0.1,
    }
    model.faithful_sampled_copy_shares = {"cpu": 0.1, "waiting": 0.0}
    copied = sampled_attribution(s)
    assert copied is not None and (copied["storage"], copied["page_cache"]) == (0.6, 0.1)

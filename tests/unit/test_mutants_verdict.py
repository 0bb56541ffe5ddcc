"""The verdict's figures and words, pinned where mutation testing found them unchecked (issue #36).

Each test builds a session whose numbers make the expected figures easy to derive by hand (4 GB checkpoints, walls
of a few seconds, round ceilings) and checks what ``compute_verdict`` and its helpers return: the whole summary a
user reads, the numbers a script reads from ``--json``, the remedies and their predicted times.
"""

from __future__ import annotations

from typing import Any

from ckptprof.analysis.verdict import (
    close_phases,
    cold_fraction,
    completed_bytes,
    compute_verdict,
    incomplete_work,
    storage_amplification,
)
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

GB = 10**9
CEILINGS: dict[str, Any] = {
    "storage_read_GBps": 1.5,
    "storage_read_1_stream_GBps": 1.25,
    "storage_read_n_streams_GBps": 2.0,
    "storage_streams": 4,
    "page_cache_read_GBps": 8.0,
    "memcpy_GBps": 10.0,
    "h2d_pageable_GBps": {"cuda:0": 8.0, "cuda:1": 6.0},
    "h2d_pinned_GBps": {"cuda:0": 50.0, "cuda:1": 40.0},
}
MT = '--model-loader-extra-config \'{"enable_multithread_load": true, "num_threads": 16}\''
PREFETCH_WHY = (
    "node-local ranks read disjoint files in parallel at ~2.00 GB/s (4 streams) while the load runs"
)
FASTST_WHY = (
    "parallel O_DIRECT reads into pinned buffers, {pinned} GB/s pinned copies; it bypasses a warm page cache, so it "
    "reads every byte from storage (its own rate was not measured: a lower bound)"
)
ONE_RANK_MT_WHY = (
    "the pool only opens files: one rank still faults every byte in itself, in its own loop, whatever the number "
    "of threads, so no faster than this load"
)
NO_MMAP_WHY = "whole-file sequential reads at ~1.25 GB/s instead of 4 KiB page faults"


def build(
    read: float = 2.0,
    deser: float = 0.1,
    h2d: float = 0.4,
    other: float = 0.5,
    *,
    total: int = 4 * GB,
    resident: int = 0,
    ranks: int = 1,
    slow: float = 1.0,
    device: str = "cuda:0",
    fs: str = "ext4",
    storage_bytes: int = 0,
    faults: int = 0,
    config: dict[str, Any] | None = None,
    ceilings: dict[str, Any] | None = None,
) -> Session:
    """One model of one shard of ``total`` bytes; every rank loads all of it (the last rank ``slow`` times slower)."""
    out = []
    for r in range(ranks):
        f = slow if r == ranks - 1 else 1.0
        wall = (read + deser + h2d + other) * f
        shard = ShardTiming(
            file="s",
            bytes=total,
            read_s=read * f,
            deserialize_s=deser * f,
            h2d_s=h2d * f,
            h2d_bytes=total,
            wall_s=wall,
            nonresident_bytes=total - resident,
            storage_bytes=storage_bytes,
            major_faults=faults,
        )
        out.append(
            RankResult(rank=r, device=device, models=[RankModel(role="target", wall_s=wall, shards=[shard])])
        )
    return Session(
        config={"tp": ranks, "devices": [device], **(config or {})},
        models=[
            ModelInfo(
                role="target",
                path="/m",
                fs_type=fs,
                total_bytes=total,
                shards=[ShardInfo("s", total)],
                resident_bytes_before=resident,
            )
        ],
        ranks=out,
        ceilings=Ceilings.from_dict({**CEILINGS, **(ceilings or {})}),
    )


def test_a_cold_load_reads_as_storage_bound_with_every_figure() -> None:
    # GIVEN one rank, 4 GB cold: 2.0 s reading, 0.1 s deserialising, 0.4 s copying, 0.5 s else (a 3.0 s wall)
    v = compute_verdict(build(faults=2000))
    # THEN storage binds: 4 GB in 2 s of reads is 2.00 GB/s, 133% of the 1.50 GB/s ceiling, 2/3 of the rank time
    assert v.summary == (
        "storage-bound: reads fetched 4.00 GB at 2.00 GB/s vs 1.50 GB/s cold read ceiling on ext4 (133%); fetching "
        "them took 67% of rank time; pinned H2D would allow 50.00 GB/s; 1.33 GB/s overall (4.00 GB in 3.00 s, "
        "1 rank(s))"
    )
    assert (v.bottleneck, v.secondary, v.close, v.incomplete) == ("storage", None, (), ())
    assert v.shares == {
        "storage": 0.6667,
        "page_cache": 0.0,
        "deserialize": 0.0333,
        "h2d": 0.1333,
        "other": 0.1667,
    }
    assert v.sampled_shares is None
    assert (v.achieved_GBps, v.fetched_GBps, v.read_GBps, v.h2d_GBps) == (1.3333, 1.3333, 2.0, 10.0)
    assert (v.load_wall_s, v.cold_fraction, v.checkpoint_bytes, v.read_amplification) == (
        3.0,
        1.0,
        4 * GB,
        1.0,
    )
    assert v.major_faults_per_GB == 500.0  # 2000 faults over 4 GB
    assert (v.storage_amplification, v.storage_amplification_source) == (
        0.0,
        "kernel io accounting (read_bytes)",
    )
    assert (v.rank_skew, v.fs_type, v.network_fs, v.h2d_stand_in) == (1.0, "ext4", False, False)
    assert v.floor_s == 2.0  # 4 GB at the 2.0 GB/s N-stream ceiling; the pinned copies take 0.08 s
    assert (v.faithful_delta, v.path_shares, v.faithful_note, v.engine_note) == (None, None, None, None)
    # AND reading faster than the measured ceiling is called out
    assert v.storage_note is not None
    assert v.storage_note.startswith(
        "the replay read at 133% of the cold read ceiling measured in the same run"
    )
    # AND each remedy is priced: prefetch 4 GB / 2.0 GB/s; fastsafetensors that plus 4 GB / 50 GB/s pinned; one
    # rank's pool no faster than this load; no-mmap 4 GB / 1.25 GB/s plus the 1.0 s of compute
    assert v.recommendations == (
        f"--weight-loader-prefetch-checkpoints: ~2.00 s predicted ({PREFETCH_WHY})",
        f"--load-format fastsafetensors: ~2.08 s predicted ({FASTST_WHY.format(pinned='50.0')})",
        f"{MT}: not faster here: ~3.00 s predicted against 3.00 s now ({ONE_RANK_MT_WHY})",
        f"--weight-loader-disable-mmap: not faster here: ~4.20 s predicted against 3.00 s now ({NO_MMAP_WHY})",
    )
    assert [(p.strategy, p.predicted_s, p.slower_than_now) for p in v.predictions] == [
        ("prefetch", 2.0, False),
        ("fastsafetensors", 2.08, False),
        ("sglang-mt:num_threads=16", 3.0, True),
        ("no-mmap", 4.2, True),
    ]


def test_ranks_that_each_fetch_the_checkpoint_are_named_with_the_amplification() -> None:
    # GIVEN two ranks on cuda:1 that each had the kernel read the whole 4 GB from storage
    v = compute_verdict(build(ranks=2, storage_bytes=4 * GB, faults=1000, device="cuda:1"))
    # THEN 8 GB came from storage (2.0x the checkpoint, counted exactly), read in 2 s: 4.00 GB/s
    assert v.summary == (
        "storage-bound: reads fetched 8.00 GB at 4.00 GB/s vs 1.50 GB/s cold read ceiling on ext4 (267%); fetching "
        "them took 67% of rank time; pinned H2D would allow 40.00 GB/s; the 2 ranks fetched 2.0x the checkpoint "
        "from storage (the page cache did not serve them all from one read); 1.33 GB/s overall (4.00 GB in 3.00 s, "
        "2 rank(s))"
    )
    assert (v.storage_amplification, v.fetched_GBps, v.read_GBps) == (2.0, 2.6667, 4.0)
    assert v.major_faults_per_GB == 250.0  # 2000 faults over the 8 GB the ranks read
    # AND with two ranks the pool's faults reach the N-stream rate together: max(4 GB / 2.0 GB/s, 1.0 s)
    assert v.recommendations[1] == (
        f"{MT}: ~2.00 s predicted (16 threads open files ahead; the 2 ranks' faults with read-ahead reach "
        "~2.00 GB/s together and overlap the serial pageable copies)"
    )
    # AND fastsafetensors' batches read 4 GB at 2.0 GB/s and copy 4 GB at cuda:1's 40 GB/s
    assert v.recommendations[2] == (
        f"--load-format fastsafetensors: ~2.10 s predicted ({FASTST_WHY.format(pinned='40.0')})"
    )


def test_an_amplification_at_the_limit_or_on_one_rank_is_not_mentioned() -> None:
    one_rank = compute_verdict(build(storage_bytes=8 * GB))
    assert one_rank.storage_amplification == 2.0 and "fetched 2.0x" not in one_rank.summary
    at_limit = compute_verdict(build(ranks=2, storage_bytes=3 * GB))  # 6 GB: exactly 1.5x
    assert at_limit.storage_amplification == 1.5 and "the checkpoint from storage" not in at_limit.summary
    above = compute_verdict(build(ranks=2, storage_bytes=3 * GB + 4))
    assert "the 2 ranks fetched 1.5x the checkpoint from storage" in above.summary


def test_on_a_network_fs_the_amplification_is_an_upper_bound_from_residency() -> None:
    # GIVEN nfs (no kernel io accounting): 1 GB of 4 cached at the start
    s = build(fs="nfs4", resident=1 * GB)
    assert storage_amplification(s, 4 * GB, ["nfs4"]) == (
        0.75,
        "upper bound from page-cache residency at each shard's start (network fs: not in io accounting)",
    )
    v = compute_verdict(s)
    assert v.summary == (
        "storage-bound: reads fetched 3.00 GB at 1.50 GB/s vs 1.50 GB/s cold read ceiling on nfs4 (100%); fetching "
        "them took 50% of rank time; pinned H2D would allow 50.00 GB/s; 1.33 GB/s overall (4.00 GB in 3.00 s, "
        "1 rank(s))"
    )
    assert (v.network_fs, v.cold_fraction, v.storage_note) == (True, 0.75, None)
    assert v.recommendations[-1] == (
        "copy the checkpoint to local NVMe once (cp -r) and point --model-path there: nfs4 serves 4 KiB mmap faults "
        "slowly and every node re-reads it; run `ckptprof probe` on the local disk to predict the gain"
    )
    # AND two ranks there count what each found missing, never more than the shard
    two = build(fs="nfs4", resident=1 * GB, ranks=2)
    assert storage_amplification(two, 4 * GB, ["nfs4"])[0] == 1.5
    # AND a kernel count, where there is one, wins even on a network fs; no checkpoint gives no figure
    counted = build(fs="nfs4", resident=1 * GB, storage_bytes=1)
    assert storage_amplification(counted, 4 * GB, ["nfs4"]) == (
        1 / (4 * GB),
        "kernel io accounting (read_bytes)",
    )
    assert storage_amplification(s, 0, ["nfs4"]) == (None, "none")


def test_a_warm_load_is_page_cache_bound_in_faults_or_reads() -> None:
    # GIVEN the whole 4 GB cached, 2.0 s of the 2.5 s wall in reads
    faulted = compute_verdict(
        build(2.0, 0.1, 0.2, 0.2, resident=4 * GB, ceilings={"warm_pipeline_GBps": 3.0})
    )
    assert faulted.summary == (
        "page-cache-bound: 100% of the checkpoint was cached, yet mmap page faults took 80% of rank time (2.00 GB/s "
        "through faults vs 8.00 GB/s plain page-cache reads); pinned H2D would allow 50.00 GB/s; reading the page "
        "cache and copying at once, this host reaches 3.00 GB/s; 1.60 GB/s overall (4.00 GB in 2.50 s, 1 rank(s))"
    )
    assert faulted.floor_s == 1.3333  # every copied byte through the host's 3.0 GB/s warm pipeline
    read = compute_verdict(build(2.0, 0.1, 0.2, 0.2, resident=3 * GB, config={"strategy": "no-mmap"}))
    assert read.summary == (
        "page-cache-bound: 75% of the checkpoint was cached, yet reads from the page cache took 60% of rank time "
        "(2.00 GB/s read vs 8.00 GB/s plain page-cache reads); pinned H2D would allow 50.00 GB/s; 1.60 GB/s overall "
        "(4.00 GB in 2.50 s, 1 rank(s))"
    )


def test_copies_bind_against_the_pageable_link_or_the_host_memcpy() -> None:
    cuda = compute_verdict(build(0.2, 0.1, 2.0, 0.2, resident=4 * GB))
    assert cuda.summary == (
        "h2d-bound: host-to-device copies took 80% of rank time at 2.00 GB/s vs 8.00 GB/s pageable ceiling (25%); "
        "pinned H2D would allow 50.00 GB/s; 1.60 GB/s overall (4.00 GB in 2.50 s, 1 rank(s))"
    )
    assert cuda.h2d_GBps == 2.0
    cpu = compute_verdict(build(0.2, 0.1, 2.0, 0.2, resident=4 * GB, device="cpu"))
    assert cpu.summary == (
        "host-copy-bound (no CUDA device: 'h2d' is a host-copy stand-in): the copies took 80% of rank time at "
        "2.00 GB/s vs 10.00 GB/s host memcpy (20%); 1.60 GB/s overall (4.00 GB in 2.50 s, 1 rank(s))"
    )
    assert cpu.h2d_stand_in and cpu.floor_s is None  # no pinned ceiling for "cpu", nothing cold to read


def test_deserialisation_and_other_work_bind_by_their_shares() -> None:
    deser = compute_verdict(build(0.2, 2.0, 0.2, 0.1, resident=4 * GB))
    assert deser.summary == (
        "deserialize-bound: safe_open/get_tensor/narrow took 80% of rank time; 1.60 GB/s overall "
        "(4.00 GB in 2.50 s, 1 rank(s))"
    )
    cpu = compute_verdict(build(0.2, 0.1, 0.2, 2.0, resident=4 * GB))
    assert cpu.summary == (
        "cpu-bound: 80% of rank time was outside reads, deserialisation and copies; 1.60 GB/s overall "
        "(4.00 GB in 2.50 s, 1 rank(s))"
    )


def test_a_tie_names_no_bottleneck_and_says_the_copies_are_a_stand_in() -> None:
    # GIVEN deserialisation 1.0 s and copies 0.95 s of a 2.25 s wall: 44% and 42%, within 10 points
    v = compute_verdict(build(0.2, 1.0, 0.95, 0.1, resident=4 * GB, device="cpu"))
    assert v.summary == (
        "no single bottleneck: deserialisation 44%, copies 42% of rank time, within 10 points of each other "
        "(identical runs move shares this much; none of them binds alone) (no CUDA device: 'h2d' is a host-copy "
        "stand-in); 1.78 GB/s overall (4.00 GB in 2.25 s, 1 rank(s))"
    )
    assert (v.bottleneck, v.close) == ("mixed", ("deserialize", "h2d"))
    on_cuda = compute_verdict(build(0.2, 1.0, 0.95, 0.1, resident=4 * GB))
    assert "stand-in" not in on_cuda.summary
    # AND the remedies priced are the top phase's: deserialisation has none of the storage ones
    assert not any(p.strategy in ("prefetch", "no-mmap") for p in v.predictions)


def test_close_phases_keeps_shares_within_the_noise_that_are_above_zero() -> None:
    assert close_phases({}) == []
    # 0.17 - 0.07 is exactly 0.1 in floating point: a gap of exactly CLOSE_SHARE is still a tie
    assert close_phases({"deserialize": 0.17, "h2d": 0.07, "other": 0.01}) == ["deserialize", "h2d"]
    assert close_phases({"deserialize": 0.5, "h2d": 0.39, "other": 0.11}) == ["deserialize"]
    assert close_phases({"storage": 0.0, "page_cache": 0.0, "other": 0.0}) == []
    # the read phase split by what was cached is one phase
    assert close_phases({"storage": 0.45, "page_cache": 0.4, "h2d": 0.15}) == ["storage"]


def test_rank_skew_binds_only_above_its_limit_and_names_the_phase_under_it() -> None:
    # GIVEN three ranks, the last twice as slow as the others
    v = compute_verdict(build(ranks=3, slow=2.0))
    assert v.summary == (
        "rank-skew: the slowest rank took 2.00x the median rank's wall (then storage-bound); 0.67 GB/s overall "
        "(4.00 GB in 6.00 s, 3 rank(s))"
    )
    assert (v.bottleneck, v.secondary, v.rank_skew) == ("rank-skew", "storage", 2.0)
    # AND the remedies are still the storage ones (the phase under the skew)
    assert v.predictions[0].strategy == "prefetch"
    # AND a skew of exactly the limit, or two ranks' slowest over their median (mean of the two), does not bind
    at_limit = compute_verdict(build(ranks=3, slow=1.5))
    assert (at_limit.bottleneck, at_limit.rank_skew) == ("storage", 1.5)
    assert compute_verdict(build(ranks=2, slow=4.0)).bottleneck == "rank-skew"  # 4 / median(1, 4) = 1.6


def test_a_skew_over_a_tie_prices_the_top_phase() -> None:
    v = compute_verdict(build(0.2, 1.0, 0.95, 0.1, resident=4 * GB, ranks=3, slow=2.0))
    assert (v.bottleneck, v.secondary) == ("rank-skew", "mixed")
    assert v.summary.startswith(
        "rank-skew: the slowest rank took 2.00x the median rank's wall (then no single bottleneck)"
    )


def test_a_session_without_timings_is_unknown_whatever_its_ranks() -> None:
    v = compute_verdict(build(0.0, 0.0, 0.0, 0.0, ranks=2))
    assert v.bottleneck == "unknown" and v.summary.startswith("no rank produced timings; ")
    empty = compute_verdict(Session())
    assert (empty.bottleneck, empty.summary) == (
        "unknown",
        "no rank produced timings; 0.00 GB/s overall (0.00 GB in 0.00 s, 0 rank(s))",
    )


def test_an_incomplete_run_says_what_is_missing_before_the_figures() -> None:
    s = build(ranks=2)
    s.ranks[1].status, s.ranks[1].error, s.ranks[1].models = "failed", None, []
    v = compute_verdict(s)
    assert v.summary == (
        "incomplete run: 1 of 2 ranks failed: rank 1 (no reason given); the figures cover the completed work only "
        "(0.00 GB of 4.00 GB in 3.00 s, no throughput for an unfinished load); storage-bound: reads fetched 4.00 GB "
        "at 2.00 GB/s vs 1.50 GB/s cold read ceiling on ext4 (133%); fetching them took 67% of rank time; pinned H2D "
        "would allow 50.00 GB/s"
    )
    assert v.achieved_GBps is None
    # AND missing ranks and failed shards are both listed, the first failed shard named
    s = build(ranks=2, config={"tp": 4})
    s.ranks[1].models[0].shards[0].status = "failed"
    assert incomplete_work(s) == [
        "2 of 4 ranks reported nothing",
        "1 shard load(s) failed, first s on rank 1",
    ]


def test_incomplete_work_names_the_interruption_the_failure_and_the_first_failed_shard() -> None:
    s = build(ranks=0, config={"tp": 2})
    s.extra["interrupted"] = {"by": "SIGTERM", "stage": "probe"}
    assert incomplete_work(s) == ["interrupted (SIGTERM) during the probe", "no rank replayed anything"]
    v = compute_verdict(s)
    assert v.summary == (
        "incomplete run: interrupted (SIGTERM) during the probe; no rank replayed anything: no load was measured"
    )
    assert (v.achieved_GBps, v.bottleneck) == (None, "unknown")
    s.extra["interrupted"] = {}
    assert incomplete_work(s)[0] == "interrupted (Ctrl-C) during the run"
    # No ranks and no interruption: nothing to say; the expected count of ranks comes from "tp"
    assert incomplete_work(build(ranks=0, config={"tp": 2})) == []
    assert incomplete_work(build(ranks=1, config={"tp": 3})) == ["2 of 3 ranks reported nothing"]
    # A failed rank: its error's first line, cut at 160 characters; failed shards of a failed rank do not count
    s = build(ranks=3)
    s.ranks[1].status, s.ranks[1].error = "failed", "x" * 200 + "\nsecond line"
    s.ranks[2].status = "failed"
    s.ranks[1].models[0].shards[0].status = "failed"
    s.ranks[0].models[0].shards.append(ShardTiming(file="t", status="failed"))
    s.ranks[0].models[0].shards.append(ShardTiming(file="u", status="failed"))
    assert incomplete_work(s) == [
        f"2 of 3 ranks failed: rank 1 ({'x' * 160})",
        "2 shard load(s) failed, first t on rank 0",
    ]


def test_completed_bytes_counts_the_shards_every_running_rank_loaded() -> None:
    s = build(ranks=2)
    s.models[0].shards.append(ShardInfo("t", 100))
    for r in s.ranks:
        r.models[0].shards.append(ShardTiming(file="t", bytes=100))
    assert completed_bytes(s) == 4 * GB + 100
    s.ranks[1].models[0].shards[0].status = "failed"  # rank 1 did not load "s"
    assert completed_bytes(s) == 100
    s.ranks[0].status = "failed"  # a failed rank completed nothing
    assert completed_bytes(s) == 0
    # A shard the session's models do not list counts for nothing; no rank, nothing
    lone = build()
    lone.ranks[0].models[0].shards.append(ShardTiming(file="unlisted", bytes=7))
    assert completed_bytes(lone) == 4 * GB
    assert completed_bytes(Session()) == 0


def test_cold_fraction_from_the_models_or_rank_0s_shards() -> None:
    assert cold_fraction(build(resident=1 * GB)) == 0.75
    assert cold_fraction(Session()) == 0.0
    # Without the models' residency, rank 0's shards say what was missing (clamped to [0, 1])
    s = build(resident=1 * GB, ranks=2)
    s.models[0].resident_bytes_before = None
    assert cold_fraction(s) == 0.75
    s.ranks[0].rank, s.ranks[1].rank = 1, 0
    s.ranks[1].models[0].shards[0].nonresident_bytes = 2 * GB
    assert cold_fraction(s) == 0.5
    s.ranks[1].models[0].shards[0].nonresident_bytes = 9 * GB
    assert cold_fraction(s) == 1.0
    s.ranks = [r for r in s.ranks if r.rank != 0]
    assert cold_fraction(s) == 0.0
    # Two models, only one with its residency known: the known one speaks for the checkpoint
    two = build(resident=1 * GB)
    two.models.append(ModelInfo(role="draft", path="/d", fs_type="ext4", total_bytes=GB, shards=[]))
    assert cold_fraction(two) == 0.75


def test_release_profiles_change_which_remedies_are_priced() -> None:
    # 0.4.x: no multithread loader, no prefetch, no disable-mmap, no fastsafetensors format: nothing to offer
    old = compute_verdict(build(config={"sglang_release": {"profile": "0.4.x"}}))
    assert old.predictions == () and old.recommendations == ()
    # 0.5.1 - 0.5.8: the pool's completed-order variant
    mid = compute_verdict(build(ranks=2, config={"sglang_release": {"profile": "0.5.1 - 0.5.8"}}))
    assert [p.strategy for p in mid.predictions] == ["sglang-mt-completed:num_threads=16", "no-mmap"]
    assert mid.predictions[0].flags == MT
    # 0.5.10 - 0.5.12: prefetch runs beside the default pool (no strategy replays it); the pool is the default
    beside = compute_verdict(build(ranks=2, config={"sglang_release": {"profile": "0.5.10 - 0.5.12"}}))
    prefetch = next(p for p in beside.predictions if p.flags == "--weight-loader-prefetch-checkpoints")
    assert prefetch.strategy is None and prefetch.why == PREFETCH_WHY
    pool = next(p for p in beside.predictions if p.strategy == "sglang-mt:num_threads=16")
    assert pool.why.endswith("overlap the serial pageable copies (this release runs 8 by default)")
    # the pool is on already: only its size is set
    assert pool.flags == "--model-loader-extra-config '{\"num_threads\": 16}'"

    # 0.5.16 and later: prefetch turns the default pool off
    new = compute_verdict(build(config={"sglang_release": {"profile": "0.5.16 and later"}}))
    prefetch = next(p for p in new.predictions if p.strategy == "prefetch")
    assert prefetch.why == (
        PREFETCH_WHY
        + "; on this release it also turns the default multithread loader off, which this prediction "
        "assumes"
    )
    # An unknown profile name, or none, prices every remedy as the newest did before profiles
    assert [
        p.strategy for p in compute_verdict(build(config={"sglang_release": {"profile": 3}})).predictions
    ] == [p.strategy for p in compute_verdict(build()).predictions]


def test_no_mmap_is_priced_with_fresh_memory_shared_by_the_ranks() -> None:
    # GIVEN fresh-memory writes at 4 GB/s alone, 6 GB/s for two writers together: 3 GB/s each
    v = compute_verdict(build(ranks=2, ceilings={"fresh_write_GBps": 4.0, "fresh_write_n_threads_GBps": 6.0}))
    no_mmap = next(p for p in v.predictions if p.strategy == "no-mmap")
    # 4 GB / 1.25 GB/s + 3 passes x 4 GB / 3 GB/s + 4 GB / the slowest pageable link (cuda:1 6 GB/s; not this
    # session's device, but every device measured counts)
    assert no_mmap.predicted_s == round(4 / 1.25 + 3 * 4 / 3.0 + 4 / 6.0, 3)
    # AND one rank writes alone at its own rate
    one = compute_verdict(build(ceilings={"fresh_write_GBps": 4.0, "fresh_write_n_threads_GBps": 6.0}))
    assert next(p for p in one.predictions if p.strategy == "no-mmap").predicted_s == round(
        4 / 1.25 + 3 * 4 / 4.0 + 4 / 6.0, 3
    )


def test_fastsafetensors_priced_from_the_probes_own_timings_of_the_package() -> None:
    sample = {"fastsafetensors_sample": [[1 * GB, 1.0], [4 * GB, 2.0]], "fastsafetensors_sample_files": 2}
    v = compute_verdict(build(ceilings={**sample, "fastsafetensors_GBps": 2.5}))
    fst = next(p for p in v.predictions if p.strategy == "fastsafetensors")
    assert fst.predicted_s == 2.0
    assert fst.why == (
        "each file priced by its size from the package's own timings on 2 of these files, one loader per file as "
        "SGLang does (2.50 GB/s over the sample); it bypasses a warm page cache, so it reads every byte from storage"
    )
    # AND with four ranks the storage shared by all of them bounds it: 4 GB / 2.0 GB/s
    four = compute_verdict(build(ranks=4, ceilings=sample))
    assert next(p for p in four.predictions if p.strategy == "fastsafetensors").predicted_s == 2.0


def test_a_faithful_pass_adds_its_notes() -> None:
    s = build()
    s.ranks[0].models[0].faithful_wall_s = 2.5  # the decomposed 3.0 s is 20% longer
    v = compute_verdict(s)
    assert v.faithful_delta == 0.2
    assert v.faithful_note == (
        "the decomposed phases took 20% longer than SGLang's own sequence: there the copy overlaps the page-fault "
        "I/O of the next chunk, here they are timed one after the other, so the shares describe serialised work"
    )
    assert v.storage_note is not None and v.storage_note.endswith(
        "; SGLang's own sequence fetched 4.00 GB in 2.50 s (1.60 GB/s)"
    )
    # AND the remedies are compared with the faithful wall: the pool's 2.50 s is not faster than 2.50 s now
    assert f"{MT}: not faster here: ~2.50 s predicted against 2.50 s now" in v.recommendations[-2]
    # AND a delta of 5% or less says nothing
    s.ranks[0].models[0].faithful_wall_s = 3.0 / 1.05
    assert compute_verdict(s).faithful_note is None


NO_STORAGE_CEILINGS = {
    "storage_read_GBps": None,
    "storage_read_1_stream_GBps": None,
    "storage_read_n_streams_GBps": None,
}
STORAGE_NOTE = (
    "the replay read at 133% of the cold read ceiling measured in the same run: the probe under-measured this "
    "storage (its reads are not SGLang's page faults), the kernel's read-ahead fetched part of the bytes while other "
    "phases were timed, or the storage lets reads catch up after idle gaps (a token bucket: a cgroup io.max cap, a "
    "cloud volume's throughput credits) - in the last two cases storage held SGLang's load for longer than the "
    "decomposed replay's storage share says"
)


def test_missing_ceilings_read_as_not_available_and_price_nothing_from_storage() -> None:
    v = compute_verdict(build(ceilings=NO_STORAGE_CEILINGS))
    assert v.summary == (
        "storage-bound: reads fetched 4.00 GB at 2.00 GB/s vs n/a cold read ceiling on ext4; fetching them took 67% "
        "of rank time; pinned H2D would allow 50.00 GB/s; 1.33 GB/s overall (4.00 GB in 3.00 s, 1 rank(s))"
    )
    assert v.predictions == () and v.storage_note is None
    # a device without a pinned figure gets no pinned note; a host-copy stand-in with one gets both
    assert "pinned" not in compute_verdict(build(device="cuda:7")).summary
    cpu = compute_verdict(build(device="cpu", ceilings={"h2d_pinned_GBps": {"cpu": 20.0}}))
    assert (
        "; pinned H2D would allow 20.00 GB/s (no CUDA device: 'h2d' is a host-copy stand-in); 1.33"
        in cpu.summary
    )
    # copies bound with no storage ceiling: fastsafetensors' pinned copies alone
    h2d = compute_verdict(build(0.2, 0.1, 2.0, 0.2, resident=4 * GB, ceilings=NO_STORAGE_CEILINGS))
    assert [(p.flags, p.strategy, p.predicted_s, p.why) for p in h2d.predictions] == [
        (
            "--load-format fastsafetensors",
            "fastsafetensors",
            0.08,
            "pinned host buffers copy at 50.0 GB/s instead of pageable staging",
        )
    ]
    assert (
        compute_verdict(build(0.2, 2.0, 0.2, 0.1, resident=4 * GB, ceilings=NO_STORAGE_CEILINGS)).predictions
        == ()
    )


def test_figures_are_rounded_to_their_own_precision() -> None:
    # GIVEN a 4.2 s wall on rank 0 and 3.675 s on rank 1, a third cold, 1237 faults, 1.23456x storage amplification
    s = build(3.0, 0.1, 0.4, 0.7, ranks=2, slow=0.875, resident=2_666_666_667, faults=1237)
    s.ranks[0].models[0].shards[0].storage_bytes = 4_938_240_000
    s.ranks[0].models[0].shards[0].bytes = 4 * GB + 666_666_667
    v = compute_verdict(s)
    assert v.load_wall_s == 4.2
    assert v.rank_skew == round(4.2 / ((4.2 + 3.675) / 2), 3) == 1.067
    assert v.cold_fraction == 0.3333
    assert v.read_amplification == round((8 * GB + 666_666_667) / (4 * GB), 3) == 2.167
    assert v.storage_amplification == 1.235  # 4.93824 GB over 4 GB, three decimals
    assert v.major_faults_per_GB == round(2474 / 8.666666667, 1) == 285.5
    assert v.h2d_GBps == round(8 / 0.75, 4) == 10.6667
    assert v.read_GBps == round(4.93824 / 3.0, 4) == 1.6461
    assert v.fetched_GBps == round(4.93824 / 4.2, 4) == 1.1758
    s.ranks[0].models[0].faithful_wall_s = 3.0
    s.ranks[1].models[0].faithful_wall_s = 3.0
    assert compute_verdict(s).faithful_delta == round((7.875 - 6.0) / 6.0, 4) == 0.3125


def test_a_load_of_no_seconds_has_no_rates() -> None:
    v = compute_verdict(build(0.0, 0.0, 0.0, 0.0, ranks=2))
    assert (v.fetched_GBps, v.read_GBps, v.h2d_GBps, v.achieved_GBps) == (0.0, 0.0, None, 0.0)
    # nothing was measured: no remedy is priced for storage, and none is "slower than now"
    assert [p.strategy for p in v.predictions] == ["fastsafetensors"]
    assert not v.predictions[0].slower_than_now
    # models listed but no rank at all: no read wall, no read rate
    no_ranks = build(ranks=0)
    assert compute_verdict(no_ranks).read_GBps == 0.0
    # under a second of reading is still a rate
    short = compute_verdict(build(0.5, 0.1, 0.1, 0.1))
    assert (short.read_GBps, short.fetched_GBps) == (8.0, 5.0)


def test_fs_types_are_joined_or_unknown() -> None:
    s = build()
    s.models.append(ModelInfo(role="draft", path="/d", fs_type="nfs4", total_bytes=GB, shards=[]))
    assert compute_verdict(s).fs_type == "ext4,nfs4"
    assert compute_verdict(Session()).fs_type == "unknown"


def test_a_partly_incomplete_run_says_how_much_of_it_completed() -> None:
    v = compute_verdict(build(ranks=2, config={"tp": 3}))
    assert v.summary.startswith(
        "incomplete run: 1 of 3 ranks reported nothing; the figures cover the completed work only (4.00 GB of "
        "4.00 GB in 3.00 s, no throughput for an unfinished load); storage-bound: reads fetched 4.00 GB"
    )
    s = build(ranks=2, config={"tp": 3})
    s.ranks[1].models[0].shards[0].status = "failed"
    assert compute_verdict(s).summary.startswith(
        "incomplete run: 1 of 3 ranks reported nothing; 1 shard load(s) failed, first s on rank 1; the figures"
    )


def test_the_upper_bound_on_a_network_fs_is_not_taken_as_fetched() -> None:
    # two ranks on nfs each found 3.2 GB missing: up to 1.6x, but only the 3.2 GB cold part is known fetched
    v = compute_verdict(build(fs="nfs4", resident=800_000_000, ranks=2))
    assert v.summary.startswith("storage-bound: reads fetched 3.20 GB at 1.60 GB/s vs 1.50 GB/s")
    assert "the 2 ranks fetched up to 1.6x the checkpoint from storage" in v.summary
    assert v.floor_s == 1.6  # 3.2 GB at the 2.0 GB/s N-stream ceiling
    # on a local fs whose kernel counted nothing, the cold part is what was fetched
    warm = compute_verdict(build(2.0, 0.1, 0.2, 0.2, resident=3 * GB))
    assert warm.fetched_GBps == 0.4  # 1 GB in 2.5 s


def test_a_warm_load_prices_its_remedies_from_its_compute() -> None:
    v = compute_verdict(build(2.0, 0.1, 0.2, 0.2, resident=4 * GB))
    # nothing to fetch: prefetch and no-mmap cost the 0.5 s of compute; the pool no faster than this load
    assert [(p.strategy, p.predicted_s) for p in v.predictions] == [
        ("prefetch", 0.5),
        ("no-mmap", 0.5),
        ("fastsafetensors", 2.08),
        ("sglang-mt:num_threads=16", 2.5),
    ]
    # on nfs the page-cache-bound load still gets the local-copy advice; so does a skewed one
    assert (
        compute_verdict(build(2.0, 0.1, 0.2, 0.2, resident=4 * GB, fs="nfs4")).predictions[-1].strategy
        is None
    )
    skewed = compute_verdict(build(ranks=3, slow=2.0, fs="nfs4"))
    assert skewed.predictions[-1].flags.startswith("copy the checkpoint to local NVMe")
    # with no stream count the prefetch remedy says "N streams"; three decimals of its time
    odd = compute_verdict(build(ceilings={"storage_streams": None, "storage_read_n_streams_GBps": 3.0}))
    prefetch = next(p for p in odd.predictions if p.strategy == "prefetch")
    assert (prefetch.predicted_s, prefetch.why) == (
        1.333,
        "node-local ranks read disjoint files in parallel at ~3.00 GB/s (N streams) while the load runs",
    )


def test_remedies_are_slower_than_now_against_the_wall_to_the_millisecond() -> None:
    # one rank's pool is priced at this load's own wall, rounded to milliseconds: never faster than now
    v = compute_verdict(build(2.0, 0.1, 0.4, 0.1))  # 2.6 s
    mt = next(p for p in v.predictions if p.strategy == "sglang-mt:num_threads=16")
    assert (mt.predicted_s, mt.slower_than_now) == (2.6, True)
    v = compute_verdict(build(2.0, 0.1, 0.4, 0.5004))  # 3.0004 s: the pool's 3.0 s equals now to the ms
    mt = next(p for p in v.predictions if p.strategy == "sglang-mt:num_threads=16")
    assert (mt.predicted_s, mt.slower_than_now) == (3.0, True)


def test_ranks_sharing_gpus_get_no_fastsafetensors_price() -> None:
    gloo = (
        "not predicted: with 2 ranks sharing GPUs it hands every tensor to every rank through gloo, which no "
        "ceiling measures (replay it: --strategy fastsafetensors)"
    )
    # the configured TP counts, not the ranks that reported
    v = compute_verdict(build(config={"tp": 2, "ranks_share_devices": True}))
    fst = next(p for p in v.predictions if p.strategy == "fastsafetensors")
    assert (fst.flags, fst.predicted_s, fst.why) == ("--load-format fastsafetensors", None, gloo)
    one = compute_verdict(build(config={"tp": 1, "ranks_share_devices": True}))
    assert next(p for p in one.predictions if p.strategy == "fastsafetensors").predicted_s == 2.08
    # copies bound with no storage ceiling: still not priced
    h2d = compute_verdict(
        build(
            0.2,
            0.1,
            2.0,
            0.2,
            resident=4 * GB,
            config={"tp": 2, "ranks_share_devices": True},
            ceilings=NO_STORAGE_CEILINGS,
        )
    )
    assert [p.why for p in h2d.predictions] == [gloo]
    deser = compute_verdict(
        build(
            0.2,
            2.0,
            0.2,
            0.1,
            resident=4 * GB,
            config={"tp": 2, "ranks_share_devices": True},
            ceilings=NO_STORAGE_CEILINGS,
        )
    )
    assert deser.predictions == ()
    # 0.5.9 reads fastsafetensors; its sample without a rate says 0.00 GB/s
    sample = {"fastsafetensors_sample": [[1 * GB, 1.0], [4 * GB, 2.0]], "fastsafetensors_sample_files": 2}
    v = compute_verdict(build(config={"sglang_release": {"profile": "0.5.9"}}, ceilings=sample))
    fst = next(p for p in v.predictions if p.strategy == "fastsafetensors")
    assert fst.predicted_s == 2.0 and "SGLang does (0.00 GB/s over the sample)" in fst.why
    # one rank is not bounded by the shared N-stream read; several without that ceiling are not either
    slow_n = compute_verdict(build(ceilings={**sample, "storage_read_n_streams_GBps": 1.0}))
    assert next(p for p in slow_n.predictions if p.strategy == "fastsafetensors").predicted_s == 2.0
    four = compute_verdict(build(ranks=4, ceilings={**sample, **NO_STORAGE_CEILINGS}))
    assert next(p for p in four.predictions if p.strategy == "fastsafetensors").predicted_s == 2.0


def test_one_rank_writes_fresh_memory_at_its_own_rate_and_no_link_costs_nothing() -> None:
    ceilings = {"fresh_write_GBps": 4.0, "fresh_write_n_threads_GBps": 3.0}
    v = compute_verdict(build(ceilings=ceilings))
    assert next(p for p in v.predictions if p.strategy == "no-mmap").predicted_s == round(
        4 / 1.25 + 3 * 4 / 4.0 + 4 / 6.0, 3
    )
    bare = compute_verdict(build(ceilings={**ceilings, "h2d_pageable_GBps": None}))
    assert next(p for p in bare.predictions if p.strategy == "no-mmap").predicted_s == round(
        4 / 1.25 + 3.0, 3
    )


def test_the_storage_note_in_full_and_at_its_limits() -> None:
    s = build()
    s.ranks[0].models[0].faithful_wall_s = 0.8
    v = compute_verdict(s)
    assert v.storage_note == STORAGE_NOTE + "; SGLang's own sequence fetched 4.00 GB in 0.80 s (5.00 GB/s)"
    assert v.summary.endswith(
        "; storage was busy for 100% of SGLang's own load (faithful wall; decomposed storage time)"
    )
    # half the checkpoint cold is enough; reading at exactly 1.05x the ceiling is not above it
    assert (
        compute_verdict(build(resident=2 * GB, ceilings={"storage_read_GBps": 0.5})).storage_note is not None
    )
    exact = build(total=4_200_000_000, ceilings={"storage_read_GBps": 2.0})
    assert compute_verdict(exact).read_GBps == 2.1 and compute_verdict(exact).storage_note is None
    # a delta of exactly 5% says nothing; 49.4% is "49%"
    s = build(21.0, 0.0, 0.0, 0.0)
    s.ranks[0].models[0].faithful_wall_s = 20.0
    assert compute_verdict(s).faithful_delta == 0.05 and compute_verdict(s).faithful_note is None
    s.ranks[0].models[0].decomposed_walls = [29.88]
    assert compute_verdict(s).faithful_note.startswith("the decomposed phases took 49% longer")  # type: ignore[union-attr]


def test_cold_fraction_at_the_edges() -> None:
    assert cold_fraction(build(resident=0)) == 1.0
    empty = build()
    empty.models[0].total_bytes = 0
    empty.models[0].resident_bytes_before = 0
    assert cold_fraction(empty) == 0.0


def test_small_figures_keep_their_precision() -> None:
    # no pinned ceiling for this device: no pinned note at all
    assert compute_verdict(build(device="cuda:7")).summary == (
        "storage-bound: reads fetched 4.00 GB at 2.00 GB/s vs 1.50 GB/s cold read ceiling on ext4 (133%); fetching "
        "them took 67% of rank time; 1.33 GB/s overall (4.00 GB in 3.00 s, 1 rank(s))"
    )
    # page faults under a second still have a rate: 4 GB in 0.8 s
    fast = compute_verdict(build(0.8, 0.05, 0.05, 0.1, resident=4 * GB))
    assert "(5.00 GB/s through faults vs 8.00 GB/s plain page-cache reads)" in fast.summary
    # a wall and a delta to the fifth decimal are kept to four
    v = compute_verdict(build(2.0, 0.1, 0.4, 0.50004))
    assert v.load_wall_s == 3.0
    s = build(2.0, 0.1, 0.4, 0.5)
    s.ranks[0].models[0].faithful_wall_s = 2.99997
    assert compute_verdict(s).faithful_delta == 0.0
    # two warm ranks: each rank's share of the copied bytes over its pinned link bounds the load
    assert compute_verdict(build(2.0, 0.1, 0.2, 0.2, resident=4 * GB, ranks=2)).floor_s == round(
        8 / 2 / 50, 4
    )


def test_the_faithful_storage_share_is_added_to_the_summary() -> None:
    s = build()
    s.ranks[0].models[0].faithful_wall_s = 2.5
    assert compute_verdict(s).summary == (
        "storage-bound: reads fetched 4.00 GB at 2.00 GB/s vs 1.50 GB/s cold read ceiling on ext4 (133%); fetching "
        "them took 67% of rank time; pinned H2D would allow 50.00 GB/s; 1.33 GB/s overall (4.00 GB in 3.00 s, "
        "1 rank(s)); storage was busy for 80% of SGLang's own load (faithful wall; decomposed storage time)"
    )

from __future__ import annotations

import dataclasses

import pytest

from ckptprof.analysis.attribution import rank_skew, run_totals
from ckptprof.analysis.verdict import compute_verdict
from ckptprof.render import html, markdown, table
from ckptprof.results import Ceilings, Prediction
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

GB = 10**9


def session(
    read: float,
    deser: float,
    h2d: float,
    resident: int,
    ranks: int = 1,
    slow_rank_factor: float = 1.0,
    device: str = "cuda:0",
    fs_type: str = "ext4",
) -> Session:
    total = 4 * GB
    rank_results = []
    for r in range(ranks):
        f = slow_rank_factor if r == ranks - 1 else 1.0
        wall = (read + deser + h2d) * f + 0.01
        shard = ShardTiming(
            file="s",
            bytes=total,
            read_s=read * f,
            deserialize_s=deser * f,
            h2d_s=h2d * f,
            h2d_bytes=total // ranks,
            wall_s=wall,
            nonresident_bytes=total - resident,  # what mincore saw missing when the shard started
        )
        rank_results.append(
            RankResult(rank=r, device=device, models=[RankModel(role="draft", wall_s=wall, shards=[shard])])
        )
    return Session(
        config={"tp": ranks, "devices": [device]},
        models=[
            ModelInfo(
                role="draft",
                path="/c",
                fs_type=fs_type,
                total_bytes=total,
                shards=[ShardInfo("s", total)],
                resident_bytes_before=resident,
            )
        ],
        ranks=rank_results,
        ceilings=Ceilings.from_dict(
            {
                "storage_read_GBps": 1.45,
                "storage_read_1_stream_GBps": 1.4,
                "storage_read_n_streams_GBps": 1.84,
                "storage_streams": 4,
                "page_cache_read_GBps": 7.0,
                "h2d_pageable_GBps": {"cuda:0": 8.7},
                "h2d_pinned_GBps": {"cuda:0": 55.2},
            }
        ),
    )


def test_cold_disk_bound_load_is_storage_bound_with_numbers() -> None:
    # GIVEN the H200 incident's shape: a cold 4 GB load spending 2.9 s in page faults and 0.3 s copying
    v = compute_verdict(session(read=2.9, deser=0.09, h2d=0.3, resident=0))
    assert v.bottleneck == "storage"
    assert v.shares["storage"] > 0.85 and v.shares["page_cache"] == 0
    assert "1.45 GB/s cold read ceiling on ext4" in v.summary
    assert "55.20 GB/s" in v.summary  # what pinned copies would allow
    flags = " ".join(v.recommendations)
    assert "--weight-loader-prefetch-checkpoints" in flags and "enable_multithread_load" in flags
    assert v.floor_s is not None and v.floor_s < v.load_wall_s
    preds = [p.predicted_s for p in v.predictions if p.predicted_s is not None]
    assert preds == sorted(preds)


def test_warm_cache_with_slow_faults_is_page_cache_not_storage() -> None:
    v = compute_verdict(session(read=0.6, deser=0.05, h2d=0.3, resident=4 * GB))
    assert v.bottleneck == "page-cache"
    assert v.cold_fraction == 0.0
    # the read phase of a warm load is page-cache time, not storage time
    assert v.shares["storage"] == 0 and v.shares["page_cache"] > 0.5


def test_copy_dominated_load_is_h2d_bound() -> None:
    v = compute_verdict(session(read=0.02, deser=0.05, h2d=0.5, resident=4 * GB))
    assert v.bottleneck == "h2d"
    assert "8.70 GB/s pageable ceiling" in v.summary
    assert any("fastsafetensors" in r for r in v.recommendations)


def test_one_slow_rank_is_rank_skew() -> None:
    s = session(read=0.02, deser=0.05, h2d=0.5, resident=4 * GB, ranks=8, slow_rank_factor=3.0)
    assert rank_skew(s) > 2.5
    v = compute_verdict(s)
    assert v.bottleneck == "rank-skew" and v.secondary == "h2d"


@pytest.mark.parametrize(("factor", "skewed"), [(1.7, True), (1.4, False)], ids=["1.69x", "1.39x"])
def test_rank_skew_is_named_above_one_and_a_half(factor: float, skewed: bool) -> None:
    # GIVEN 3 ranks, the last one slower by ``factor``: skew 1.69 (over the 1.5 limit) or 1.39 (under it)
    s = session(read=0.02, deser=0.05, h2d=0.5, resident=4 * GB, ranks=3, slow_rank_factor=factor)
    assert (rank_skew(s) > 1.5) is skewed and 1.3 < rank_skew(s) < 1.75
    v = compute_verdict(s)
    # THEN above the limit the slow rank is the bottleneck (the copies second), below it the copies are
    assert (v.bottleneck, v.secondary) == (("rank-skew", "h2d") if skewed else ("h2d", None))


@pytest.mark.parametrize(
    ("deser", "h2d", "bottleneck", "close"),
    [(0.07, 0.42, "mixed", ("page-cache", "h2d")), (0.11, 0.38, "page-cache", ())],
    ids=["8-points-apart", "12-points-apart"],
)
def test_shares_within_ten_points_are_a_tie_and_beyond_them_a_winner(
    deser: float, h2d: float, bottleneck: str, close: tuple[str, ...]
) -> None:
    # GIVEN a warm load whose faults take 50% of rank time and whose copies take 42% or 38%
    v = compute_verdict(session(read=0.5, deser=deser, h2d=h2d, resident=4 * GB, device="cpu"))
    assert v.shares["page_cache"] == pytest.approx(0.5) and v.shares["h2d"] == pytest.approx(h2d)
    # THEN 8 points apart is within the noise (no winner), 12 points apart names the faults
    assert (v.bottleneck, v.close) == (bottleneck, close)
    if bottleneck == "mixed":
        assert "within 10 points of each other" in v.summary


def test_read_amplification_counts_every_rank() -> None:
    v = compute_verdict(session(read=1.0, deser=0.1, h2d=0.1, resident=0, ranks=8))
    assert v.read_amplification == 8.0


def test_cpu_devices_are_labelled_as_stand_ins() -> None:
    v = compute_verdict(session(read=0.1, deser=0.1, h2d=1.0, resident=4 * GB, device="cpu"))
    assert v.h2d_stand_in is True
    assert "stand-in" in v.summary


def test_network_fs_suggests_local_copy() -> None:
    v = compute_verdict(session(read=2.9, deser=0.09, h2d=0.3, resident=0, fs_type="fuse.sshfs"))
    assert v.network_fs is True
    assert any("local NVMe" in r for r in v.recommendations)


def test_empty_session() -> None:
    v = compute_verdict(Session())
    assert v.bottleneck == "unknown"
    assert run_totals(Session()).wall_s == 0


def test_half_cold_shard_splits_its_read_time() -> None:
    s = session(read=1.0, deser=0.0, h2d=0.0, resident=2 * GB)
    shares = compute_verdict(s).shares
    assert abs(shares["storage"] - shares["page_cache"]) < 0.01


def test_network_fs_amplification_is_an_upper_bound_from_residency() -> None:
    # GIVEN 4 ranks on sshfs: the kernel's io accounting saw nothing, each rank found every shard uncached
    s = session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=4, fs_type="fuse.sshfs")
    v = compute_verdict(s)
    # THEN the amplification comes from residency, is said to be a bound, and the summary says "up to"
    assert v.storage_amplification == 4.0
    assert v.storage_amplification_source.startswith("upper bound")
    assert "up to 4.0x the checkpoint" in v.summary


def test_local_fs_amplification_comes_from_the_kernel() -> None:
    s = session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=4)
    for r in s.ranks:
        r.models[0].shards[0].storage_bytes = GB  # the page cache served most ranks
    v = compute_verdict(s)
    assert v.storage_amplification == 1.0
    assert v.storage_amplification_source.startswith("kernel")


def test_path_shares_credit_the_overlap_to_storage() -> None:
    # GIVEN a cold load whose copies (0.6 s alone) mostly hid behind the read-ahead in SGLang's own sequence
    s = session(read=2.5, deser=0.1, h2d=0.6, resident=0)
    assert compute_verdict(s).path_shares is None  # no --faithful: nothing to say about the overlap
    decomposed = s.ranks[0].models[0].wall_s  # 3.21 s
    s.ranks[0].models[0].faithful_wall_s = 2.75
    v = compute_verdict(s)
    on_path = v.path_shares
    # storage busy 2.5 s of 2.75 s; the 0.25 s left split 0.1 : 0.6 : 0.01 over deserialize, h2d and other
    assert abs(on_path["storage"] - 2.5 / 2.75) < 1e-3
    assert abs(sum(on_path.values()) - 1.0) < 1e-3
    assert abs(on_path["h2d"] - 0.25 * 0.6 / 0.71 / 2.75) < 1e-3
    assert v.shares["storage"] < on_path["storage"]  # the decomposed shares stay what they were
    assert "storage was busy for 91% of SGLang's own load" in v.summary
    assert decomposed > 2.75 and v.faithful_delta > 0


def test_path_shares_take_storage_from_the_device_when_it_was_sampled() -> None:
    # GIVEN the same load, and the disk's own io_ticks: busy 2.6 s of SGLang's 2.75 s (more than the decomposition)
    s = session(read=2.5, deser=0.1, h2d=0.6, resident=0)
    m = s.ranks[0].models[0]
    m.faithful_wall_s = 2.75
    assert compute_verdict(s).path_storage_source == "decomposed storage time"
    m.disk, m.faithful_disk_busy_s = "vda", 2.6
    v = compute_verdict(s)
    # THEN storage's share is the device's, the rest split as before, and the summary names the device
    assert abs(v.path_shares["storage"] - 2.6 / 2.75) < 1e-3
    assert abs(sum(v.path_shares.values()) - 1.0) < 1e-3
    assert v.path_storage_source == "io_ticks of vda"
    assert "storage was busy for 95% of SGLang's own load (faithful wall; io_ticks of vda)" in v.summary


def test_path_shares_keep_the_decomposed_storage_time_when_the_device_saw_less() -> None:
    # GIVEN reads held back above the device (a cgroup throttle): the disk was busy 0.2 s, fetching took 2.5 s
    s = session(read=2.5, deser=0.1, h2d=0.6, resident=0)
    m = s.ranks[0].models[0]
    m.faithful_wall_s, m.disk, m.faithful_disk_busy_s = 2.75, "vda", 0.2
    v = compute_verdict(s)
    # THEN the larger of the two measurements counts, and the source says why
    assert abs(v.path_shares["storage"] - 2.5 / 2.75) < 1e-3
    assert (
        v.path_storage_source
        == "decomposed storage time, more than the io_ticks of vda (7% of the faithful wall)"
    )


def test_the_device_busy_time_of_several_ranks_reads_as_a_share_of_the_faithful_wall() -> None:
    # GIVEN 8 ranks on one disk, each seeing it busy 2.0 s of its 2.75 s faithful pass, each fetching for 2.5 s
    s = session(read=2.5, deser=0.1, h2d=0.6, resident=0, ranks=8)
    for r in s.ranks:
        m = r.models[0]
        m.faithful_wall_s, m.disk, m.faithful_disk_busy_s = 2.75, "vda", 2.0
    v = compute_verdict(s)
    # THEN the text gives 73% (2.0 / 2.75), not the 16 s summed over ranks, and the decomposed time wins
    assert (
        v.path_storage_source
        == "decomposed storage time, more than the io_ticks of vda (73% of the faithful wall)"
    )
    assert "16.00 s" not in v.summary


def test_path_shares_fall_back_when_one_model_had_no_device() -> None:
    # A draft on NFS next to a target on a local disk: no device-wide figure for both, so neither is used.
    s = session(read=2.5, deser=0.1, h2d=0.6, resident=0, ranks=2)
    for r in s.ranks:
        r.models[0].faithful_wall_s = 2.75
    s.ranks[0].models[0].faithful_disk_busy_s = 0.1
    v = compute_verdict(s)
    assert v.path_storage_source == "decomposed storage time"
    assert abs(v.path_shares["storage"] - 2.5 / 2.75) < 1e-3


def test_path_shares_never_exceed_the_faithful_wall() -> None:
    # GIVEN a faithful pass faster than the storage time alone (the disk sped up between passes)
    s = session(read=3.0, deser=0.1, h2d=0.2, resident=0)
    s.ranks[0].models[0].faithful_wall_s = 2.0
    on_path = compute_verdict(s).path_shares
    assert on_path["storage"] == 1.0 and sum(on_path.values()) == 1.0


def test_page_cache_wording_follows_how_the_strategy_reads() -> None:
    s = session(read=2.0, deser=0.05, h2d=0.2, resident=4 * GB)
    assert (
        "mmap page faults took" in compute_verdict(s).summary
    )  # SGLang's default path: faults on the mapping
    s.config["strategy"] = "pipelined"
    summary = compute_verdict(s).summary
    assert "reads from the page cache took" in summary and "page faults" not in summary


def test_reads_faster_than_the_measured_ceiling_are_called_out() -> None:
    # GIVEN a cold 4 GB load whose read phase took 2.9 s: 1.38 GB/s, under the 1.45 GB/s ceiling
    assert compute_verdict(session(read=2.9, deser=0.09, h2d=0.3, resident=0)).storage_note is None
    # WHEN it took 2.5 s instead: 1.60 GB/s, 110% of a ceiling measured in the same run (a token bucket refilled
    # during the copies, or a probe that under-measured)
    v = compute_verdict(session(read=2.5, deser=0.09, h2d=0.3, resident=0))
    # THEN the verdict says the two figures disagree and what each explanation would mean
    assert v.storage_note is not None
    assert v.storage_note.startswith(
        "the replay read at 110% of the cold read ceiling measured in the same run"
    )
    assert "token bucket" in v.storage_note
    assert "SGLang's own sequence" not in v.storage_note  # no --faithful: nothing to say about its rate
    # AND with the faithful check, the note gives the rate SGLang's own sequence fetched at (a cap shows up here)
    s = session(read=2.5, deser=0.09, h2d=0.3, resident=0)
    s.ranks[0].models[0].faithful_wall_s = 4 / 1.4
    assert compute_verdict(s).storage_note.endswith(
        "; SGLang's own sequence fetched 4.00 GB in 2.86 s (1.40 GB/s)"
    )
    # AND a warm load, however fast its page-cache reads, is not compared with the storage ceiling
    assert compute_verdict(session(read=0.2, deser=0.09, h2d=0.3, resident=4 * GB)).storage_note is None


def test_every_report_format_prints_the_verdict_caveats() -> None:
    s = session(read=2.5, deser=0.09, h2d=0.3, resident=0)
    s.verdict = compute_verdict(s)
    note = s.verdict.storage_note
    assert f"note: {note}" in table.render(s)
    # Markdown wraps prose at 100 columns (a bullet's continuation lines indented): the note's words, in order
    assert " ".join(note.split()) in " ".join(markdown.render(s).split())
    assert "token bucket" in html.render(s)


def test_a_run_with_a_failed_rank_gets_no_throughput_headline() -> None:
    """GIVEN two ranks, one of which died at once (wall 0.00 s) THEN the verdict says the run is incomplete, which
    rank failed and why, and quotes no GB/s: a dead rank is not a fast load."""
    s = session(read=0.5, deser=0.05, h2d=0.1, resident=0, ranks=2)
    s.ranks[1].status = "failed"
    s.ranks[1].error = "RuntimeError: CUDA out of memory\nTraceback ..."
    s.ranks[1].models = []
    v = compute_verdict(s)
    assert v.summary.startswith(
        "incomplete run: 1 of 2 ranks failed: rank 1 (RuntimeError: CUDA out of memory"
    )
    assert "GB/s overall" not in v.summary
    assert "(0.00 GB of " in v.summary  # rank 1 loaded nothing, so no shard was loaded by every rank
    assert v.achieved_GBps is None and v.incomplete


def test_a_complete_run_keeps_its_throughput() -> None:
    v = compute_verdict(session(read=0.5, deser=0.05, h2d=0.1, resident=0, ranks=2))
    assert v.incomplete == () and v.achieved_GBps > 0 and "GB/s overall" in v.summary


def test_on_cpu_the_copy_stand_in_is_not_called_h2d_bound_against_no_ceiling() -> None:
    s = session(read=0.05, deser=0.01, h2d=0.5, resident=4 * GB, device="cpu")
    s.ceilings = s.ceilings.with_figures({"memcpy_GBps": 12.0})
    v = compute_verdict(s)
    assert v.bottleneck == "h2d"  # the JSON contract's word for the copy phase
    assert v.summary.startswith("host-copy-bound (no CUDA device")
    assert "vs 12.00 GB/s host memcpy" in v.summary and "n/a" not in v.summary


def test_shares_within_the_noise_name_no_single_bottleneck() -> None:
    # GIVEN the CPU runs that flipped between verdicts: warm faults, deserialisation and copies near a third each
    s = session(read=0.34, deser=0.31, h2d=0.33, resident=4 * GB, device="cpu")
    s.ceilings = s.ceilings.with_figures({"memcpy_GBps": 12.0})
    v = compute_verdict(s)
    # THEN no winner is named; the close shares are shown, largest first
    assert v.bottleneck == "mixed"
    assert v.close == ("page-cache", "h2d", "deserialize")
    assert v.summary.startswith(
        "no single bottleneck: page-cache faults 34%, copies 33%, deserialisation 31%"
    )
    assert "host-copy stand-in" in v.summary and "GB/s overall" in v.summary
    s.verdict = v
    # AND the terminal says it once in the model's headline and once in the run's verdict, never twice in a line
    said = [line.count("no single bottleneck") for line in table.render(s).splitlines()]
    assert sorted(n for n in said if n) == [1, 1]
    # AND the flags for the largest share are still offered
    assert v.predictions


def test_a_clear_margin_still_names_the_winner() -> None:
    v = compute_verdict(session(read=0.5, deser=0.05, h2d=0.3, resident=4 * GB))
    assert v.bottleneck == "page-cache" and v.close == ()


def test_storage_and_page_cache_close_together_are_the_read_phase_not_a_tie() -> None:
    # half the checkpoint was cached: the read phase binds, split by what was cached
    v = compute_verdict(session(read=1.0, deser=0.02, h2d=0.05, resident=2 * GB))
    assert v.shares["storage"] > 0.3 and v.shares["page_cache"] > 0.3
    assert v.bottleneck in ("storage", "page-cache") and v.close == ()


def test_every_report_format_heads_a_tie_as_no_single_bottleneck() -> None:
    s = session(read=0.34, deser=0.31, h2d=0.33, resident=4 * GB)
    s.verdict = compute_verdict(s)
    assert markdown.render(s).splitlines()[0] == "## ckptprof verdict: no single bottleneck"
    assert "mixed-bound" not in html.render(s) and "no single bottleneck" in html.render(s)


def test_fastsafetensors_is_not_predicted_when_ranks_share_gpus() -> None:
    # 8 ranks on one GPU: fastsafetensors hands every tensor to every rank over gloo, which no ceiling prices (the
    # H200 measured 7.6-9.1 s against a 1.9 s prediction from reads and pinned copies)
    s = session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=8)
    s.config["ranks_share_devices"] = True
    (fst,) = [p for p in compute_verdict(s).predictions if p.strategy == "fastsafetensors"]
    assert fst.predicted_s is None and "not predicted" in fst.why and "gloo" in fst.why
    # one rank per GPU: the batches' reads and pinned copies add up
    one = compute_verdict(session(read=2.9, deser=0.09, h2d=0.3, resident=0))
    (fst,) = [p for p in one.predictions if p.strategy == "fastsafetensors"]
    assert fst.predicted_s == round(4.0 / 1.84 + 4.0 / 55.2, 3)


def test_fastsafetensors_is_priced_file_by_file_from_its_own_timings_when_the_probe_took_them() -> None:
    # The H200 ran SGLang's fastsafetensors path at 1.2-1.6 GB/s against a 1.8-2.5 GB/s 8-stream O_DIRECT probe:
    # the probe's timings of the package itself on some of the files price every file, cold and warm alike.
    s = session(read=2.9, deser=0.09, h2d=0.3, resident=0)
    s.models[0].shards = [ShardInfo(f"s{i}", 4 * GB // 64) for i in range(64)]
    s.ceilings = s.ceilings.with_figures(
        {
            "fastsafetensors_GBps": 1.6,
            "fastsafetensors_sample": [[4 * GB // 64, 0.05]],
            "fastsafetensors_sample_files": 6,
            "fastsafetensors_sample_bytes": GB,
        }
    )
    (fst,) = [p for p in compute_verdict(s).predictions if p.strategy == "fastsafetensors"]
    assert fst.predicted_s == round(64 * 0.05, 3)
    assert "1.60 GB/s over the sample" in fst.why and "6 of these files" in fst.why
    # TP2, a GPU each: batches of two files read at once, as far as the storage serves both
    s2 = session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=2)
    s2.models[0].shards = s.models[0].shards
    s2.ceilings = s.ceilings
    (fst2,) = [p for p in compute_verdict(s2).predictions if p.strategy == "fastsafetensors"]
    assert fst2.predicted_s == round(max(32 * 0.05, 4.0 / 1.84), 3)


def test_a_remedy_predicted_slower_than_the_load_just_measured_is_not_sold() -> None:
    # Warm, copy-bound at 0.6 s: fastsafetensors reads storage again (2.6 s): listed, checked, not recommended
    s = session(read=0.05, deser=0.05, h2d=0.5, resident=4 * GB)
    s.ceilings = s.ceilings.with_figures(
        {
            "fastsafetensors_GBps": 1.6,
            "fastsafetensors_sample": [[GB, 0.625]],
            "fastsafetensors_sample_files": 4,
            "fastsafetensors_sample_bytes": GB,
        }
    )
    v = compute_verdict(s)
    (fst,) = [p for p in v.predictions if p.strategy == "fastsafetensors"]
    assert fst.slower_than_now is True
    (line,) = [r for r in v.recommendations if r.startswith("--load-format fastsafetensors")]
    assert "not faster here" in line and "against 0.61 s now" in line
    s.verdict = v
    assert "not faster here: ~2.50 s predicted" in markdown.render(s)
    # a remedy that is faster is phrased as before
    cold = compute_verdict(session(read=2.9, deser=0.09, h2d=0.3, resident=0))
    (prefetch,) = [p for p in cold.predictions if p.strategy == "prefetch"]
    assert prefetch.slower_than_now is False
    (line,) = [r for r in cold.recommendations if r.startswith(prefetch.flags)]
    assert "not faster here" not in line and line.startswith(f"{prefetch.flags}: ~")


def test_more_pool_threads_help_ranks_that_fault_together_not_one_rank_alone() -> None:
    # The pool only opens files; the bytes arrive as faults in each rank's own loop. On the H200 x2 box 16 threads
    # ran at 0.86-1.03x the time of the default 8 at TP1, and within 2-11% of max(N-stream read, copies) at TP8.
    def mt(s: Session) -> Prediction:
        (p,) = [p for p in compute_verdict(s).predictions if (p.strategy or "").startswith("sglang-mt")]
        return p

    one = mt(session(read=2.9, deser=0.09, h2d=0.3, resident=0))
    assert one.predicted_s == round(2.9 + 0.09 + 0.3 + 0.01, 3)  # this load's own wall
    assert one.slower_than_now is True and "one rank still faults every byte" in one.why
    eight = mt(session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=8))
    assert eight.predicted_s == round(4.0 / 1.84, 3) and eight.slower_than_now is False
    assert "the 8 ranks' faults" in eight.why


def test_disable_mmap_prices_fresh_memory_shared_by_all_ranks_of_the_node() -> None:
    # 8 ranks write fresh memory at once: each gets an eighth of what 8 writers reach together (TP8 on the H200 x2
    # box: 4.0 GB/s alone, about 2.8 each together; the prediction was 24% short without it)
    def no_mmap(s: Session) -> float:
        (p,) = [p for p in compute_verdict(s).predictions if p.strategy == "no-mmap"]
        return float(p.predicted_s)

    base = {"fresh_write_GBps": 4.0, "h2d_pageable_GBps": {"cuda:0": 8.7}}
    alone = session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=8)
    alone.ceilings = alone.ceilings.with_figures(base)
    together = session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=8)
    together.ceilings = together.ceilings.with_figures(base | {"fresh_write_n_threads_GBps": 22.4})
    copy = (4 * GB // 8) / 8.7 / GB
    assert no_mmap(alone) == round(4.0 / 1.4 + 3 * 4.0 / 4.0 + copy, 3)
    assert no_mmap(together) == round(4.0 / 1.4 + 3 * 4.0 / 2.8 + copy, 3)
    # one rank alone is never slowed by what N writers reach
    one = session(read=2.9, deser=0.09, h2d=0.3, resident=0)
    one.ceilings = one.ceilings.with_figures(base | {"fresh_write_n_threads_GBps": 22.4})
    assert no_mmap(one) == round(4.0 / 1.4 + 3.0 + 4.0 / 8.7, 3)


def test_shares_sampled_from_sglangs_own_threads_name_the_bottleneck() -> None:
    # GIVEN a cold load whose decomposed replay, timing read and copy one after the other, calls it mixed
    s = session(read=1.0, deser=0.1, h2d=0.9, resident=0)
    assert compute_verdict(s).bottleneck == "mixed"
    # WHEN its faithful pass was sampled in the kernel: storage 74%, page cache 6%, running 18%, waiting 2%
    model = s.ranks[0].models[0]
    model.faithful_wall_s = 1.5
    model.faithful_sampled_shares = {"storage": 0.74, "page_cache": 0.06, "cpu": 0.18, "waiting": 0.02}
    v = compute_verdict(s)
    # THEN the sampled shares name the bottleneck, and the running share is split as the replay split it
    assert v.bottleneck == "storage"
    assert v.sampled_shares is not None
    assert v.sampled_shares["storage"] == 0.74 and v.sampled_shares["page_cache"] == 0.06
    running = 0.1 + 0.9 + 0.01  # deserialize, h2d and the replay's other time
    assert v.sampled_shares["h2d"] == pytest.approx(round(0.18 * 0.9 / running, 4))
    assert v.sampled_shares["deserialize"] == pytest.approx(round(0.18 * 0.1 / running, 4))
    assert sum(v.sampled_shares.values()) == pytest.approx(1.0, abs=1e-3)
    assert "took 74% of SGLang's own wall (its threads sampled)" in v.summary
    # AND the decomposed shares stay what they were, the serialised detail
    assert v.shares == compute_verdict(session(read=1.0, deser=0.1, h2d=0.9, resident=0)).shares


def test_time_sampled_inside_sglangs_copies_is_h2d() -> None:
    # GIVEN a warm load whose decomposed replay put nearly all its running time in deserialisation
    s = session(read=0.0, deser=0.9, h2d=0.1, resident=1)
    model = s.ranks[0].models[0]
    model.faithful_wall_s = 1.0
    model.faithful_sampled_shares = {"storage": 0.0, "page_cache": 0.2, "cpu": 0.7, "waiting": 0.1}
    # WHEN the faithful pass kept its copies' spans: 60% of the wall running inside them, 5% waiting inside them
    model.faithful_sampled_copy_shares = {"storage": 0.0, "page_cache": 0.15, "cpu": 0.6, "waiting": 0.05}
    v = compute_verdict(s)
    # THEN the copies are h2d, running outside them deserialisation, waiting outside them other - whatever the
    # serialised replay measured
    assert v.sampled_shares is not None
    assert v.sampled_shares["h2d"] == pytest.approx(0.65)
    assert v.sampled_shares["deserialize"] == pytest.approx(0.1)
    assert v.sampled_shares["other"] == pytest.approx(0.05)
    assert v.sampled_shares["page_cache"] == pytest.approx(0.2)
    assert sum(v.sampled_shares.values()) == pytest.approx(1.0, abs=1e-3)
    assert v.bottleneck == "h2d"
    # AND without the spans the same shares split running time as the replay did (mostly deserialisation)
    model.faithful_sampled_copy_shares = None
    fallback = compute_verdict(s).sampled_shares
    assert fallback is not None and fallback["deserialize"] > fallback["h2d"]


def test_a_vllm_run_gets_vllms_flags_priced_as_sglangs_equivalents() -> None:
    # The same storage-bound cold load, replayed as vLLM's lazy path: the remedies are vLLM's flags, each with the
    # vLLM strategy that --check-predictions replays; SGLang's load formats are not sold to a vLLM server.
    sglang_run = session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=2)
    by_sglang = {p.strategy: p for p in compute_verdict(sglang_run).predictions}
    s = session(read=2.9, deser=0.09, h2d=0.3, resident=0, ranks=2)
    s.config["strategy"] = "vllm"
    s.config["vllm_release"] = {"engine": "vllm", "profile": "0.34 and later"}
    v = compute_verdict(s)
    by_vllm = {p.strategy: p for p in v.predictions}
    assert set(by_vllm) <= {"vllm-prefetch", "vllm-mt:num_threads=16", "vllm-eager"}
    assert by_vllm["vllm-prefetch"].flags == "--safetensors-load-strategy prefetch"
    assert by_vllm["vllm-prefetch"].predicted_s == by_sglang["prefetch"].predicted_s
    assert by_vllm["vllm-eager"].predicted_s == by_sglang["no-mmap"].predicted_s
    assert by_vllm["vllm-mt:num_threads=16"].flags.endswith(
        '"enable_multithread_load": true, "num_threads": 16}\''
    )
    assert not any("weight-loader" in r or "fastsafetensors" in r for r in v.recommendations)
    assert v.engine_note is not None and "priced as SGLang's equivalents are" in v.engine_note
    # a run that already prefetches is not told to prefetch; a release without prefetch never is
    s.config["strategy"] = "vllm-prefetch"
    assert "vllm-prefetch" not in {p.strategy for p in compute_verdict(s).predictions}
    s.config["strategy"] = "vllm"
    s.config["vllm_release"] = {"engine": "vllm", "profile": "0.17"}
    assert "vllm-prefetch" not in {p.strategy for p in compute_verdict(s).predictions}


def test_a_warm_load_is_held_against_the_hosts_warm_pipeline_where_it_was_measured() -> None:
    """GIVEN a warm, page-cache-bound load and a probe that measured the page cache read and copied at once
    THEN the verdict quotes that rate and the floor counts every copied byte through it."""
    s = session(read=0.2, deser=0.01, h2d=0.05, resident=4 * GB)
    before = compute_verdict(s)
    assert "this host reaches" not in before.summary
    s.ceilings = dataclasses.replace(s.ceilings, warm_pipeline_GBps=20.0)
    v = compute_verdict(s)
    assert v.bottleneck == "page-cache"
    assert "reading the page cache and copying at once, this host reaches 20.00 GB/s" in v.summary
    assert before.floor_s is not None and v.floor_s is not None
    assert v.floor_s == pytest.approx(4 * GB / 20e9) and v.floor_s > before.floor_s

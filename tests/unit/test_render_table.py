"""The terminal summary's numbers: the rank row adds up, figures keep their precision, and a warm run does not
print an amplification of nothing."""

from __future__ import annotations

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.render.rows import RANK_HEADERS, rank_rows
from ckptprof.render.table import render
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

GB = 10**9


def _session(read: float, deser: float, h2d: float, wall: float, resident: int) -> Session:
    total = 7 * GB
    shard = ShardTiming(
        file="s",
        bytes=total,
        read_s=read,
        deserialize_s=deser,
        h2d_s=h2d,
        h2d_bytes=total,
        wall_s=wall,
        nonresident_bytes=total - resident,
    )
    s = Session(
        config={"tp": 1, "devices": ["cuda:0"], "cache": "warm", "strategy": "sglang"},
        models=[
            ModelInfo(
                role="target",
                path="/c",
                fs_type="ext4",
                total_bytes=total,
                shards=[ShardInfo("s", total)],
                resident_bytes_before=resident,
            )
        ],
        ranks=[
            RankResult(
                rank=0, device="cuda:0", models=[RankModel(role="target", wall_s=wall, shards=[shard])]
            )
        ],
        ceilings=Ceilings.from_dict({"storage_read_GBps": 1.5, "h2d_pageable_GBps": {"cuda:0": 8.0}}),
    )
    s.verdict = compute_verdict(s)
    return s


def test_the_rank_row_adds_up_with_other_shown() -> None:
    row = dict(zip(RANK_HEADERS, rank_rows(_session(0.1, 0.1, 0.2, 0.5, 7 * GB))[0], strict=True))
    shares = [int(row[key].rstrip("%")) for key in ("read", "deser", "h2d", "other")]
    assert row["other"] == "20%"
    assert abs(sum(shares) - 100) <= 2  # each rounded to a whole percent


def test_whole_numbers_keep_their_precision() -> None:
    text = render(_session(0.1, 0.1, 0.2, 0.5, 7 * GB))  # 7 GB in 0.5 s: exactly 14 GB/s
    row = next(line for line in text.splitlines() if line.split()[:2] == ["0", "cuda:0"])
    assert row.split()[3:6] == ["0.50", "-", "14.00"], row


def test_a_warm_run_does_not_print_an_amplification_of_nothing() -> None:
    text = render(_session(0.1, 0.1, 0.2, 0.5, 7 * GB))
    assert "storage amplification 0.00x" not in text
    assert "storage amplification n/a (nothing was read from storage)" in text


def test_the_time_inside_sglangs_copies_is_a_key_figure_once() -> None:
    from ckptprof.render.rows import key_metrics

    s = _session(0.1, 0.1, 0.2, 0.5, 7 * GB)
    model = s.ranks[0].models[0]
    assert not any("copy_ calls" in label for label, _ in key_metrics(s))  # no faithful pass: no figure
    # GIVEN a faithful pass that timed its copies: 0.46 s of its 0.5 s wall
    model.faithful_wall_s, model.faithful_copy_s = 0.5, 0.46
    rows = dict(key_metrics(s))
    assert rows["SGLang's own load, inside its copy_ calls (faults taken in them included)"] == "target 92%"
    # AND with its threads sampled the figure goes with the sampled shares instead of on a row of its own
    model.faithful_sampled_shares = {"storage": 0.0, "page_cache": 0.1, "cpu": 0.9, "waiting": 0.0}
    rows = dict(key_metrics(s))
    assert not any("copy_ calls" in label for label in rows)
    sampled = rows["SGLang's own load, threads sampled in the kernel: storage / page cache / cpu / waiting"]
    assert sampled == "target 0% / 10% / 90% / 0% (92% of it inside its copies)"

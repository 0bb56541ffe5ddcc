"""The Markdown report: verdict first, GitHub tables, safe cells; and the registry of formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptprof import api
from ckptprof.analysis.attribution import slowest_shards
from ckptprof.analysis.verdict import compute_verdict
from ckptprof.render import FORMATS, RENDERERS, markdown
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

GB = 10**9


def cold_session(path: str = "/data/eagle3", error: str | None = None) -> Session:
    """Two ranks loading a 2-shard draft from a cold disk, with ceilings, so the verdict has numbers."""
    ranks = []
    for r in range(2):
        shards = [
            ShardTiming(file=f"model-0000{i + 1}-of-00002.safetensors", bytes=GB, read_s=0.8, deserialize_s=0.02,
                        h2d_s=0.1, h2d_bytes=GB // 2, wall_s=1.0, start_s=i * 1.0, major_faults=100,
                        nonresident_bytes=GB)
            for i in range(2)
        ]  # fmt: skip
        if error and r == 1:
            shards[1].status, shards[1].error = "failed", error
        ranks.append(
            RankResult(
                rank=r, device=f"cuda:{r}", models=[RankModel(role="draft", wall_s=2.0, shards=shards)]
            )
        )
    session = Session(
        config={"tp": 2, "devices": ["cuda:0", "cuda:1"], "cache": "cold", "strategy": "sglang"},
        models=[
            ModelInfo(
                role="draft",
                path=path,
                fs_type="nfs4",
                total_bytes=2 * GB,
                resident_bytes_before=0,
                shards=[
                    ShardInfo("model-00001-of-00002.safetensors", GB),
                    ShardInfo("model-00002-of-00002.safetensors", GB),
                ],
            )
        ],
        ranks=ranks,
        ceilings=Ceilings.from_dict(
            {
                "storage_read_1_stream_GBps": 1.4,
                "storage_read_n_streams_GBps": 1.8,
                "storage_read_GBps": 1.8,
                "storage_streams": 4,
                "page_cache_read_GBps": 7.0,
                "h2d_pageable_GBps": {"cuda:0": 8.7, "cuda:1": 8.5},
                "h2d_pinned_GBps": {"cuda:0": 55.2, "cuda:1": 54.0},
            }
        ),
        notes=["cold cache: this run dropped the checkpoint's pages"],
        environment={"host": "h200-node-3"},
    )
    session.verdict = compute_verdict(session)
    return session


@pytest.fixture(scope="module")
def real_session(small_draft: Path) -> Session:
    return api.replay(small_draft, tp=2, probe=False)


def test_verdict_comes_first_then_recommendations_and_metrics() -> None:
    # GIVEN a storage-bound cold load on NFS
    session = cold_session()
    # WHEN it is rendered as Markdown
    md = markdown.render(session)
    # THEN the first heading names the bottleneck, a line per model follows, then the summary sentence as a quote
    lines = md.splitlines()
    assert lines[0] == "## ckptprof verdict: storage-bound"
    assert lines[2].startswith("- draft: ") and " s load (" in lines[2]
    quote = next(line for line in lines if line.startswith("> "))
    assert quote.startswith("> storage-bound:") and "GB/s" in quote
    # AND the remedies are a list, flags in code spans, before the tables
    try_at = md.index("**Try**")
    assert "- `--weight-loader-prefetch-checkpoints`: ~" in md
    assert try_at < md.index("**Key metrics**") < md.index("### Per rank") < md.index("### Ceilings")
    # AND the host and the key numbers are there
    assert "host h200-node-3" in md
    assert "| read amplification" in md and "2.00x" in md


def test_tables_are_github_tables_with_every_rank_and_ceiling() -> None:
    # GIVEN a two-rank session WHEN rendered
    md = markdown.render(cold_session())
    # THEN tables use GitHub's header separator, and each rank and each per-device ceiling has a row
    assert "|---" in md
    rank_section = md.split("### Per rank")[1].split("###")[0]
    assert rank_section.count("| draft") == 2
    assert "H2D pinned cuda:1" in md and "54.00 GB/s" in md
    assert "### Notes" in md and "- cold cache" in md


def test_pipes_and_newlines_in_session_text_cannot_break_a_table() -> None:
    # GIVEN a path with a pipe and a shard error spanning lines
    session = cold_session(path="/mnt/a|b", error="OSError: EIO\nat offset 4096 | bad")
    # WHEN rendered
    md = markdown.render(session)
    # THEN the pipes are escaped and the error stays on its table row
    assert "/mnt/a\\|b" in md
    row = next(line for line in md.splitlines() if "OSError" in line)
    assert row.startswith("|") and row.endswith("|") and "EIO at offset 4096 \\| bad" in row


def test_a_session_without_verdict_or_timings_still_renders() -> None:
    # GIVEN an empty session (a run that died before any rank reported)
    md = markdown.render(Session(ranks=[RankResult(rank=0, device="cpu", status="failed", error="OOM")]))
    # THEN it says so instead of crashing
    assert md.startswith("## ckptprof verdict: no verdict")
    assert "failed: OOM" in md and "_not measured_" in md
    assert "**Try:** no predictions: the session has no measured ceilings" in md


def test_every_registered_format_renders_a_real_session(real_session: Session) -> None:
    # GIVEN a session from a real 2-rank replay of the small draft
    assert set(FORMATS) == {"table", "md", "html", "json", "perfetto"}
    outputs = {fmt: RENDERERS[fmt](real_session) for fmt in FORMATS}
    # THEN each format produced something of its kind
    assert "rank" in outputs["table"]
    assert outputs["md"].startswith("## ckptprof verdict:")
    assert outputs["html"].startswith("<!DOCTYPE html>")
    assert Session.from_dict(json.loads(outputs["json"])) == real_session
    assert "traceEvents" in json.loads(outputs["perfetto"])
    # AND the Markdown lists every shard file of the slowest ones with its rank
    assert all(s.file in outputs["md"] for _, _, s in slowest_shards(real_session, 3))


def test_py_spy_top_frames_are_rendered_in_markdown_and_html() -> None:
    from ckptprof.render import html

    session = cold_session()
    assert "py-spy" not in markdown.render(session)  # no --py-spy, no section
    session.extra["py_spy_top_frames"] = {
        "0": {"read": [["madvise (libc.so.6:0)", 0.08]], "h2d": [["cudaMemcpyAsync", 0.2], ["memcpy", 0.1]]}
    }
    md = markdown.render(session)
    section = md[md.index("### py-spy: top frames per phase") : md.index("### Notes")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines() if "|" in line]
    assert ["0", "h2d", "0.20", "cudaMemcpyAsync"] in cells
    assert ["0", "read", "0.08", "madvise (libc.so.6:0)"] in cells
    page = html.render(session)
    assert "py-spy: top frames per phase" in page and "cudaMemcpyAsync" in page

"""The self-contained HTML report and its hand-written SVG charts."""

from __future__ import annotations

import base64
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ckptprof import api
from ckptprof.analysis.verdict import compute_verdict
from ckptprof.render import html, plots, svg
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

GB = 10**9
SVG_NS = "{http://www.w3.org/2000/svg}"


def session_with(path: str = "/data/eagle3", error: str | None = None, ranks: int = 2) -> Session:
    """``ranks`` ranks loading 3 shards each (the last one failed when ``error`` is given), with ceilings."""
    results = []
    for r in range(ranks):
        shards = [
            ShardTiming(file=f"s{i}.safetensors", bytes=GB, read_s=0.5, deserialize_s=0.1, h2d_s=0.2,
                        h2d_bytes=GB // ranks, wall_s=1.0, start_s=float(i), nonresident_bytes=GB)
            for i in range(3)
        ]  # fmt: skip
        if error:
            shards[-1].status, shards[-1].error = "failed", error
        results.append(
            RankResult(
                rank=r, device=f"cuda:{r}", models=[RankModel(role="draft", wall_s=3.0, shards=shards)]
            )
        )
    session = Session(
        config={
            "tp": ranks,
            "devices": [f"cuda:{r}" for r in range(ranks)],
            "cache": "cold",
            "strategy": "sglang",
        },
        models=[
            ModelInfo(
                role="draft",
                path=path,
                fs_type="nfs4",
                total_bytes=3 * GB,
                resident_bytes_before=0,
                shards=[ShardInfo(f"s{i}.safetensors", GB) for i in range(3)],
            )
        ],
        ranks=results,
        ceilings=Ceilings.from_dict(
            {
                "storage_read_1_stream_GBps": 1.4,
                "storage_read_n_streams_GBps": 1.8,
                "storage_read_GBps": 1.8,
                "storage_streams": 4,
                "h2d_pinned_GBps": {"cuda:0": 55.2, "cuda:1": 54.0, "cuda:7": 3.0},
            }
        ),
        notes=["a note"],
    )
    session.verdict = compute_verdict(session)
    return session


def svg_fragments(document: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg .*?</svg>", document, flags=re.S)]


def test_verdict_is_on_top_and_the_sections_follow() -> None:
    # GIVEN a storage-bound session WHEN rendered
    doc = html.render(session_with(), with_plots=False)
    # THEN the verdict (badge, each model's line with its remedy, the run's summary) comes before the charts and
    # tables
    summary = session_with().verdict.summary
    at = [doc.index(x) for x in ("storage-bound</span>", "weight-loader-prefetch-checkpoints", summary[:40],
                                 "<h2>Timeline", "<h2>Per-shard throughput", "<h2>Per rank", "<h2>Ceilings",
                                 "<h2>Notes")]  # fmt: skip
    assert at == sorted(at)
    assert "<title>ckptprof: storage-bound</title>" in doc


def test_it_is_self_contained_no_scripts_and_no_fetches() -> None:
    doc = html.render(session_with(), with_plots=False)
    # THEN nothing can be fetched: no script, no link, no external src / url(), and a CSP forbids it anyway
    assert "<script" not in doc and "<link" not in doc and "url(" not in doc
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", doc)
    assert "default-src 'none'" in doc


def test_session_text_is_escaped() -> None:
    # GIVEN a hostile path and shard error
    doc = html.render(
        session_with(path="/x/<script>alert(1)</script>", error='EIO "&" <img src=x onerror=alert(2)>'),
        with_plots=False,
    )
    # THEN they appear escaped, never as markup
    assert "<script>alert(1)" not in doc and "<img src=x" not in doc
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in doc
    assert "&lt;img src=x onerror=alert(2)&gt;" in doc
    # AND every inline SVG still parses as XML
    assert len(svg_fragments(doc)) == 2


def test_timeline_draws_every_shard_in_its_phases_per_rank() -> None:
    # GIVEN 2 ranks x 3 shards, one failed on each rank
    root = ET.fromstring(svg.timeline_svg(session_with(error="boom")))
    rects = root.iter(f"{SVG_NS}rect")
    fills = [r.get("fill") for r in rects]
    # THEN each ok shard has its read, deserialize and h2d blocks, and failed shards are drawn in red
    assert fills.count(svg.PHASE_COLORS["read"]) >= 4  # 4 ok shards (+ the legend swatch)
    assert fills.count(svg.PHASE_COLORS["h2d"]) >= 4
    assert fills.count(svg.FAILED_COLOR) == 2
    labels = [t.text for t in root.iter(f"{SVG_NS}text")]
    assert "rank 0 · cuda:0" in labels and "rank 1 · cuda:1" in labels
    # AND each shard carries a tooltip with its numbers
    tips = [t.text or "" for t in root.iter(f"{SVG_NS}title")]
    assert any("s1.safetensors" in t and "1.00 GB/s" in t for t in tips)


def test_throughput_chart_draws_the_ceilings_of_the_devices_used() -> None:
    # GIVEN ceilings for cuda:0, cuda:1 and an unused cuda:7
    lines = svg.ceiling_lines(session_with())
    # THEN per-device H2D lines use the slowest device the ranks used, not the unused one
    assert ("H2D pinned", 54.0) in lines
    assert ("storage cold, 4 streams", 1.8) in lines
    root = ET.fromstring(svg.throughput_svg(session_with()))
    texts = [t.text for t in root.iter(f"{SVG_NS}text")]
    assert "H2D pinned: 54.00" in texts and "storage cold, 1 stream: 1.40" in texts
    # AND one dot per rank and shard; the 1.0..54 GB/s range is shown on a log axis
    assert len(list(root.iter(f"{SVG_NS}circle"))) == 6
    assert any("log scale" in (t.text or "") for t in root.iter(f"{SVG_NS}text"))


def test_a_failed_rank_without_timings_and_an_empty_session_still_render() -> None:
    # GIVEN a rank that died before loading anything
    session = session_with()
    session.ranks.append(RankResult(rank=2, device="cuda:2", status="failed", error="CUDA out of memory"))
    doc = html.render(session, with_plots=False)
    assert "failed: CUDA out of memory" in doc
    # AND a session with nothing in it renders with a placeholder instead of charts
    empty = html.render(Session(), with_plots=False)
    assert "no shard timings in this session" in empty and "No verdict in this session." in empty


def test_without_matplotlib_there_are_no_png_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN matplotlib cannot be imported
    monkeypatch.setattr(plots, "available", lambda: False)
    doc = html.render(session_with())
    # THEN the report has its tables and SVG timeline but no images
    assert "<img" not in doc and "<h2>Timeline" in doc and "<h2>Per rank" in doc


def test_with_matplotlib_figures_are_embedded_as_data_uris() -> None:
    # Runs wherever matplotlib imports; CI installs it (the `plot` extra), so there it must not be skipped.
    if not plots.available():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail("matplotlib must be installed in CI (pip install -e '.[plot]')", pytrace=False)
        pytest.skip("matplotlib is not installed")
    doc = html.render(session_with())
    # THEN both figures are there, each a real PNG under its caption, in the order the report lists them
    found = re.findall(r'<figure><img alt="([^"]+)" src="data:image/png;base64,([^"]+)">', doc)
    assert [caption for caption, _ in found] == [
        "Seconds per phase, per rank",
        "Shard throughput distribution",
    ]
    for _, data in found:
        assert base64.b64decode(data, validate=True).startswith(b"\x89PNG\r\n\x1a\n")


def test_nice_steps_and_log_ticks() -> None:
    assert [svg.nice_step(x) for x in (0.68, 4.0, 95.0)] == [0.1, 0.5, 20.0]
    scale = svg._y_scale([0.9, 55.0], top=0, height=100)
    assert scale.log and scale.ticks()[0] == 0.1 and scale.ticks()[-1] == 100.0


@pytest.fixture(scope="module")
def real_session(small_draft: Path) -> Session:
    return api.replay(small_draft, tp=2, probe=False)


def test_a_real_session_renders_with_every_shard_on_the_timeline(real_session: Session) -> None:
    # GIVEN a real 2-rank replay of the 8-shard draft WHEN rendered
    doc = html.render(real_session, with_plots=False)
    timeline = svg_fragments(doc)[0]
    # THEN the timeline has a tooltip per shard per rank, and the verdict summary is on top
    tips = [t.text or "" for t in timeline.iter(f"{SVG_NS}title") if ".safetensors" in (t.text or "")]
    assert len(tips) == 2 * 8
    assert doc.index(real_session.verdict.summary[:30]) < doc.index("<h2>Timeline")

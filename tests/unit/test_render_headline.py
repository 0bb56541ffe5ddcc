"""Every report opens with one headline per model (#34 item 1): each model's own load wall, its own binding limit
with the figure that shows it and its own remedy, in the same words in the terminal, Markdown and HTML."""

from __future__ import annotations

import re
from html import unescape

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.render import html, markdown, table
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

GB = 10**9


def _model(
    role: str, total: int, resident: int, read: float, deser: float, h2d: float, other: float
) -> tuple[ModelInfo, RankModel]:
    wall = read + deser + h2d + other
    shard = ShardTiming(
        file=f"{role}.safetensors",
        bytes=total,
        read_s=read,
        deserialize_s=deser,
        h2d_s=h2d,
        h2d_bytes=total,
        wall_s=wall,
        nonresident_bytes=total - resident,
    )
    info = ModelInfo(
        role=role,
        path=f"/ckpt/{role}",
        fs_type="ext4",
        total_bytes=total,
        shards=[ShardInfo(shard.file, total)],
        resident_bytes_before=resident,
    )
    return info, RankModel(role=role, wall_s=wall, start_s=0.0, shards=[shard])


def pair() -> Session:
    """A cold 4 GB target that waits on storage (2.0 s of its 3.0 s reading) and a cached 1 GB draft that waits on
    its copies (0.6 s of 0.75 s): two models bound by different limits, with different remedies."""
    target_info, target = _model("target", 4 * GB, 0, 2.0, 0.1, 0.4, 0.5)
    draft_info, draft = _model("draft", 1 * GB, 1 * GB, 0.05, 0.05, 0.6, 0.05)
    s = Session(
        config={"tp": 1, "devices": ["cuda:0"], "cache": "as-is", "strategy": "sglang"},
        models=[target_info, draft_info],
        ranks=[RankResult(rank=0, device="cuda:0", models=[target, draft])],
        ceilings=Ceilings.from_dict(
            {
                "storage_read_GBps": 1.5,
                "storage_read_1_stream_GBps": 1.25,
                "storage_read_n_streams_GBps": 2.0,
                "storage_streams": 4,
                "page_cache_read_GBps": 8.0,
                "h2d_pageable_GBps": {"cuda:0": 8.0},
                "h2d_pinned_GBps": {"cuda:0": 50.0},
            }
        ),
    )
    s.verdict = compute_verdict(s)
    return s


def test_the_terminal_opens_with_each_models_own_verdict() -> None:
    # GIVEN a target bound by storage and a draft bound by its copies, loaded in one run
    lines = table.render(pair()).splitlines()
    # THEN the first two lines are one per model, before any table or the pair's verdict
    target, draft = lines[0], lines[1]
    assert target.startswith("target: 3.00 s load (4.00 GB, 1 rank); storage-bound: storage reads took 67%")
    assert "2.00 GB/s, 133% of the 1.50 GB/s cold-read ceiling" in target
    assert draft.startswith("draft: 0.75 s load (1.00 GB, 1 rank); h2d-bound: host-to-device copies took 80%")
    # AND each names its own remedy, priced for its own load
    assert "try --weight-loader-prefetch-checkpoints (~2.00 s predicted)" in target
    assert "try --load-format fastsafetensors" in draft and "prefetch" not in draft


def test_markdown_and_html_open_with_the_same_headlines() -> None:
    s = pair()
    expected = table.render(s).splitlines()[:2]
    # Markdown: one bullet per model right under the title, flags in code spans, wrapped at 100 columns
    md = markdown.render(s)
    head = md.split("\n\n")[1]
    bullets = [" ".join(b.split()) for b in re.split(r"^- ", head, flags=re.M) if b]
    assert [b.replace("`", "") for b in bullets] == expected
    assert md.index("- target: ") < md.index("|")
    # HTML: the headline section's model lines, tags stripped, say the same
    page = html.render(s, with_plots=False)
    items = re.findall(r'<li class="model-headline">(.*?)</li>', page)
    assert [unescape(re.sub(r"<[^>]+>", "", i)) for i in items] == expected
    assert page.index('class="model-headline"') < page.index('id="timeline"')

"""One storage figure (#32 item 8): every view shows the storage share the documented rule trusts, under one name;
a headline says when two attributions disagree beyond their noise, which one it trusts and why; and one word names
each limit in the badge and the text."""

from __future__ import annotations

import re
from html import unescape

from ckptprof.analysis.storage import StorageEstimate, disagree, storage_figure
from ckptprof.analysis.verdict import compute_verdict
from ckptprof.render import html, markdown, table
from ckptprof.render.rows import headline
from ckptprof.results import Ceilings
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

GB = 10**9


def cpu_cold_load(ranks: int = 1, slow: float = 1.0) -> Session:
    """A cold 2 GB load on the CPU whose replay timed its copies as most of the wall (0.2 s reading, 2.0 s copying):
    host-copy-bound by the decomposed shares, as the 2-core VM's cold loads read."""
    out = []
    for r in range(ranks):
        f = slow if r == ranks - 1 else 1.0
        shard = ShardTiming(
            file="s",
            bytes=2 * GB,
            read_s=0.2 * f,
            deserialize_s=0.1 * f,
            h2d_s=2.0 * f,
            h2d_bytes=2 * GB,
            wall_s=2.5 * f,
            nonresident_bytes=2 * GB,
        )
        out.append(
            RankResult(
                rank=r, device="cpu", models=[RankModel(role="target", wall_s=2.5 * f, shards=[shard])]
            )
        )
    s = Session(
        config={"tp": ranks, "devices": ["cpu"], "cache": "cold", "strategy": "sglang"},
        models=[ModelInfo("target", "/m", "ext4", 2 * GB, [ShardInfo("s", 2 * GB)], resident_bytes_before=0)],
        ranks=out,
        ceilings=Ceilings.from_dict({"storage_read_GBps": 1.0, "memcpy_GBps": 4.0}),
    )
    s.verdict = compute_verdict(s)
    return s


def with_referee(s: Session, share: float) -> Session:
    s.extra["cache_referee"] = {"pass": "decomposed", "storage_share": share, "incomplete": []}
    return s


def test_a_referee_that_disagrees_is_named_trusted_and_explained_in_every_view() -> None:
    # GIVEN a cold CPU load the replay calls host-copy-bound, while cold minus warm says 85% of it was storage
    s = with_referee(cpu_cold_load(), 0.85)
    assert s.verdict is not None and s.verdict.bottleneck == "h2d"
    text = table.render(s)
    # THEN the headline says the figures disagree, which one it trusts and why, before any table
    said = next(line for line in text.splitlines() if "disagree" in line)
    assert text.index(said) < text.index("rank    device")
    assert said.startswith(
        "storage figures disagree beyond their noise: cold minus warm says 85%, decomposed replay"
    )
    assert (
        "shown is cold minus warm's, because it times the same load with and without the storage path" in said
    )
    # AND the terminal, Markdown and HTML show the same figure under the same name
    figure = "storage share: 85% of the cold load's wall (cold minus warm); also "
    assert figure in text
    md = " ".join(markdown.render(s).split())
    assert re.search(r"storage share(:| \|) 85% of the cold load's wall \(cold minus warm\); also", md)
    assert "Storage figures disagree beyond their noise: cold minus warm says 85%" in md
    page = unescape(re.sub(r"<[^>]+>", " ", html.render(s, with_plots=False)))
    assert "storage share" in page and "85% of the cold load's wall (cold minus warm)" in page
    assert "storage figures disagree beyond their noise" in page


def test_figures_within_their_noise_raise_nothing() -> None:
    s = cpu_cold_load()
    decomposed = storage_figure(s)
    assert decomposed is not None and decomposed.trusted.name == "decomposed replay"
    # GIVEN a referee within the two figures' noise of the decomposed share
    with_referee(s, decomposed.trusted.share + 0.12)
    figure = storage_figure(s)
    # THEN the referee is the figure shown, and nothing is said to disagree (0.12 < hypot(0.10, 0.10))
    assert figure is not None and figure.trusted.name == "cold minus warm" and figure.disagreement() is None
    assert "disagree" not in table.render(s)
    assert disagree(StorageEstimate("cold_minus_warm", 0.5), StorageEstimate("decomposed", 0.35))
    assert not disagree(StorageEstimate("cold_minus_warm", 0.5), StorageEstimate("decomposed", 0.37))


def test_badge_and_text_use_one_word_for_each_limit() -> None:
    # GIVEN a CPU load (no CUDA device: the copies are host copies)
    s = cpu_cold_load()
    assert s.verdict is not None
    # THEN the badge is the summary's first word
    assert headline(s) == "host-copy-bound" and s.verdict.summary.startswith("host-copy-bound")
    # AND a skew over it names the same limit, never 'h2d-bound'
    skewed = cpu_cold_load(ranks=3, slow=2.0)
    assert skewed.verdict is not None and skewed.verdict.bottleneck == "rank-skew"
    assert "(then host-copy-bound)" in skewed.verdict.summary
    assert "h2d-bound" not in table.render(skewed)

"""The badge (the report's headline) and the verdict's text call one bottleneck by one word (#32 item 8): on a
machine without CUDA the copy phase is a host-copy stand-in, and both say "host-copy-bound"."""

from __future__ import annotations

import pytest

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.render.rows import headline
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardTiming

GB = 1_000_000_000


def load(device: str, walls: tuple[float, ...], h2d: float) -> Session:
    ranks = []
    for i, wall in enumerate(walls):
        shard = ShardTiming(
            file="a", bytes=GB, read_s=0.05 * wall, h2d_s=h2d * wall, h2d_bytes=GB, wall_s=wall
        )
        ranks.append(
            RankResult(rank=i, device=device, models=[RankModel(role="target", wall_s=wall, shards=[shard])])
        )
    return Session(
        config={"tp": len(walls), "strategy": "sglang"},
        models=[
            ModelInfo(role="target", path="/c", fs_type="ext4", total_bytes=GB, resident_bytes_before=GB)
        ],
        ranks=ranks,
    )


@pytest.mark.parametrize(
    ("device", "walls", "badge"),
    [
        ("cpu", (1.0,), "host-copy-bound"),
        ("cuda:0", (1.0,), "h2d-bound"),
        ("cuda:0", (1.0, 1.0, 3.0), "rank-skew"),
    ],
)
def test_the_badge_is_the_first_word_of_the_verdict(
    device: str, walls: tuple[float, ...], badge: str
) -> None:
    # GIVEN a load whose copies take 90% of the rank's time (on a CUDA device, or the host-copy stand-in)
    session = load(device, walls, h2d=0.9)
    session.verdict = compute_verdict(session)
    # THEN the headline and the summary name the bottleneck with the same word
    assert headline(session) == badge
    assert session.verdict.summary.startswith(badge)

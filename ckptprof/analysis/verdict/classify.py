"""Which limit binds the load, decided from the figures: the largest phase, a tie, or ranks that wait for one.

Pure arithmetic over ``Figures``; the words for each outcome are ``wording``'s, the remedies ``remedies``'.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptprof.analysis.verdict.figures import Figures

SKEW_LIMIT = 1.5
# Top shares closer than this (absolute, of rank time) name no winner: on the 2-core CPU VM, identical default runs
# moved the read / deserialize / copy / other shares by up to this much (reports/cpu/2026-11-30-verdict-noise).
CLOSE_SHARE = 0.10
PHASE_BOTTLENECK = {
    "storage": "storage",
    "page_cache": "page-cache",
    "h2d": "h2d",
    "deserialize": "deserialize",
    "other": "cpu",
}
# Every word `verdict.bottleneck` can hold when there are timings (the JSON contract users script against).
BOTTLENECKS = ("storage", "page-cache", "deserialize", "h2d", "rank-skew", "cpu", "mixed")


@dataclass(frozen=True)
class Classification:
    """The binding limit, and what stands behind it."""

    # One of BOTTLENECKS, or "unknown" when no rank produced timings.
    bottleneck: str
    # Under "rank-skew": what bound the ranks themselves.
    secondary: str | None
    # The phases tied at the top (more than one only for "mixed"), largest first.
    close: list[str]
    # Whose remedies are worth predicting: the top phase's, even when others are as large or the ranks skew.
    remedied: str


def classify(figures: Figures, has_ranks: bool) -> Classification:
    """The bottleneck the figures name (``has_ranks``: the session holds any rank's result)."""
    shares = figures.shares
    phase = max(shares, key=lambda k: shares[k])
    close = close_phases(shares)
    if not has_ranks or figures.totals.wall_s <= 0:
        bottleneck = "unknown"
    elif len(close) > 1:
        bottleneck = "mixed"
    else:
        bottleneck = PHASE_BOTTLENECK[phase]
    remedied = PHASE_BOTTLENECK[phase] if bottleneck == "mixed" else bottleneck
    if figures.n_ranks > 1 and figures.skew > SKEW_LIMIT and bottleneck != "unknown":
        return Classification("rank-skew", bottleneck, close, remedied)
    return Classification(bottleneck, None, close, remedied)


def close_phases(shares: dict[str, float]) -> list[str]:
    """The phases whose share is within CLOSE_SHARE of the largest, largest first (one phase: a clear winner)."""
    ranked = sorted(shares, key=lambda k: -shares[k])
    if not ranked:
        return []
    top = shares[ranked[0]]
    close = [k for k in ranked if top - shares[k] <= CLOSE_SHARE and shares[k] > 0]
    if set(close) <= {"storage", "page_cache"}:
        return close[:1]  # both are the read phase: reading binds, split by what was cached
    return close

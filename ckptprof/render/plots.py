"""Optional matplotlib figures for the HTML report, returned as base64 PNGs to embed inline.

matplotlib is an optional extra (``pip install 'ckptprof[plot]'``): ``available()`` says whether it imports,
and the HTML report simply leaves these figures out when it does not. Figures are drawn on the Agg canvas
directly, never through pyplot, so rendering a report does not touch a user's interactive backend.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from ckptprof.analysis.attribution import rank_totals, shard_work_s
from ckptprof.render.svg import PHASE_COLORS, ceiling_lines
from ckptprof.session import Session
from ckptprof.units import gbps


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


PNG_DPI = 110  # sharp enough on a laptop's screen at the report's width


def _png(fig: Any) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    ax = fig.add_subplot(1, 1, 1)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#eceff1")
    ax.set_axisbelow(True)
    return fig


def phase_seconds_figure(session: Session) -> str | None:
    """Stacked seconds per phase for each rank: uneven ranks and the dominant phase at a glance."""
    ranks = sorted({r.rank for r in session.ranks if r.models})
    if not ranks:
        return None
    fig = _figure(7.5, 3.2)
    ax = fig.axes[0]
    totals = [rank_totals(session, r) for r in ranks]
    bottom = [0.0] * len(ranks)
    labels = [str(r) for r in ranks]
    for phase, values in (
        ("read", [t.read_s for t in totals]),
        ("deserialize", [t.deserialize_s for t in totals]),
        ("h2d", [t.h2d_s for t in totals]),
        ("other", [t.other_s for t in totals]),
    ):
        ax.bar(labels, values, bottom=bottom, color=PHASE_COLORS[phase], label=phase, width=0.7)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xlabel("rank")
    ax.set_ylabel("seconds")
    ax.set_title("where each rank's time went", fontsize=10)
    ax.legend(ncols=4, fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return _png(fig)


def throughput_histogram_figure(session: Session) -> str | None:
    """How shard throughputs are distributed, against the ceilings: a long slow tail shows up here."""
    rates = [
        gbps(s.bytes, shard_work_s(s))
        for r in session.ranks
        for m in r.models
        for s in m.shards
        if shard_work_s(s) > 0 and s.bytes
    ]
    if not rates:
        return None
    fig = _figure(7.5, 3.2)
    ax = fig.axes[0]
    ax.hist(rates, bins=min(40, max(5, len(rates) // 4)), color="#4c78a8", alpha=0.85)
    for label, value in ceiling_lines(session):
        if value <= max(rates) * 3:  # a ceiling far off the right edge would squash the histogram
            ax.axvline(value, linestyle="--", linewidth=1, color="#c0392b")
            ax.annotate(label, (value, 1), xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                        va="top", ha="right", color="#c0392b")  # fmt: skip
    ax.set_xlabel("shard throughput, GB/s (bytes materialised / shard wall)")
    ax.set_ylabel("shards x ranks")
    ax.set_title("distribution of shard throughput", fontsize=10)
    return _png(fig)


def figures(session: Session) -> list[tuple[str, str]]:
    """(caption, base64 PNG) pairs; empty when matplotlib is missing."""
    if not available():
        return []
    out = []
    for caption, make in (
        ("Seconds per phase, per rank", phase_seconds_figure),
        ("Shard throughput distribution", throughput_histogram_figure),
    ):
        png = make(session)
        if png:
            out.append((caption, png))
    return out

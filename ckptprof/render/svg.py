"""Inline SVG charts for the HTML report, written by hand so the report needs neither matplotlib nor JS.

- ``timeline_svg``: one row per rank, each shard a block split into its phases (read, deserialize, h2d, and
  the untimed rest), models marked under the row; hover a block for its numbers.
- ``throughput_svg``: each rank's per-shard throughput in load order, with the measured ceilings as
  horizontal lines, on a log scale when they span more than a decade or so (pinned H2D vs a cold disk).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from html import escape

from ckptprof.analysis.attribution import shard_work_s
from ckptprof.render.perfetto import phase_segments
from ckptprof.results import slowest_device
from ckptprof.session import RankResult, Session, ShardTiming
from ckptprof.units import gbps, human_bytes

PHASE_COLORS = {
    "read": "#4c78a8",
    "deserialize": "#f58518",
    "h2d": "#54a24b",
    "other": "#d5d8dc",
}
FAILED_COLOR = "#e45756"
MODEL_COLORS = ["#34495e", "#b279a2", "#9d755d", "#72b7b2"]
CEILING_COLORS = ["#c0392b", "#e67e22", "#16a085", "#8e44ad", "#2c3e50", "#7f8c8d", "#d35400"]
FONT = "font-family:-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif"
LOG_SCALE_RATIO = 30.0  # max/min beyond which a linear axis squashes the slow shards into the floor
LOG_DECADES = 4  # a log axis spans at most this many decades; slower dots sit on its floor (tooltips say)


def _coord(x: float) -> str:
    """Coordinates with two decimals: enough for a screen, and 4096 shards x 4 rects stay a small file."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def nice_step(span: float, target_ticks: int = 8) -> float:
    """A 1, 2, 2.5 or 5 x 10^k step giving about ``target_ticks`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / max(1, target_ticks)
    base = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * base:
            return m * base
    return 10 * base


def _tick_label(x: float, unit: str = "") -> str:
    text = f"{x:.3g}" if x < 1000 else f"{x:,.0f}"
    return text + unit


def _svg_open(width: float, height: float, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_coord(width)}" height="{_coord(height)}" '
        f'viewBox="0 0 {_coord(width)} {_coord(height)}" role="img" aria-label="{escape(title)}" style="{FONT}">'
        f"<title>{escape(title)}</title>"
    )


def _text(x: float, y: float, text: str, size: int = 11, anchor: str = "start", fill: str = "#333") -> str:
    return (
        f'<text x="{_coord(x)}" y="{_coord(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">'
        f"{escape(text)}</text>"
    )


def _rect(x: float, y: float, w: float, h: float, fill: str, extra: str = "") -> str:
    return f'<rect x="{_coord(x)}" y="{_coord(y)}" width="{_coord(max(w, 0.0))}" height="{_coord(h)}" fill="{fill}"{extra}/>'


def empty_svg(message: str, width: int = 600) -> str:
    return _svg_open(width, 40, message) + _text(10, 25, message, 13, fill="#777") + "</svg>"


def _legend(items: Iterable[tuple[str, str]], x: float, y: float) -> list[str]:
    out = []
    for label, color in items:
        out.append(_rect(x, y - 9, 12, 12, color, ' rx="2"'))
        out.append(_text(x + 17, y + 1, label, 12))
        x += 30 + 6.2 * len(label)  # ~6 px per character at 12 px: no font metrics in pure SVG
    return out


def _roles(session: Session) -> list[str]:
    roles = [m.role for m in session.models]
    for r in session.ranks:
        roles += [m.role for m in r.models if m.role not in roles]
    return roles


def _shard_end(s: ShardTiming) -> float:
    return s.start_s + max(0.0, s.wall_s)


def _timeline_end(session: Session) -> float:
    ends = [m.start_s + m.wall_s for r in session.ranks for m in r.models]
    ends += [_shard_end(s) for r in session.ranks for m in r.models for s in m.shards]
    return max(ends, default=0.0)


def _shard_tooltip(rank: int, role: str, s: ShardTiming) -> str:
    text = (
        f"rank {rank} {role}: {s.file}\n{human_bytes(s.bytes)} in {shard_work_s(s):.3f} s of work "
        f"({gbps(s.bytes, shard_work_s(s)):.2f} GB/s)"
        + (f", {s.queued_s:.3f} s queued" if s.queued_s else "")
        + f"\nread {s.read_s:.3f} s, deserialize {s.deserialize_s:.3f} s, "
        f"h2d {s.h2d_s:.3f} s\n{s.major_faults} major faults, {human_bytes(s.storage_bytes)} from storage"
    )
    if s.status != "ok":
        text += f"\n{s.status}: {s.error or ''}"
    return text


@dataclass(frozen=True)
class _Axis:
    """Maps seconds to x pixels inside the plot area."""

    left: float
    width: float
    t_end: float

    def x(self, t: float) -> float:
        return self.left + max(0.0, t) / self.t_end * self.width


def _shard_blocks(axis: _Axis, y: float, h: float, rank: int, role: str, s: ShardTiming) -> str:
    x0, x1 = axis.x(s.start_s), axis.x(_shard_end(s))
    failed = s.status != "ok"
    # The untimed rest of the shard shows through as the background block.
    parts = [_rect(x0, y, x1 - x0, h, FAILED_COLOR if failed else PHASE_COLORS["other"])]
    if not failed:
        for phase, t0, dur in phase_segments(s):
            w = axis.x(t0 + dur) - axis.x(t0)
            if w >= 0.05:  # invisible slivers only cost bytes
                parts.append(_rect(axis.x(t0), y, w, h, PHASE_COLORS[phase]))
    if x1 - x0 >= 4:  # separators only where shards are wide enough to tell apart
        parts.append(
            f'<line x1="{_coord(x1)}" y1="{_coord(y)}" x2="{_coord(x1)}" y2="{_coord(y + h)}" stroke="#fff" stroke-width="1"/>'
        )
    return f"<g><title>{escape(_shard_tooltip(rank, role, s))}</title>{''.join(parts)}</g>"


def _rank_row(axis: _Axis, r: RankResult, y: float, h: float, roles: list[str]) -> list[str]:
    label = f"rank {r.rank} · {r.device}"
    out = [
        _text(axis.left - 8, y + h / 2 + 4, label, 12, "end", "#222" if r.status == "ok" else FAILED_COLOR)
    ]
    if not r.models:
        msg = f"{r.status}: {r.error or 'no timings'}"
        out.append(_text(axis.left + 4, y + h / 2 + 4, msg[:160], 12, fill=FAILED_COLOR))
        return out
    band = 4.0
    for m in r.models:
        color = MODEL_COLORS[roles.index(m.role) % len(MODEL_COLORS)]
        x0, x1 = axis.x(m.start_s), axis.x(m.start_s + m.wall_s)
        out.append(
            f"<g><title>{escape(f'rank {r.rank} {m.role}: {m.wall_s:.3f} s, {len(m.shards)} shards')}</title>"
            f"{_rect(x0, y + h - band, x1 - x0, band, color)}</g>"
        )
        out += [_shard_blocks(axis, y, h - band - 1, r.rank, m.role, s) for s in m.shards]
    return out


def timeline_svg(session: Session, width: int = 1160) -> str:
    ranks = sorted(session.ranks, key=lambda r: r.rank)
    t_end = _timeline_end(session)
    if not ranks or t_end <= 0:
        return empty_svg("no shard timings in this session", width)
    roles = _roles(session)
    n = len(ranks)
    row_h = 26.0 if n <= 16 else max(8.0, 420.0 / n)
    gap = 8.0 if n <= 16 else 2.0
    top, bottom, left, right = 34.0, 36.0, 132.0, 18.0
    axis = _Axis(left, width - left - right, t_end)
    height = top + n * (row_h + gap) + bottom
    out = [_svg_open(width, height, "per-rank timeline of shards by phase")]
    legend = [(p, PHASE_COLORS[p]) for p in ("read", "deserialize", "h2d")] + [
        ("untimed", PHASE_COLORS["other"])
    ]
    legend += [(f"{role} model", MODEL_COLORS[i % len(MODEL_COLORS)]) for i, role in enumerate(roles)]
    out += _legend(legend, left, 16)
    step = nice_step(t_end)
    axis_y = top + n * (row_h + gap)
    ticks = [i * step for i in range(int(t_end / step + 1e-9) + 1)]
    for t in ticks:
        x = axis.x(t)
        out.append(
            f'<line x1="{_coord(x)}" y1="{_coord(top - 4)}" x2="{_coord(x)}" y2="{_coord(axis_y)}" stroke="#eceff1"/>'
        )
        out.append(_text(x, axis_y + 16, _tick_label(t, " s"), 11, "middle", "#555"))
    out.append(
        _text(
            left + axis.width / 2, axis_y + 32, "seconds since the rank's replay start", 11, "middle", "#777"
        )
    )
    for i, r in enumerate(ranks):
        out += _rank_row(axis, r, top + i * (row_h + gap), row_h, roles)
    out.append("</svg>")
    return "".join(out)


# -- per-shard throughput against the ceilings --------------------------------------------------------------


def ceiling_lines(session: Session) -> list[tuple[str, float]]:
    """The ceilings worth drawing, as (label, GB/s); per-device H2D ceilings use the slowest used device."""
    c = session.ceilings
    out: list[tuple[str, float]] = []
    for value, label in (
        (c.storage_read_1_stream_GBps, "storage cold, 1 stream"),
        (c.storage_read_n_streams_GBps, f"storage cold, {c.storage_streams or 'N'} streams"),
        (c.page_cache_read_GBps, "page-cache read"),
        (c.memcpy_GBps, "host memcpy"),
    ):
        if isinstance(value, (int, float)) and value > 0:
            out.append((label, float(value)))
    devices = sorted({r.device for r in session.ranks})
    for per_device, label in ((c.h2d_pageable_GBps, "H2D pageable"), (c.h2d_pinned_GBps, "H2D pinned")):
        slowest = slowest_device(per_device, devices)
        if slowest is not None:
            out.append((label, slowest))
    return out


def _shard_positions(session: Session) -> dict[tuple[str, str], int]:
    """Each (model, shard file) at its place in the load order: the target's shards, then the draft's."""
    pos: dict[tuple[str, str], int] = {}
    for m in session.models:
        for s in m.shards:
            pos.setdefault((m.role, s.file), len(pos))
    for r in session.ranks:
        for rm in r.models:
            for st in rm.shards:
                pos.setdefault((rm.role, st.file), len(pos))
    return pos


@dataclass(frozen=True)
class _YScale:
    top: float
    height: float
    lo: float
    hi: float
    log: bool

    def y(self, v: float) -> float:
        if self.log:
            v = max(v, self.lo)
            frac = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            frac = v / self.hi if self.hi > 0 else 0.0
        return self.top + self.height * (1 - min(1.0, max(0.0, frac)))

    def ticks(self) -> list[float]:
        if not self.log:
            step = nice_step(self.hi, 5)
            return [i * step for i in range(int(self.hi / step + 1e-9) + 1)]
        decades = range(round(math.log10(self.lo)), round(math.log10(self.hi)) + 1)
        mults = (1, 2, 5) if len(decades) <= 4 else (1,)
        return [m * 10.0**d for d in decades for m in mults if self.lo <= m * 10.0**d <= self.hi]


def _y_scale(values: list[float], top: float, height: float) -> _YScale:
    positive = [v for v in values if v > 0]
    hi_v = max(positive, default=1.0)
    lo_v = min(positive, default=1.0)
    if hi_v / lo_v > LOG_SCALE_RATIO:
        hi = 10.0 ** math.ceil(math.log10(hi_v))
        # A few-kB map shard at 1e-5 GB/s would otherwise stretch the axis and flatten the real shards.
        lo = max(10.0 ** math.floor(math.log10(lo_v)), hi / 10.0**LOG_DECADES)
        return _YScale(top, height, lo, hi if hi > lo else lo * 10, True)
    step = nice_step(hi_v * 1.1, 5)
    return _YScale(top, height, 0.0, math.ceil(hi_v * 1.1 / step) * step, False)


def _spread_labels(ys: list[float], min_gap: float) -> list[float]:
    """Push label baselines apart (keeping their order) so close ceilings stay readable."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    out = list(ys)
    for prev, cur in itertools.pairwise(order):
        out[cur] = max(out[cur], out[prev] + min_gap)
    return out


def throughput_svg(session: Session, width: int = 1160, height: int = 360) -> str:
    pos = _shard_positions(session)
    roles = _roles(session)
    points = [
        (pos[(m.role, s.file)], gbps(s.bytes, shard_work_s(s)), r.rank, m.role, s)
        for r in session.ranks
        for m in r.models
        for s in m.shards
        if shard_work_s(s) > 0
    ]
    if not points:
        return empty_svg("no shard timings in this session", width)
    ceilings = ceiling_lines(session)
    top, bottom, left, right = 30.0, 40.0, 64.0, 210.0
    plot_w, plot_h = width - left - right, height - top - bottom
    scale = _y_scale([p[1] for p in points] + [v for _, v in ceilings], top, plot_h)
    n = max(len(pos), 1)

    def x(i: float) -> float:
        return left + (i + 0.5) / n * plot_w

    out = [_svg_open(width, height, "per-shard throughput and the measured ceilings")]
    out += _legend(
        [(f"{role} shards", MODEL_COLORS[i % len(MODEL_COLORS)]) for i, role in enumerate(roles)], left, 16
    )
    for t in scale.ticks():
        y = scale.y(t)
        out.append(
            f'<line x1="{_coord(left)}" y1="{_coord(y)}" x2="{_coord(left + plot_w)}" y2="{_coord(y)}" stroke="#eceff1"/>'
        )
        out.append(_text(left - 6, y + 4, _tick_label(t), 11, "end", "#555"))
    out.append(
        f'<text x="14" y="{_coord(top + plot_h / 2)}" font-size="11" fill="#777" text-anchor="middle" '
        f'transform="rotate(-90 14 {_coord(top + plot_h / 2)})">GB/s{" (log scale)" if scale.log else ""}</text>'
    )
    out.append(
        f'<rect x="{_coord(left)}" y="{_coord(top)}" width="{_coord(plot_w)}" height="{_coord(plot_h)}" fill="none" stroke="#cfd8dc"/>'
    )
    out += _model_boundaries(pos, x, top, plot_h)
    biggest = max(s.bytes for *_, s in points) or 1
    for i, rate, rank, role, s in points:
        # Area follows the shard's bytes: a 4 kB map at 0.001 GB/s is overhead, a 4 GB shard is the load.
        radius = 1.5 + 3.5 * math.sqrt(s.bytes / biggest)
        color = FAILED_COLOR if s.status != "ok" else MODEL_COLORS[roles.index(role) % len(MODEL_COLORS)]
        tip = f"rank {rank} {role}: {s.file}: {rate:.2f} GB/s ({human_bytes(s.bytes)} in {shard_work_s(s):.3f} s of work)"
        out.append(
            f'<circle cx="{_coord(x(i))}" cy="{_coord(scale.y(rate))}" r="{_coord(radius)}" fill="{color}" fill-opacity="0.65">'
            f"<title>{escape(tip)}</title></circle>"
        )
    ys = [scale.y(v) for _, v in ceilings]
    label_ys = _spread_labels(ys, 13.0)
    for k, ((label, value), y, ly) in enumerate(zip(ceilings, ys, label_ys, strict=True)):
        color = CEILING_COLORS[k % len(CEILING_COLORS)]
        out.append(
            f'<line x1="{_coord(left)}" y1="{_coord(y)}" x2="{_coord(left + plot_w)}" y2="{_coord(y)}" stroke="{color}" '
            f'stroke-width="1.5" stroke-dasharray="6 4"/>'
        )
        out.append(_text(left + plot_w + 8, ly + 4, f"{label}: {value:.2f}", 11, fill=color))
    out.append(
        _text(
            left + plot_w / 2,
            top + plot_h + 28,
            "shards in load order (one dot per rank; dot area ~ shard bytes)",
            11,
            "middle",
            "#777",
        )
    )
    out.append("</svg>")
    return "".join(out)


def _model_boundaries(
    pos: dict[tuple[str, str], int], x: Callable[[float], float], top: float, plot_h: float
) -> list[str]:
    """A dashed divider and a name where each model's shards start (only when there are several models)."""
    firsts: dict[str, int] = {}
    for (role, _file), i in pos.items():
        firsts.setdefault(role, i)
    if len(firsts) < 2:
        return []
    out = []
    for role, i in firsts.items():
        xi = x(i - 0.5)
        if i > 0:
            out.append(
                f'<line x1="{_coord(xi)}" y1="{_coord(top)}" x2="{_coord(xi)}" y2="{_coord(top + plot_h)}" '
                f'stroke="#90a4ae" stroke-dasharray="3 3"/>'
            )
        out.append(_text(xi + 4, top + plot_h - 6, role, 11, fill="#607d8b"))
    return out

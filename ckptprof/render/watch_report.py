"""A watch session (``"observed": "live-server"``) rendered for ``ckptprof report``: the terminal table, Markdown
and the self-contained HTML, through the same table, Markdown and HTML/SVG helpers the run's report uses.

What it shows: the headline, which limit bound the ranks (from the classes of their samples), per-rank rows, each
shard's residency over time, the log's phases and the notes. The rows come from ckptprof.watch.session_file, so
the three formats say the same thing.
"""

from __future__ import annotations

import itertools
import json
from html import escape
from typing import Any

from tabulate import tabulate

from ckptprof.render.html import CSS, _section, html_table
from ckptprof.render.markdown import md_table, wrap_prose
from ckptprof.render.svg import _Axis, _legend, _rect, _svg_open, _text, _tick_label, empty_svg, nice_step
from ckptprof.units import human_bytes
from ckptprof.version import __version__
from ckptprof.watch import session_file as wf

FORMATS = ("table", "md", "html", "json")
STATE_COLORS = {
    "storage": "#c0392b",
    "page_cache": "#d35400",
    "cpu": "#5d6d7e",
    "waiting": "#d5d8dc",
}
OBSERVED_LINE = (
    "observed on a live server by ckptprof watch (from /proc and the page cache, outside the server): no replay, "
    "no ceilings, no per-tensor timings"
)


def _sections(doc: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, headers, rows, caption) of each table, in order; empty ones left out."""
    out = [
        (
            "Per rank",
            wf.rank_headers(doc),
            wf.rank_rows(doc),
            "storage read: /proc/PID/io read_bytes since the rank started; CPU: user + system seconds while "
            "watched, % of the time it was watched; states: its samples' classes"
            + (
                "; py-spy stacks: every thread's stack in each dump, classified read / deserialize / copy / other "
                "by the run's py-spy classifier"
                if wf.STACKS_HEADER in wf.rank_headers(doc)
                else ""
            ),
        ),
        (
            "Shards: page-cache residency",
            wf.SHARD_HEADERS,
            wf.shard_rows(doc),
            "seconds after watch began; '-': never grew / never full while watched",
        ),
        ("GPU memory", wf.GPU_HEADERS, wf.gpu_rows(doc), wf.gpu_line(doc)),
        ("The log's phases", wf.PHASE_HEADERS, wf.phase_rows(doc), wf.log_line(doc)),
    ]
    return [s for s in out if s[2]]


def _lines(doc: dict[str, Any]) -> list[str]:
    """The model lines, and the GPU line where there is no device to tabulate ("no GPU")."""
    return wf.model_lines(doc) + ([] if wf.gpu_rows(doc) else [wf.gpu_line(doc)])


def render_table(doc: dict[str, Any]) -> str:
    b = wf.bound(doc)
    out = [f"ckptprof: {wf.headline(doc)}", f"  ({OBSERVED_LINE})", b.line, ""]
    out += _lines(doc)
    for title, headers, rows, caption in _sections(doc):
        out += ["", f"{title} ({caption})", tabulate(rows, headers=headers, disable_numparse=True)]
    if not wf.phase_rows(doc):
        out += ["", wf.log_line(doc)]
    if doc.get("notes"):
        out += ["", "notes:", *(f"  - {n}" for n in doc["notes"])]
    return "\n".join(out) + "\n"


def render_markdown(doc: dict[str, Any]) -> str:
    b = wf.bound(doc)
    out = [f"## ckptprof watch: {wf.headline(doc)}", "", f"> **{b.line}**", "", f"_{OBSERVED_LINE}_", ""]
    out += [f"- {line}" for line in _lines(doc)]
    for title, headers, rows, caption in _sections(doc):
        out += ["", f"### {title}", "", caption, "", md_table(headers, rows)]
    if not wf.phase_rows(doc):
        out += ["", wf.log_line(doc)]
    if doc.get("notes"):
        out += ["", "### Notes", "", *(f"- {n}" for n in doc["notes"])]
    return wrap_prose("\n".join(out)) + "\n"


# -- HTML ------------------------------------------------------------------------------------------------------


def _samples(doc: dict[str, Any], r: dict[str, Any]) -> list[tuple[float, str]]:
    columns = list(doc.get("sample_columns") or [])
    if "t_s" not in columns or "state" not in columns:
        return []
    ti, si = columns.index("t_s"), columns.index("state")
    return [(float(row[ti]), str(row[si])) for row in r.get("samples") or [] if isinstance(row, list)]


def rank_timeline_svg(doc: dict[str, Any], width: int = 1160) -> str:
    """One row per rank process, each interval between two samples coloured by the class of the later one."""
    ranks = doc.get("ranks") or []
    t_end = float(doc.get("duration_s") or 0.0)
    if not ranks or t_end <= 0:
        return empty_svg("no rank process was sampled", width)
    row_h, gap, top, bottom, left, right = 22.0, 6.0, 34.0, 36.0, 150.0, 18.0
    axis = _Axis(left, width - left - right, t_end)
    height = top + len(ranks) * (row_h + gap) + bottom
    out = [_svg_open(width, height, "per-rank timeline of sampled states")]
    out += _legend([(k.replace("_", " "), c) for k, c in STATE_COLORS.items()], left, 16)
    for i, r in enumerate(ranks):
        y = top + i * (row_h + gap)
        out.append(_text(left - 8, y + row_h / 2 + 4, f"{r.get('label')} · pid {r.get('pid')}", 12, "end"))
        samples = _samples(doc, r)
        for (t0, _), (t1, state) in itertools.pairwise(samples):
            tip = f"{r.get('label')} {t0:.2f}-{t1:.2f} s: {state}"
            out.append(
                f"<g><title>{escape(tip)}</title>"
                f"{_rect(axis.x(t0), y, axis.x(t1) - axis.x(t0), row_h, STATE_COLORS.get(state, '#999'))}</g>"
            )
    out += _time_axis(axis, top, top + len(ranks) * (row_h + gap), "seconds since watch began")
    out.append("</svg>")
    return "".join(out)


def _time_axis(axis: _Axis, top: float, axis_y: float, words: str) -> list[str]:
    out = []
    step = nice_step(axis.t_end)
    for k in range(int(axis.t_end / step + 1e-9) + 1):
        x = axis.x(k * step)
        out.append(f'<line x1="{x:.2f}" y1="{top - 4:.2f}" x2="{x:.2f}" y2="{axis_y:.2f}" stroke="#eceff1"/>')
        out.append(_text(x, axis_y + 16, _tick_label(k * step, " s"), 11, "middle", "#555"))
    out.append(_text(axis.left + axis.width / 2, axis_y + 32, words, 11, "middle", "#777"))
    return out


def _shade(fraction: float) -> str:
    """White (nothing resident) to the storage colour's blue (all of it)."""
    f = min(1.0, max(0.0, fraction))
    r, g, b = (int(255 + (c - 255) * f) for c in (0x4C, 0x78, 0xA8))
    return f"#{r:02x}{g:02x}{b:02x}"


def residency_svg(doc: dict[str, Any], width: int = 1160) -> str:
    """One row per shard: between two residency points, shaded by the share of the shard then in the page cache."""
    shards = [(m.get("role"), s) for m in doc.get("models") or [] for s in m.get("shards") or []]
    t_end = float(doc.get("duration_s") or 0.0)
    if not shards or t_end <= 0:
        return empty_svg("no shard residency in this session", width)
    n = len(shards)
    row_h = 14.0 if n <= 64 else max(3.0, 900.0 / n)
    gap = 2.0 if n <= 64 else 0.0
    top, bottom, left, right = 34.0, 36.0, 300.0, 18.0
    axis = _Axis(left, width - left - right, t_end)
    height = top + n * (row_h + gap) + bottom
    out = [_svg_open(width, height, "per-shard page-cache residency over time")]
    out += _legend([("none resident", _shade(0.0)), ("half", _shade(0.5)), ("all", _shade(1.0))], left, 16)
    for i, (role, s) in enumerate(shards):
        y = top + i * (row_h + gap)
        size = int(s.get("bytes") or 0)
        if row_h >= 10:
            out.append(_text(left - 8, y + row_h - 3, f"{role} {s.get('file')}"[-46:], 10, "end"))
        points = [(float(t), int(b)) for t, b in s.get("points") or []] + [(t_end, -1)]
        for (t0, b0), (t1, _) in itertools.pairwise(points):
            frac = b0 / size if size else 1.0
            tip = f"{role} {s.get('file')}: {human_bytes(b0)} of {human_bytes(size)} resident from {t0:.2f} s"
            cell = _rect(axis.x(t0), y, axis.x(t1) - axis.x(t0), row_h, _shade(frac), ' stroke="#eceff1"')
            out.append(f"<g><title>{escape(tip)}</title>{cell}</g>")
    out += _time_axis(axis, top, top + n * (row_h + gap), "seconds since watch began")
    out.append("</svg>")
    return "".join(out)


def render_html(doc: dict[str, Any]) -> str:
    b = wf.bound(doc)
    accent = STATE_COLORS.get(b.limit or "", "#5d6d7e")
    models = "; ".join(_lines(doc)) or "no checkpoint followed"
    sections = [
        f'<section class="verdict" style="--accent:{accent}"><h2>Which limit bound the ranks</h2>'
        f'<span class="badge">{escape((b.limit or "unknown").replace("_", " "))}</span>'
        f'<p class="summary">{escape(b.line)}</p><p class="caption">{escape(OBSERVED_LINE)}</p></section>',
        _section(
            "Per-rank timeline",
            rank_timeline_svg(doc),
            "Each rank process's samples, coloured by what its threads were doing (the run's kernel-sampler rule); "
            "hover for the interval.",
        ),
        _section(
            "Per-shard residency over time",
            residency_svg(doc),
            "How much of each shard was in the page cache, from one residency check to the next.",
        ),
    ]
    sections += [
        _section(title, html_table(headers, rows), caption)
        for title, headers, rows, caption in _sections(doc)
    ]
    if not wf.phase_rows(doc):
        sections.append(_section("The log", f"<p>{escape(wf.log_line(doc))}</p>"))
    if doc.get("notes"):
        notes = "".join(f"<li>{escape(str(n))}</li>" for n in doc["notes"])
        sections.append(_section("Notes", f'<ul class="notes">{notes}</ul>'))
    title = f"ckptprof watch: {wf.headline(doc)}"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        'img-src data:">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
        f"<header><h1>ckptprof watch report</h1><p>{escape(wf.headline(doc))}</p><p>{escape(models)}</p></header>"
        f"{''.join(sections)}"
        f"<footer>ckptprof {escape(__version__)} · watch session schema v{escape(str(doc.get('schema_version')))} · "
        "re-render with <code>ckptprof report WATCH_DIR --format html</code></footer>"
        "</main></body></html>\n"
    )


def render(doc: dict[str, Any], fmt: str) -> str:
    """``fmt``: table, md, html or json (the session as saved)."""
    if fmt == "json":
        return json.dumps(doc, indent=1) + "\n"
    return {"table": render_table, "md": render_markdown, "html": render_html}[fmt](doc)

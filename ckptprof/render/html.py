"""One self-contained HTML report: inline CSS and SVG (and base64 PNGs when matplotlib is there), no JS.

A Content-Security-Policy forbids every fetch, so the file shows the same offline, in a mail attachment or
in a CI artifact viewer, and a path or error message in the session can never pull anything in: all text
from the session goes through ``html.escape``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any

from ckptprof.analysis.attribution import run_totals
from ckptprof.analysis.headlines import model_headlines as analysed_headlines
from ckptprof.render import plots, svg
from ckptprof.render.rows import (
    MODEL_HEADERS,
    PY_SPY_HEADERS,
    RANK_HEADERS,
    RANK_NOTE,
    SERVER_HEADERS,
    SLOWEST_HEADERS,
    SLOWEST_NOTE,
    ceiling_header,
    ceiling_rows,
    headline,
    key_metrics,
    model_headline_text,
    model_rows,
    no_recommendation,
    py_spy_rows,
    rank_rows,
    recommendations,
    run_line,
    server_heading,
    server_rows,
    slowest_rows,
    storage_disagreement,
    strategy_headers,
    strategy_rows,
)
from ckptprof.session import Session
from ckptprof.version import __version__

BOTTLENECK_COLORS = {
    "storage": "#c0392b",
    "page-cache": "#d35400",
    "deserialize": "#b7950b",
    "h2d": "#1e8449",
    "rank-skew": "#7d3c98",
    "cpu": "#5d6d7e",
}
SHARE_LABELS = (
    ("storage", "read: storage"),
    ("page_cache", "read: page cache"),
    ("deserialize", "deserialize"),
    ("h2d", "h2d"),
    ("other", "untimed"),
)
_NUMERIC = re.compile(r"^[-+~]?\d[\d.,]*\s?(%|s|x|GB/s|[kMGT]?B)?$")

CSS = """
*{box-sizing:border-box}
body{margin:0;background:#f4f6f8;color:#1f2933;font:14px/1.5 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,
 Helvetica,Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:24px 28px 40px}
header h1{font-size:22px;margin:0 0 2px;font-weight:600}
header p{margin:0;color:#52606d}
section{background:#fff;border:1px solid #e4e7eb;border-radius:8px;padding:18px 22px;margin-top:18px}
h2{font-size:16px;margin:0 0 10px;font-weight:600}
.caption{color:#616e7c;margin:-4px 0 12px;font-size:13px}
.verdict{border-left:6px solid var(--accent)}
.badge{display:inline-block;background:var(--accent);color:#fff;font-weight:600;border-radius:4px;padding:3px 10px;
 font-size:15px;letter-spacing:.2px}
.summary{font-size:15px;margin:10px 0 14px}
.shares{display:flex;height:26px;border-radius:4px;overflow:hidden;margin:4px 0 4px;font-size:12px}
.shares div{color:#fff;display:flex;align-items:center;justify-content:center;white-space:nowrap;overflow:hidden}
.shares .other{color:#333}
.cols{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:26px}
.cols h3{font-size:14px;margin:0 0 6px;color:#323f4b}
ol.try{margin:0;padding-left:20px}
ol.try li{margin-bottom:8px}
ol.try .pred,.headlines .pred{color:#52606d}
ul.headlines{margin:0 0 12px;padding-left:20px;font-size:15px}
.disagree{color:#8a4b08;font-weight:600}
code{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f0f4f8;padding:1px 4px;
 border-radius:3px;word-break:break-word}
table{border-collapse:collapse;width:100%;font-size:13px}
th{text-align:left;font-weight:600;color:#3e4c59;border-bottom:2px solid #d9e2ec;padding:5px 8px;white-space:nowrap}
td{border-bottom:1px solid #edf0f3;padding:4px 8px;vertical-align:top;word-break:break-word}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.bad td{color:#c0392b}
table.kv td:first-child{color:#52606d}
.scroll{overflow-x:auto}
svg{max-width:100%;height:auto;display:block}
ul.notes{margin:0;padding-left:20px}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:18px}
figure{margin:0}
figure img{max-width:100%}
figcaption{color:#616e7c;font-size:13px}
details summary{cursor:pointer;font-weight:600}
footer{color:#7b8794;font-size:12px;margin-top:18px;text-align:center}
@media (max-width:900px){.cols{grid-template-columns:1fr}}
"""


def _is_num(value: Any) -> bool:
    return bool(_NUMERIC.match(str(value)))


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    """Numbers right-aligned (tabular figures) except in key/value tables, where a column mixes prose."""
    align = cls != "kv"
    first = rows[0] if rows else []
    # A header is right-aligned when its column is numeric in the first row, so it sits over its numbers.
    head = "".join(
        f"<th{' class=num' if align and i < len(first) and _is_num(first[i]) else ''}>{escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        bad = any(str(c).startswith(("failed", "error")) or "shard(s) failed" in str(c) for c in row)
        cells = "".join(
            f"<td{' class=num' if align and _is_num(c) else ''}>{escape(str(c))}</td>" for c in row
        )
        body.append(f"<tr{' class=bad' if bad else ''}>{cells}</tr>")
    class_attr = f' class="{cls}"' if cls else ""
    return f'<div class="scroll"><table{class_attr}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _section(title: str, body: str, caption: str = "", section_id: str = "") -> str:
    cap = f'<p class="caption">{escape(caption)}</p>' if caption else ""
    id_attr = f' id="{escape(section_id)}"' if section_id else ""
    return f"<section{id_attr}><h2>{escape(title)}</h2>{cap}{body}</section>"


def shares_bar(session: Session) -> str:
    shares = run_totals(session).shares()
    colors = {**svg.PHASE_COLORS, "storage": svg.PHASE_COLORS["read"], "page_cache": "#9ecae9"}
    parts = []
    for key, label in SHARE_LABELS:
        pct = 100 * shares.get(key, 0.0)
        if pct <= 0:
            continue
        # Narrow segments keep just the number; the tooltip and the timeline legend name them.
        text = f"{label} {pct:.0f}%" if pct >= 9 else f"{pct:.0f}%" if pct >= 3 else ""
        parts.append(
            f'<div class="{escape(key)}" style="width:{pct:.2f}%;background:{colors[key]}" '
            f'title="{escape(label)}: {pct:.1f}% of rank time">{escape(text)}</div>'
        )
    return f'<div class="shares" aria-label="share of rank time per phase">{"".join(parts)}</div>'


def _try_list(session: Session) -> str:
    recs = recommendations(session)
    if not recs:
        return f"<p>{escape(no_recommendation(session).capitalize())}.</p>"
    items = []
    for flags, outcome in recs:
        what = f"<code>{escape(flags)}</code>" if flags.startswith("--") else escape(flags)
        pred = f'<br><span class="pred">{escape(outcome)}</span>' if outcome else ""
        items.append(f"<li>{what}{pred}</li>")
    return f'<ol class="try">{"".join(items)}</ol>'


def model_headlines(session: Session) -> str:
    """One line per model, in load order: its load wall, the limit that bound it with the figure that shows it,
    and the one thing to try (the same words as the terminal and Markdown headlines)."""
    items = [
        f'<li class="model-headline">{model_headline_text(h, code=_code, text=escape)}</li>'
        for h in analysed_headlines(session)
    ]
    return f'<ul class="headlines">{"".join(items)}</ul>' if items else ""


def _disagreement(session: Session) -> str:
    text = storage_disagreement(session)
    return f'<p class="disagree">{escape(text)}</p>' if text else ""


def _code(flags: str) -> str:
    return f"<code>{escape(flags)}</code>"


def headline_section(session: Session) -> str:
    """The first screen: the run's badge, a line per model, the run's verdict, then where the rank time went."""
    v = session.verdict
    accent = BOTTLENECK_COLORS.get(str(v.bottleneck if v is not None else None), "#7b8794")
    summary = (v.summary if v is not None else "") or "No verdict in this session."
    return (
        f'<section class="verdict" style="--accent:{accent}" id="headline">'
        f'<span class="badge">{escape(headline(session))}</span>'
        f"{model_headlines(session)}{_disagreement(session)}"
        f'<p class="summary">{escape(str(summary))}</p>'
        f"{shares_bar(session)}</section>"
    )


def verdict_section(session: Session) -> str:
    """Every remedy with its prediction, and the numbers behind the verdict (below the timeline)."""
    metrics = html_table(["metric", "value"], [list(r) for r in key_metrics(session)], cls="kv")
    return (
        '<section id="verdict">'
        f'<div class="cols"><div><h3>Try (fastest predicted first)</h3>{_try_list(session)}</div>'
        f"<div><h3>Key metrics</h3>{metrics}</div></div></section>"
    )


def _environment_rows(session: Session) -> list[list[Any]]:
    rows: list[list[Any]] = [[f"config.{k}", v] for k, v in sorted(session.config.items())]
    rows += [[f"environment.{k}", v] for k, v in sorted(session.environment.items())]
    rows += [
        [f"ceilings.{k}", v]
        for k, v in sorted(session.ceilings.to_dict().items())
        if v is not None and not isinstance(v, dict)
    ]
    return rows


def _plots_section(session: Session, use_plots: bool | None) -> str:
    if use_plots is False or (use_plots is None and not plots.available()):
        return ""
    figs = plots.figures(session)
    if not figs:
        return ""
    body = "".join(
        f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{png}">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
        for caption, png in figs
    )
    return _section("More plots", f'<div class="figs">{body}</div>')


def render(session: Session, with_plots: bool | None = None, slowest: int = 10) -> str:
    """The report; ``with_plots``: None = matplotlib figures when it imports, False = never, True = when possible."""
    models = ", ".join(f"{m.role} {m.path}" for m in session.models) or "no checkpoint"
    crows = ceiling_rows(session.ceilings)
    sections = [
        headline_section(session),
        _section(
            "Timeline",
            svg.timeline_svg(session),
            "Each block is one shard on one rank, split into the time its phases took (summed over its tensors, "
            "so interleaving is summarised); hover a block for its numbers. The bar under each row marks the model.",
            section_id="timeline",
        ),
        verdict_section(session),
        _section(
            "Per-shard throughput vs ceilings",
            svg.throughput_svg(session),
            "Bytes a rank materialised from a shard / the wall-clock time threads worked on it (not the time it queued for a thread). Ranks load at the same time, so their "
            "rates share the storage and the copy links. Dashed lines: the ceilings measured in this run.",
        ),
        _section("Per rank", html_table(RANK_HEADERS, rank_rows(session)) + f"<p>{escape(RANK_NOTE)}</p>"),
    ]
    srows = strategy_rows(session)
    if srows and session.strategies is not None:
        sections.insert(
            3,
            _section(
                "Strategies, side by side",
                f"<p>{escape(session.strategies.summary)}</p>" + html_table(strategy_headers(session), srows),
            ),
        )
    server = server_heading(session)
    if server is not None:
        srv = server_rows(session)
        sections.append(
            _section(
                "The server's own load beside the replay",
                f"<p>{escape(server)}</p>" + (html_table(SERVER_HEADERS, srv) if srv else ""),
                section_id="server-log",
            )
        )
    rows = slowest_rows(session, slowest)
    if rows:
        sections.append(
            _section(
                f"{len(rows)} slowest shards",
                html_table(SLOWEST_HEADERS, rows) + f"<p>{escape(SLOWEST_NOTE)}</p>",
            )
        )
    sections.append(
        _section(
            ceiling_header(session.ceilings, heading=True),
            html_table(["ceiling", "measured"], crows) if crows else "<p>Not measured (--no-probe).</p>",
        )
    )
    if session.models:
        sections.append(_section("Checkpoints", html_table(MODEL_HEADERS, model_rows(session))))
    prows = py_spy_rows(session)
    if prows:
        sections.append(
            _section(
                "py-spy: top frames per phase",
                html_table(PY_SPY_HEADERS, prows),
                "Leaf frames py-spy sampled most while each rank was in a phase (seconds of samples; --idle "
                "counts threads blocked in I/O). The speedscope profiles are listed under the session's artifacts.",
            )
        )
    if session.notes:
        notes = "".join(f"<li>{escape(n)}</li>" for n in session.notes)
        sections.append(_section("Notes", f'<ul class="notes">{notes}</ul>'))
    sections.append(_plots_section(session, with_plots))
    sections.append(
        "<section><details><summary>Configuration and environment</summary>"
        f"{html_table(['key', 'value'], _environment_rows(session), cls='kv')}</details></section>"
    )
    title = f"ckptprof: {headline(session)}"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        # No fetches of any kind: styles are inline and images are data: URIs.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        'img-src data:">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>"
        f"<header><h1>ckptprof report</h1><p>{escape(models)}</p><p>{escape(run_line(session))}</p></header>"
        f"{''.join(sections)}"
        f"<footer>ckptprof {escape(__version__)} · session schema v{session.schema_version} · "
        "re-render with <code>ckptprof report session.json --format html</code></footer>"
        "</main></body></html>\n"
    )

"""GitHub-flavoured Markdown: the verdict first, then the tables, ready to paste into an issue.

The rows it shares with the other formats live in rows.py.
"""

from __future__ import annotations

import textwrap
from typing import Any

from tabulate import tabulate

from ckptprof.analysis.compare import Comparison, Delta
from ckptprof.analysis.headlines import model_headlines
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
    prediction_headers,
    prediction_heading,
    prediction_rows,
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


def md_cell(value: Any) -> str:
    """A table cell: pipes would end the cell and newlines the row, so escape / flatten them."""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


# Lines fit 100 columns so the report reads in a terminal, a diff or an issue without scrolling sideways.
WIDTH = 100
# A cell moved out of a table that cannot fit becomes this reference; the text goes in a bullet below the table.
_NOTE_REF = "note {n}"


def _table_width(headers: list[str], rows: list[list[str]], columns: list[int]) -> int:
    # Measured on the rendering itself: tabulate pads headers beyond their text.
    table = _github_table([headers[c] for c in columns], [[r[c] for c in columns] for r in rows])
    return max(len(line) for line in table.splitlines())


def _column_groups(headers: list[str], rows: list[list[str]]) -> list[list[int]] | None:
    """Columns split into tables that each fit WIDTH, the first (key) column repeated in each; None: one cannot."""
    groups: list[list[int]] = [[0]]
    for c in range(1, len(headers)):
        if _table_width(headers, rows, [*groups[-1], c]) <= WIDTH:
            groups[-1].append(c)
        elif _table_width(headers, rows, [0, c]) <= WIDTH:
            groups.append([0, c])
        else:
            return None
    return groups if _table_width(headers, rows, groups[0]) <= WIDTH else None


def _github_table(headers: list[str], rows: list[list[str]]) -> str:
    return tabulate(
        rows,
        headers=headers,
        tablefmt="github",
        disable_numparse=True,  # keep the renderers' own formatting (e.g. "0.50"), never re-round
    )


def md_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A GitHub table no wider than WIDTH: too wide, it is split by columns (the key column repeated); when even
    that cannot fit, its longest cells move into bullets below it, so every figure stays in the report."""
    head = [md_cell(h) for h in headers]
    body = [[md_cell(c) for c in row] for row in rows]
    if len(head) == 2:
        return _key_value_table(head, body)
    notes: list[str] = []
    groups = _column_groups(head, body)
    while groups is None:
        r, c = max(
            ((r, c) for r in range(len(body)) for c in range(len(head))),
            key=lambda rc: len(body[rc[0]][rc[1]]),
        )
        ref = _NOTE_REF.format(n=len(notes) + 1)
        if len(body[r][c]) <= len(ref):
            break  # nothing left to move: the headers alone are too wide
        notes.append(f"- {ref} ({head[c] or 'column ' + str(c + 1)}): {body[r][c]}")
        body[r][c] = ref
        groups = _column_groups(head, body)
    tables = [
        _github_table([head[c] for c in cols], [[row[c] for c in cols] for row in body])
        for cols in groups or [list(range(len(head)))]
    ]
    return "\n\n".join(tables) + ("\n\n" + "\n".join(notes) if notes else "")


def _key_value_table(head: list[str], body: list[list[str]]) -> str:
    """A two-column table keeps the rows that fit; the longest rows become "- key: value" bullets below it, in
    their order, since a bare reference in a key/value table would hide what the row is about."""
    moved: set[int] = set()
    kept = body
    while kept and _table_width(head, kept, [0, 1]) > WIDTH:
        moved.add(
            max((i for i in range(len(body)) if i not in moved), key=lambda i: len(body[i][0] + body[i][1]))
        )
        kept = [row for i, row in enumerate(body) if i not in moved]
    bullets = [f"- {body[i][0]}: {body[i][1]}" for i in sorted(moved)]
    table = _github_table(head, kept) if kept else ""
    return "\n\n".join(part for part in (table, "\n".join(bullets)) if part)


def wrap_prose(text: str) -> str:
    """Prose lines wrapped at WIDTH, keeping a quote's "> " and a bullet's hanging indent; tables untouched."""
    out = []
    for line in text.split("\n"):
        if len(line) <= WIDTH or line.startswith(("|", "#")):
            out.append(line)
            continue
        first = later = ""
        if line.startswith("> "):
            first = later = "> "
        elif line.startswith("- "):
            first, later = "- ", "  "
        out += textwrap.wrap(
            line[len(first) :],
            WIDTH,
            initial_indent=first,
            subsequent_indent=later,
            break_long_words=False,  # a long path or flag stays whole rather than split mid-token
            break_on_hyphens=False,
        )
    return "\n".join(out)


def _code_span(text: str) -> str:
    return f"`{text}`"


def _bullet(text: str) -> str:
    return f"- {text}"


def _try_line(flags: str, outcome: str) -> str:
    # Flags go in a code span so they paste into a shell intact; prose remedies stay prose.
    what = f"`{flags}`" if flags.startswith("--") else flags
    return f"- {what}" + (f": {outcome}" if outcome else "")


def render(session: Session, slowest: int = 10) -> str:
    out = [f"## ckptprof verdict: {headline(session)}", ""]
    # Each model's own verdict first, in the words the terminal and the HTML report use.
    lines = [_bullet(model_headline_text(h, code=_code_span)) for h in model_headlines(session)]
    if lines:
        out += [*lines, ""]
    disagreement = storage_disagreement(session)
    if disagreement:
        out += [f"**{disagreement[:1].upper()}{disagreement[1:]}**", ""]
    if session.verdict is not None and session.verdict.summary:
        out += [f"> {session.verdict.summary}", ""]
    out += [f"**Run:** {run_line(session)}", ""]
    recs = recommendations(session)
    if recs:
        out += ["**Try** (fastest predicted first):", "", *(_try_line(f, o) for f, o in recs), ""]
    else:
        out += [f"**Try:** {no_recommendation(session)}", ""]
    out += ["**Key metrics**", "", md_table(["metric", "value"], [list(r) for r in key_metrics(session)]), ""]
    if session.models:
        out += ["### Checkpoints", "", md_table(MODEL_HEADERS, model_rows(session)), ""]
    srows = strategy_rows(session)
    if srows and session.strategies is not None:
        cmp = session.strategies
        out += ["### Strategies, side by side", "", f"> {cmp.summary}", ""]
        out += [md_table(strategy_headers(session), srows), ""]
        out += [f"- warning: {w}" for w in cmp.warnings]
        out += [""] if cmp.warnings else []
    checked = prediction_rows(session)
    if checked:
        out += ["### Predictions checked", "", f"> {prediction_heading(session)}", ""]
        out += [md_table(prediction_headers(session), checked), ""]
    server = server_heading(session)
    if server is not None:
        out += ["### The server's own load beside the replay", "", f"> {server}", ""]
        srv = server_rows(session)
        out += [md_table(SERVER_HEADERS, srv), ""] if srv else []
    out += ["### Per rank", "", md_table(RANK_HEADERS, rank_rows(session)), "", f"_{RANK_NOTE}_", ""]
    rows = slowest_rows(session, slowest)
    if rows:
        out += [
            f"### {len(rows)} slowest shards",
            "",
            md_table(SLOWEST_HEADERS, rows),
            "",
            f"_{SLOWEST_NOTE}_",
            "",
        ]
    crows = ceiling_rows(session.ceilings)
    out += [f"### {ceiling_header(session.ceilings, heading=True)}", ""]
    out += [md_table(["ceiling", "measured"], crows) if crows else "_not measured_", ""]
    prows = py_spy_rows(session)
    if prows:
        out += ["### py-spy: top frames per phase", "", md_table(PY_SPY_HEADERS, prows), ""]
    if session.notes:
        out += ["### Notes", "", *(f"- {n}" for n in session.notes), ""]
    return wrap_prose("\n".join(out).rstrip()) + "\n"


# -- comparison (`ckptprof compare`), shared by its table and Markdown formats ---------------------------------


def _number_or_dash(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def delta_row(d: Delta) -> list[str]:
    return [
        d.label,
        _number_or_dash(d.base, ".3f"),
        _number_or_dash(d.new, ".3f"),
        _number_or_dash(d.change, "+.3f"),
        _number_or_dash(d.pct, "+.1f"),
    ]


def _metric_value(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    return "-" if x is None else str(x)


def render_comparison(cmp: Comparison, base_name: str, new_name: str, markdown: bool = True) -> str:
    """Both verdicts and the deltas; ``markdown=False`` gives the same content as plain terminal tables."""
    fmt = "github" if markdown else "simple"

    def table(headers: list[str], rows: list[list[Any]]) -> str:
        if markdown:
            return md_table(headers, rows)
        return tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True)

    def heading(text: str) -> str:
        return f"### {text}" if markdown else text

    pct = cmp.wall.pct
    change = "n/a (BASE has no timings)" if pct is None else f"{pct:+.1f}%"
    out = [
        f"## ckptprof compare: load wall {change}" if markdown else f"load wall {change}",
        "",
        f"BASE {base_name}: {_number_or_dash(cmp.wall.base, '.3f')} s; NEW {new_name}: {_number_or_dash(cmp.wall.new, '.3f')} s",
        "",
    ]
    if cmp.config_diffs:
        out += [heading("Configuration differs (the runs may not measure the same thing)"), ""]
        out += [
            table(
                ["setting", "BASE", "NEW"],
                [[k, _metric_value(b), _metric_value(n)] for k, b, n in cmp.config_diffs],
            ),
            "",
        ]
    out += [heading("Verdicts"), ""]
    for name, summary in (("BASE", cmp.summaries[0]), ("NEW", cmp.summaries[1])):
        out.append(
            f"- **{name}:** {summary or 'no verdict'}" if markdown else f"{name}: {summary or 'no verdict'}"
        )
    out += [
        "",
        table(
            ["", "BASE", "NEW"], [[label, _metric_value(b), _metric_value(n)] for label, b, n in cmp.verdicts]
        ),
        "",
    ]
    for title, first, deltas in (
        ("Per model (slowest rank)", "model", cmp.models),
        ("Per rank (all models)", "rank", cmp.ranks),
        ("Per phase (rank-seconds, summed over ranks)", "phase", cmp.phases),
    ):
        if deltas:
            headers = [first, "BASE s", "NEW s", "change s", "change %"]
            out += [heading(title), "", table(headers, [delta_row(d) for d in deltas]), ""]
    return "\n".join(out).rstrip() + "\n"

"""GitHub-flavoured Markdown: the verdict first, then the tables, ready to paste into an issue.

Also holds the small row builders the HTML report shares (key metrics, slowest shards, models), so both
documents say the same thing in the same words.
"""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ckptprof.analysis.attribution import checkpoint_bytes, load_wall, run_totals, slowest_shards
from ckptprof.analysis.compare import Comparison, Delta
from ckptprof.analysis.memory import memory_summary
from ckptprof.analysis.verdict import VERDICT_NOTES
from ckptprof.render.table import (
    PY_SPY_HEADERS,
    RANK_HEADERS,
    STRATEGY_HEADERS,
    ceiling_header,
    ceiling_rows,
    prediction_headers,
    prediction_heading,
    prediction_rows,
    py_spy_rows,
    rank_rows,
    strategy_rows,
)
from ckptprof.session import Session
from ckptprof.units import human_bytes

PATH_SHARE_KEYS = ("storage", "page_cache", "deserialize", "h2d", "other")
SLOWEST_HEADERS = [
    "rank",
    "model",
    "shard",
    "wall s",
    "read s",
    "deser s",
    "h2d s",
    "bytes",
    "GB/s",
    "status",
]
MODEL_HEADERS = ["model", "path", "fs", "shards", "size", "page cache before"]


def md_cell(value: Any) -> str:
    """A table cell: pipes would end the cell and newlines the row, so escape / flatten them."""
    return str(value).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def md_table(headers: list[str], rows: list[list[Any]]) -> str:
    return tabulate(
        [[md_cell(c) for c in row] for row in rows],
        headers=[md_cell(h) for h in headers],
        tablefmt="github",
        disable_numparse=True,  # keep the renderers' own formatting (e.g. "0.50"), never re-round
    )


def _num(value: Any, fmt: str) -> str | None:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _percent(fraction: Any) -> float | None:
    return 100 * fraction if isinstance(fraction, (int, float)) else None


def key_metrics(session: Session) -> list[tuple[str, str]]:
    """The handful of numbers that back the verdict, as (label, value) pairs."""
    v = session.verdict or {}
    shares = run_totals(session).shares()
    wall = v.get("load_wall_s", load_wall(session))
    rows: list[tuple[str, str]] = [
        ("load wall (slowest rank)", f"{wall:.2f} s"),
        ("checkpoint", human_bytes(checkpoint_bytes(session))),
    ]
    optional = [
        ("achieved", _num(v.get("achieved_GBps"), ".2f"), " GB/s"),
        ("floor from ceilings", _num(v.get("floor_s"), ".2f"), " s"),
        ("read amplification", _num(v.get("read_amplification"), ".2f"), "x"),
        ("storage amplification", _num(v.get("storage_amplification"), ".2f"), "x"),
        ("major faults per GB", _num(v.get("major_faults_per_GB"), ".0f"), ""),
        ("rank skew (slowest / median)", _num(v.get("rank_skew"), ".2f"), "x"),
        ("not in page cache at start", _num(_percent(v.get("cold_fraction")), ".0f"), "%"),
    ]
    rows += [(label, value + unit) for label, value, unit in optional if value is not None]
    rows.append(
        (
            "rank time: read (storage + page cache) / deserialize / h2d / other",
            f"{100 * (shares['storage'] + shares['page_cache']):.0f}% "
            f"({100 * shares['storage']:.0f}% + {100 * shares['page_cache']:.0f}%) / "
            + " / ".join(f"{100 * shares[k]:.0f}%" for k in ("deserialize", "h2d", "other")),
        )
    )
    on_path = v.get("path_shares")
    if on_path:
        rows.append(
            (
                "SGLang's own load (faithful wall): storage busy / page cache / deserialize / h2d / other"
                + (f" (storage: {v['path_storage_source']})" if v.get("path_storage_source") else ""),
                " / ".join(f"{100 * on_path.get(k, 0.0):.0f}%" for k in PATH_SHARE_KEYS),
            )
        )
    if v.get("h2d_stand_in"):
        rows.append(("h2d", "host-copy stand-in (no CUDA device)"))
    memory = memory_summary(session)
    if memory:
        rows.append(("host memory (worst rank)", memory))
    delta = v.get("faithful_delta")
    text = f"{100 * delta:+.1f}%" if isinstance(delta, (int, float)) else "not run (--faithful)"
    fetched = [
        (sum(s.storage_bytes for s in m.shards), m.faithful_storage_bytes)
        for r in session.ranks
        for m in r.models
        if m.faithful_storage_bytes is not None
    ]
    if fetched and isinstance(delta, (int, float)):
        ours, theirs = sum(a for a, _ in fetched), sum(b or 0 for _, b in fetched)
        text += f" (from storage: {human_bytes(ours)} decomposed, {human_bytes(theirs)} faithful)"
    rounds = session.config.get("faithful_rounds") or 1
    if rounds > 1 and isinstance(delta, (int, float)):
        text += f"; medians of {rounds} alternated passes each"
    rows.append(("decomposed vs faithful wall", text))
    rows += [("caveat", str(v[key])) for key in VERDICT_NOTES if v.get(key)]
    return rows


def recommendations(session: Session) -> list[tuple[str, str]]:
    """(what to try, predicted outcome and why), fastest first; from the predictions when present."""
    v = session.verdict or {}
    predictions = v.get("predictions") or []
    if predictions:
        out = []
        for p in predictions:
            seconds = p.get("predicted_s")
            predicted = f"~{seconds:.2f} s predicted" if isinstance(seconds, (int, float)) else ""
            if predicted and p.get("slower_than_now"):
                predicted = f"not faster here: {predicted}"
            why = str(p.get("why", ""))
            outcome = f"{predicted} ({why})" if predicted and why else predicted or why
            out.append((str(p.get("flags", "")), outcome))
        return out
    return [(str(r), "") for r in v.get("recommendations") or []]


def slowest_rows(session: Session, n: int = 10) -> list[list[Any]]:
    rows = []
    for rank, role, s in slowest_shards(session, n):
        rate = s.bytes / s.wall_s / 1e9 if s.wall_s > 0 else 0.0
        status = s.status + (f": {s.error}" if s.error else "")
        rows.append(
            [
                rank,
                role,
                s.file,
                f"{s.wall_s:.3f}",
                f"{s.read_s:.3f}",
                f"{s.deserialize_s:.3f}",
                f"{s.h2d_s:.3f}",
                human_bytes(s.bytes),
                f"{rate:.2f}",
                status,
            ]
        )
    return rows


def model_rows(session: Session) -> list[list[Any]]:
    rows = []
    for m in session.models:
        resident = (
            f"{100 * m.resident_bytes_before / m.total_bytes:.0f}%"
            if m.resident_bytes_before is not None and m.total_bytes
            else "unknown"
        )
        rows.append([m.role, m.path, m.fs_type, len(m.shards), human_bytes(m.total_bytes), resident])
    return rows


def no_recommendation(session: Session) -> str:
    """Why the remedy list is empty: nothing to predict from, or nothing predicted to help."""
    values: list[Any] = []
    for key, value in (session.ceilings or {}).items():
        if key.endswith("GBps"):
            values += list(value.values()) if isinstance(value, dict) else [value]
    measured = any(isinstance(v, (int, float)) and v > 0 for v in values)
    if not measured:
        return "no predictions: the session has no measured ceilings (run without --no-probe)"
    return "no loader flag is predicted to help with this bottleneck"


def run_line(session: Session) -> str:
    cfg = session.config
    devices = ", ".join(str(d) for d in cfg.get("devices", [])) or "?"
    parts = [
        f"tp={cfg.get('tp', '?')} on {devices}",
        f"cache={cfg.get('cache', '?')}",
        f"strategy={cfg.get('strategy', '?')}",
    ]
    release = cfg.get("sglang_release")
    if isinstance(release, dict):
        parts.append(f"SGLang profile {release.get('profile')} ({release.get('why')})")
    source = cfg.get("faithful_source")
    if isinstance(source, str) and source:
        parts.append(f"faithful pass: {source}")
    host = session.environment.get("host")
    if host:
        parts.append(f"host {host}")
    if session.created:
        parts.append(session.created)
    return "; ".join(parts)


def headline(session: Session) -> str:
    bottleneck = (session.verdict or {}).get("bottleneck")
    if not bottleneck:
        return "no verdict"
    if bottleneck == "unknown":
        return "no timings"
    return "no single bottleneck" if bottleneck == "mixed" else f"{bottleneck}-bound"


def _try_line(flags: str, outcome: str) -> str:
    # Flags go in a code span so they paste into a shell intact; prose remedies stay prose.
    what = f"`{flags}`" if flags.startswith("--") else flags
    return f"- {what}" + (f": {outcome}" if outcome else "")


def render(session: Session, slowest: int = 10) -> str:
    v = session.verdict or {}
    out = [f"## ckptprof verdict: {headline(session)}", ""]
    if v.get("summary"):
        out += [f"> {v['summary']}", ""]
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
    if srows:
        cmp = session.extra["strategies"]
        out += ["### Strategies, side by side", "", f"> {cmp.get('summary', '')}", ""]
        out += [md_table(STRATEGY_HEADERS, srows), ""]
        out += [f"- warning: {w}" for w in cmp.get("warnings", [])]
        out += [""] if cmp.get("warnings") else []
    checked = prediction_rows(session)
    if checked:
        out += ["### Predictions checked", "", f"> {prediction_heading(session)}", ""]
        out += [md_table(prediction_headers(session), checked), ""]
    out += ["### Per rank", "", md_table(RANK_HEADERS, rank_rows(session)), ""]
    rows = slowest_rows(session, slowest)
    if rows:
        out += [f"### {len(rows)} slowest shards", "", md_table(SLOWEST_HEADERS, rows), ""]
    crows = ceiling_rows(session.ceilings or {})
    out += [f"### {ceiling_header(session.ceilings or {}, heading=True)}", ""]
    out += [md_table(["ceiling", "measured"], crows) if crows else "_not measured_", ""]
    prows = py_spy_rows(session)
    if prows:
        out += ["### py-spy: top frames per phase", "", md_table(PY_SPY_HEADERS, prows), ""]
    if session.notes:
        out += ["### Notes", "", *(f"- {n}" for n in session.notes), ""]
    return "\n".join(out).rstrip() + "\n"


# -- comparison (`ckptprof compare`), shared by its table and Markdown formats ---------------------------------


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def delta_row(d: Delta) -> list[str]:
    return [d.label, _fmt(d.base, ".3f"), _fmt(d.new, ".3f"), _fmt(d.change, "+.3f"), _fmt(d.pct, "+.1f")]


def _value(x: Any) -> str:
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
        f"BASE {base_name}: {_fmt(cmp.wall.base, '.3f')} s; NEW {new_name}: {_fmt(cmp.wall.new, '.3f')} s",
        "",
    ]
    if cmp.config_diffs:
        out += [heading("Configuration differs (the runs may not measure the same thing)"), ""]
        out += [
            table(["setting", "BASE", "NEW"], [[k, _value(b), _value(n)] for k, b, n in cmp.config_diffs]),
            "",
        ]
    out += [heading("Verdicts"), ""]
    for name, summary in (("BASE", cmp.summaries[0]), ("NEW", cmp.summaries[1])):
        out.append(
            f"- **{name}:** {summary or 'no verdict'}" if markdown else f"{name}: {summary or 'no verdict'}"
        )
    out += [
        "",
        table(["", "BASE", "NEW"], [[label, _value(b), _value(n)] for label, b, n in cmp.verdicts]),
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

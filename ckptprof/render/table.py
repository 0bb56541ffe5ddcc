"""The terminal summary: verdict, a model x rank table, the slowest shards, ceilings and notes."""

from __future__ import annotations

from tabulate import tabulate

from ckptprof.analysis.memory import memory_summary
from ckptprof.render.rows import (
    PY_SPY_HEADERS,
    RANK_HEADERS,
    RANK_NOTE,
    SERVER_HEADERS,
    SLOWEST_HEADERS,
    SLOWEST_NOTE,
    ceiling_header,
    ceiling_rows,
    faithful_source_line,
    model_headline_lines,
    prediction_headers,
    prediction_heading,
    prediction_rows,
    py_spy_rows,
    rank_rows,
    release_line,
    sampled_shares_text,
    server_heading,
    server_rows,
    slowest_rows,
    storage_disagreement,
    storage_line,
    strategy_headers,
    strategy_rows,
)
from ckptprof.session import Session
from ckptprof.units import human_bytes


def render(session: Session, slowest: int = 5) -> str:
    out: list[str] = []
    v = session.verdict
    cfg = session.config
    models = ", ".join(
        f"{m.role} {m.path} ({len(m.shards)} shards, {human_bytes(m.total_bytes)}, {m.fs_type})"
        for m in session.models
    )
    # Each model's own verdict first: what a user came for, before any table.
    headlines = model_headline_lines(session)
    disagreement = storage_disagreement(session)
    if headlines:
        out += [*headlines, *([disagreement] if disagreement else []), ""]
    out.append(
        f"ckptprof: {models}; tp={cfg.tp} on {', '.join(cfg.devices or [])}; cache={cfg.cache}; "
        f"strategy={cfg.strategy}" + (f" (draft: {cfg.draft_strategy})" if cfg.draft_strategy else "")
    )
    release = release_line(session)
    if release:
        out.append(release)
    source = faithful_source_line(session)
    if source:
        out.append(source)
    out.append("")
    # Numbers stay as formatted: tabulate would print "14.00" GB/s as "14".
    if session.ranks:
        out.append(
            tabulate(rank_rows(session), headers=RANK_HEADERS, tablefmt="simple", disable_numparse=True)
        )
        out.append(RANK_NOTE)
    else:
        out.append("no rank replayed anything")
    out.append("")
    rows = slowest_rows(session, slowest)
    if rows:
        out.append(f"{len(rows)} slowest shards")
        out.append(tabulate(rows, headers=SLOWEST_HEADERS, tablefmt="simple", disable_numparse=True))
        out.append(SLOWEST_NOTE)
        out.append("")
    ceiling_table = ceiling_rows(session.ceilings)
    if ceiling_table:
        out.append(tabulate(ceiling_table, headers=[ceiling_header(session.ceilings), ""], tablefmt="simple"))
        out.append("")
    if v is not None:
        out.append(f"verdict: {v.summary}")
        extras = []
        if v.read_amplification is not None:
            extras.append(f"read amplification {v.read_amplification:.2f}x")
        if v.storage_amplification is not None and (v.cold_fraction or 0) > 0:
            extras.append(f"storage amplification {v.storage_amplification:.2f}x")
        elif v.storage_amplification is not None:
            extras.append("storage amplification n/a (nothing was read from storage)")
        if v.major_faults_per_GB is not None:
            extras.append(f"{v.major_faults_per_GB:.0f} major faults/GB")
        extras.append(f"rank skew {v.rank_skew if v.rank_skew is not None else 1.0:.2f}")
        if v.faithful_delta is not None:
            rounds = session.config.faithful_rounds or 1
            medians = f" (medians of {rounds} alternated passes)" if rounds > 1 else ""
            extras.append(f"decomposed vs faithful wall {100 * v.faithful_delta:+.1f}%{medians}")
            sampled = sampled_shares_text(session)
            if sampled:
                extras.append(f"threads sampled (storage / page cache / cpu / waiting): {sampled}")
        elif session.config.faithful:
            extras.append("faithful check interrupted")
        else:
            extras.append("faithful check not run (--faithful)")
        if session.ranks:  # amplification, skew and the faithful check describe a load that ran
            out.append("  " + "; ".join(extras))
            storage = storage_line(session)
            if storage:
                out.append(f"  {storage}")
        memory = memory_summary(session)
        if memory:
            out.append(f"  memory: {memory}")
        for note in v.caveats:
            out.append(f"  note: {note}")
        for rec in v.recommendations:
            out.append(f"  try: {rec}")
    out.extend(strategy_lines(session))
    out.extend(prediction_lines(session))
    out.extend(server_log_lines(session))
    out.extend(py_spy_lines(session))
    for note in session.notes:
        out.append(f"note: {note}")
    return "\n".join(out)


def py_spy_lines(session: Session, top: int = 3) -> list[str]:
    rows = py_spy_rows(session, top)
    if not rows:
        return []
    return ["", "py-spy: top frames per phase", tabulate(rows, headers=PY_SPY_HEADERS, tablefmt="simple"), ""]


def server_log_lines(session: Session) -> list[str]:
    """The server's own load-weights time (from `run --log`) beside the replay's, per model."""
    head = server_heading(session)
    if head is None:
        return []
    rows = server_rows(session)
    if not rows:
        return ["", head]
    return ["", head, tabulate(rows, headers=SERVER_HEADERS, tablefmt="simple", disable_numparse=True)]


def prediction_lines(session: Session) -> list[str]:
    rows = prediction_rows(session)
    if not rows:
        return []
    return [
        "",
        prediction_heading(session),
        tabulate(rows, headers=prediction_headers(session), tablefmt="simple"),
    ]


def strategy_lines(session: Session) -> list[str]:
    """The side-by-side comparison of loading strategies, for the terminal."""
    rows = strategy_rows(session)
    cmp = session.strategies
    if not rows or cmp is None:
        return []
    out = ["", "strategies, side by side (same checkpoint, cache mode and ranks)"]
    out.append(tabulate(rows, headers=strategy_headers(session), tablefmt="simple"))
    out.append(f"strategies: {cmp.summary}")
    out.extend(f"  {r.label or r.strategy} {r.status}: {r.error}" for r in cmp.rows if r.error)
    out.extend(f"  warning: {w}" for w in cmp.warnings)
    return out

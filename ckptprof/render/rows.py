"""The rows and headings that several report formats show: one home, so the terminal table, Markdown and HTML
say the same thing in the same words. Each format module only lays them out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ckptprof.analysis.attribution import (
    checkpoint_bytes,
    load_wall,
    model_totals,
    run_totals,
    shard_work_s,
    slowest_shards,
)
from ckptprof.analysis.headlines import ModelHeadline, model_headlines
from ckptprof.analysis.memory import memory_summary
from ckptprof.analysis.server_log import server_log_heading, server_vs_replay
from ckptprof.analysis.storage import LABEL as STORAGE_LABEL
from ckptprof.analysis.storage import storage_figure
from ckptprof.analysis.verdict import limit_word
from ckptprof.profiling.sampler import CLASSES as SAMPLED_CLASSES
from ckptprof.results import Ceilings, Verdict
from ckptprof.session import RankModel, Session
from ckptprof.session_config import PredictionCheck
from ckptprof.units import gbps, human_bytes

RANK_HEADERS = [
    "rank",
    "device",
    "model",
    "wall s",
    "faithful s",
    "GB/s",
    "read",
    "deser",
    "h2d",
    "other",
    "status",
]


def rank_rows(session: Session) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for r in sorted(session.ranks, key=lambda r: r.rank):
        if not r.models:
            rows.append(
                [
                    r.rank,
                    r.device,
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    r.status + (f": {r.error}" if r.error else ""),
                ]
            )
            continue
        for m in r.models:
            t = model_totals(m)
            sh = t.shares()
            faithful = f"{m.faithful_wall_s:.2f}" if m.faithful_wall_s else "-"
            status = r.status if t.failed_shards == 0 else f"{t.failed_shards} shard(s) failed"
            rows.append(
                [
                    r.rank,
                    r.device,
                    m.role,
                    f"{m.wall_s:.2f}",
                    faithful,
                    f"{gbps(t.bytes, m.wall_s):.2f}",
                    f"{100 * (sh['storage'] + sh['page_cache']):.0f}%",
                    f"{100 * sh['deserialize']:.0f}%",
                    f"{100 * sh['h2d']:.0f}%",
                    # What the three phases leave: bookkeeping, allocation, waits. Without it the row never adds up.
                    f"{100 * sh['other']:.0f}%",
                    status,
                ]
            )
    return rows


def ceiling_rows(ceilings: Ceilings) -> list[list[str]]:
    rows = []
    learned = (
        f", measured again after {ceilings.storage_learned_from} read faster"
        if ceilings.storage_learned_from
        else ""
    )
    for value, label in (
        (ceilings.storage_read_1_stream_GBps, "storage read, cold, 1 stream"),
        (
            ceilings.storage_read_n_streams_GBps,
            f"storage read, cold, N streams (N={ceilings.storage_streams}){learned}",
        ),
        (ceilings.page_cache_read_GBps, "page-cache read"),
        (ceilings.memcpy_GBps, "host memcpy"),
        (ceilings.fresh_write_GBps, "host copy into fresh memory"),
        (ceilings.fresh_write_n_threads_GBps, "host copy into fresh memory, N threads at once"),
        (ceilings.fastsafetensors_GBps, "fastsafetensors, one loader per file"),
    ):
        if isinstance(value, (int, float)):
            rows.append([label, f"{value:.2f} GB/s"])
    for per_device, label in (
        (ceilings.h2d_pageable_GBps, "H2D pageable"),
        (ceilings.h2d_pinned_GBps, "H2D pinned"),
    ):
        for dev, rate in sorted((per_device or {}).items()):
            if rate is not None:
                rows.append([f"{label} {dev}", f"{rate:.2f} GB/s"])
    value = ceilings.h2d_pinned_all_devices_GBps
    if isinstance(value, (int, float)) and value > 0:
        rows.append(["H2D pinned, all devices at once", f"{value:.2f} GB/s"])
    value = ceilings.warm_pipeline_GBps
    if isinstance(value, (int, float)) and value > 0:
        n = ceilings.warm_pipeline_devices or 1
        where = "device" if n == 1 else f"{n} devices in turn"
        rows.append([f"page cache -> pinned -> {where}, both at once", f"{value:.2f} GB/s"])
    return rows


def ceiling_header(ceilings: Ceilings, heading: bool = False) -> str:
    """'ceiling (measured this run)', or how old the reused probe was; 'Ceilings (...)' as a heading."""
    word = "Ceilings" if heading else "ceiling"
    reused = ceilings.reused
    if isinstance(reused, dict) and isinstance(reused.get("age_s"), (int, float)):
        from ckptprof.units import age_words

        return f"{word} (reused: measured {age_words(reused['age_s'])} ago)"
    return f"{word} (measured this run)"


def release_line(session: Session) -> str:
    """Which SGLang release the replay stands for, and why that one ("" for sessions from before profiles)."""
    release = session.config.vllm_release or session.config.sglang_release
    if not isinstance(release, dict):
        return ""
    return f"replaying {release.get('description')} (profile chosen by {release.get('why')})"


PY_SPY_HEADERS = ["rank", "phase", "s", "frame"]


def py_spy_rows(session: Session, top: int = 3) -> list[list[Any]]:
    """The leaf frames py-spy saw most in each phase, per rank (only when the run used --py-spy)."""
    tops = session.extra.py_spy_top_frames or {}
    rows: list[list[Any]] = []
    for rank, phases in sorted(tops.items(), key=lambda kv: int(kv[0])):
        for phase, frames in sorted(phases.items()):
            for name, seconds in frames[:top]:
                rows.append([rank, phase, f"{seconds:.2f}", name])
    return rows


STRATEGY_HEADERS = [
    "strategy",
    "status",
    "wall s",
    "GB/s",
    "vs floor",
    "read/deser/h2d %",
    "bottleneck",
    "values",
    "SGLang flags",
]


def strategy_headers(session: Session) -> list[str]:
    """The strategy table's headers: the last column names whose flags they are (SGLang's or vLLM's)."""
    engine = "vLLM" if session.config.vllm_release is not None else "SGLang"
    return [*STRATEGY_HEADERS[:-1], f"{engine} flags"]


def strategy_rows(session: Session) -> list[list[str]]:
    """One row per strategy of `run --strategy` (empty when the run replayed one strategy without --verify)."""
    if session.strategies is None:
        return []
    # The same word for a limit as the verdict's: 'host-copy-bound' where the copies had no CUDA device.
    stand_in = not any(str(d).startswith("cuda") for d in session.config.devices or [])
    rows = []
    for r in session.strategies.rows:
        shares = r.shares
        rows.append(
            [
                r.label or r.strategy,
                # The reason goes under the table whole: cut to fit a cell it lost its end ("pip install f").
                r.status if not r.error else f"{r.status} (see below)",
                "-" if r.wall_s is None else f"{r.wall_s:.3f}",
                "-" if r.GBps is None else f"{r.GBps:.2f}",
                "-" if r.x_floor is None else f"{r.x_floor:.2f}x",
                "/".join(
                    f"{100 * v:.0f}"
                    for v in (
                        shares.get("storage", 0.0) + shares.get("page_cache", 0.0),
                        shares.get("deserialize", 0.0),
                        shares.get("h2d", 0.0),
                    )
                )
                if shares
                else "-",
                limit_word(r.bottleneck, stand_in) if r.bottleneck else "-",
                r.verify,
                r.flags,
            ]
        )
    return rows


PREDICTION_HEADERS = ["flags", "predicted", "measured", "error", "within 20%"]


REPRICED_HEADER = "re-priced with the storage then"


def prediction_heading(session: Session) -> str:
    checks = session.extra.prediction_check or [PredictionCheck()]
    head = "predictions checked: each recommended flag set replayed in the same cache mode"
    baseline = checks[0].baseline_s
    if baseline is not None:
        head += f" (this run: {baseline:.2f} s, {checks[0].baseline_wall} wall)"
    return head


def prediction_headers(session: Session) -> list[str]:
    checks = session.extra.prediction_check or []
    repriced = any(c.repriced_s is not None for c in checks)
    return PREDICTION_HEADERS + ([REPRICED_HEADER] if repriced else [])


def prediction_rows(session: Session) -> list[list[str]]:
    """`run --check-predictions`: each recommendation's predicted wall against the replay of its flags."""
    checks = session.extra.prediction_check
    if not checks:
        return []
    rows = []
    for check in checks:
        error = check.error
        verdict = "-" if check.within_tolerance is None else ("yes" if check.within_tolerance else "no")
        measured = check.measured_s
        # flags and status may be null in the file: shown as they always were (the cell left as it is)
        row: list[Any] = [
            check.flags,
            f"{check.predicted_s:.2f} s" if check.predicted_s is not None else "-",
            f"{measured:.2f} s ({check.measured_wall})" if measured is not None else check.status,
            f"{100 * error:+.0f}%" if error is not None else (check.reason or "-"),
            verdict,
        ]
        if any(c.repriced_s is not None for c in checks):
            row.append(_repriced_cell(check))
        rows.append(row)
    return rows


def _repriced_cell(check: PredictionCheck) -> str:
    """'2.31 s, -9%, yes (storage 1.62 GB/s)': the prediction made again from the storage just before the replay."""
    again = check.repriced_s
    if again is None:
        return "-"
    text = f"{again:.2f} s"
    error = check.repriced_error
    if error is not None:
        text += f", {100 * error:+.0f}%, " + ("yes" if check.repriced_within_tolerance else "no")
    storage = check.storage_GBps_then
    if storage is not None:
        text += f" (storage {storage:.2f} GB/s)"
    return text


PATH_SHARE_KEYS = ("storage", "page_cache", "deserialize", "h2d", "other")


SLOWEST_HEADERS = [
    "rank",
    "model",
    "shard",
    "work s",
    "queued s",
    "wall s",
    "read s",
    "deser s",
    "h2d s",
    "bytes",
    "GB/s",
    "status",
]

# What the per-rank and slowest-shard columns are, said under each table: wall-clock parts and thread-seconds are
# different quantities and are never mixed in one column.
RANK_NOTE = (
    "read / deser / h2d / other: parts of the model's wall, adding up to it; where threads ran different phases at "
    "once that time is split between them, and other is time in which no phase ran"
)
SLOWEST_NOTE = (
    "ranked by work: wall-clock time some thread worked on the shard; queued: the rest of its wall, waiting for a "
    "thread; read / deser / h2d s: thread-seconds, summed over the threads that did them; GB/s: bytes over work"
)


MODEL_HEADERS = ["model", "path", "fs", "shards", "size", "page cache before"]


def _num(value: Any, fmt: str) -> str | None:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _percent(fraction: Any) -> float | None:
    return 100 * fraction if isinstance(fraction, (int, float)) else None


def run_line(session: Session) -> str:
    cfg = session.config
    devices = ", ".join(str(d) for d in cfg.devices or []) or "?"
    parts = [
        f"tp={'?' if cfg.tp is None else cfg.tp} on {devices}",
        f"cache={'?' if cfg.cache is None else cfg.cache}",
        f"strategy={'?' if cfg.strategy is None else cfg.strategy}",
    ]
    release = cfg.sglang_release
    if release is not None:
        parts.append(f"SGLang profile {release.get('profile')} ({release.get('why')})")
    vllm_release = cfg.vllm_release
    if vllm_release is not None:
        parts.append(f"vLLM profile {vllm_release.get('profile')} ({vllm_release.get('why')})")
    source = faithful_source_line(session)
    if source:
        parts.append(source)
    host = session.environment.get("host")
    if host:
        parts.append(f"host {host}")
    if session.created:
        parts.append(session.created)
    return "; ".join(parts)


def faithful_source_line(session: Session) -> str | None:
    """What ran the faithful pass, with the engine's import time (taken before any clock started) beside it."""
    source = session.config.faithful_source
    if not source:
        return None
    imports = sorted(r.engine_import_s for r in session.ranks if r.engine_import_s is not None)
    if imports:
        median = imports[len(imports) // 2]
        source += f"; its import took {median:.1f} s a rank, outside every timed wall"
    lines = sum(1 for r in session.ranks if r.engine_output)
    if lines:
        source += (
            f"; what it wrote is kept in the session ({lines} rank{'s' if lines != 1 else ''}: "
            "`ckptprof report SESSION --engine-output` shows it)"
        )
    return f"faithful pass: {source}"


def engine_output_text(session: Session) -> str:
    """What the engine wrote while each rank imported and drove it (kept in ``ranks[].engine_output``), rank by
    rank; a sentence when nothing was kept."""
    kept = [r for r in session.ranks if r.engine_output]
    if not kept:
        source = session.config.faithful_source
        if not source:
            why = "the run had no faithful pass"
        elif source.startswith("ckptprof's replica"):
            why = "the faithful pass ran ckptprof's replica, not the engine"
        else:
            why = "the engine wrote nothing while the ranks imported and drove it"
        return f"no engine output in this session: {why}\n"
    parts = []
    for rank in kept:
        text = rank.engine_output or ""
        count = len(text.splitlines())
        parts.append(f"--- rank {rank.rank} ({rank.device}): {count} line{'s' if count != 1 else ''} ---\n")
        parts.append(text if text.endswith("\n") else text + "\n")
    return "".join(parts)


def model_headline_text(
    h: ModelHeadline, code: Callable[[str], str] = str, text: Callable[[str], str] = str
) -> str:
    """A model's headline line: its load wall, the limit that bound it with the figure, and the one thing to try.
    ``code`` marks up the flags (a Markdown code span, an HTML <code>) and ``text`` the rest (HTML escaping), so
    every format says the same words."""
    ranks = f"slowest of {h.ranks} ranks" if h.ranks > 1 else "1 rank"
    head = f"{h.role}: {h.wall_s:.2f} s load ({human_bytes(h.bytes)}, {ranks}); {h.limit}: {h.figure}; "
    remedy = h.remedy
    if remedy is None:
        why = (
            "no loader flag is predicted to help it"
            if h.priced
            else "no ceilings to price a remedy (run without --no-probe)"
        )
        return text(head + f"nothing to try: {why}")
    what = code(remedy.flags) if remedy.flags.startswith("--") else text(remedy.flags)
    outcome = (
        f"~{remedy.predicted_s:.2f} s predicted"
        if remedy.predicted_s is not None
        else "not priced: see below"
    )
    return text(head + "try ") + what + text(f" ({outcome})")


def model_headline_lines(session: Session) -> list[str]:
    """The per-model headlines as plain text, one line per model in load order."""
    return [model_headline_text(h) for h in model_headlines(session)]


def headline(session: Session) -> str:
    """The badge: the verdict's word for its limit, the one the summary, the per-model lines and the tables use."""
    verdict = session.verdict
    if verdict is None:
        return "no verdict"
    return limit_word(verdict.bottleneck, verdict.h2d_stand_in)


def storage_line(session: Session) -> str | None:
    """'storage share: 85% of the cold load's wall (cold minus warm); also ...': the one storage figure, named the
    same in every view."""
    figure = storage_figure(session)
    return None if figure is None else f"{STORAGE_LABEL}: {figure.value()}"


def storage_disagreement(session: Session) -> str | None:
    """The headline's sentence when the session's storage figures disagree beyond their noise."""
    figure = storage_figure(session)
    return None if figure is None else figure.disagreement()


def key_metrics(session: Session) -> list[tuple[str, str]]:
    """The handful of numbers that back the verdict, as (label, value) pairs."""
    v = session.verdict or Verdict()
    shares = run_totals(session).shares()
    wall = v.load_wall_s if v.load_wall_s is not None else load_wall(session)
    rows: list[tuple[str, str]] = [
        ("load wall (slowest rank)", f"{wall:.2f} s"),
        ("checkpoint", human_bytes(checkpoint_bytes(session))),
    ]
    optional = [
        ("achieved", _num(v.achieved_GBps, ".2f"), " GB/s"),
        ("floor from ceilings", _num(v.floor_s, ".2f"), " s"),
        ("read amplification", _num(v.read_amplification, ".2f"), "x"),
        ("storage amplification", _num(v.storage_amplification, ".2f"), "x"),
        ("major faults per GB", _num(v.major_faults_per_GB, ".0f"), ""),
        ("rank skew (slowest / median)", _num(v.rank_skew, ".2f"), "x"),
        ("not in page cache at start", _num(_percent(v.cold_fraction), ".0f"), "%"),
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
    figure = storage_figure(session)
    if figure is not None:
        rows.append((STORAGE_LABEL, figure.value()))
    on_path = v.path_shares
    if on_path:
        rows.append(
            (
                "SGLang's own load (faithful wall): storage busy / page cache / deserialize / h2d / other"
                + (f" (storage: {v.path_storage_source})" if v.path_storage_source else ""),
                " / ".join(f"{100 * on_path.get(k, 0.0):.0f}%" for k in PATH_SHARE_KEYS),
            )
        )
    sampled = sampled_shares_text(session)
    if sampled:
        rows.append(
            (
                "SGLang's own load, threads sampled in the kernel: storage / page cache / cpu / waiting",
                sampled,
            )
        )
    elif copies := copy_share_text(session):
        rows.append(("SGLang's own load, inside its copy_ calls (faults taken in them included)", copies))
    if v.h2d_stand_in:
        rows.append(("h2d", "host-copy stand-in (no CUDA device)"))
    memory = memory_summary(session)
    if memory:
        rows.append(("host memory (worst rank)", memory))
    delta = v.faithful_delta
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
    rounds = session.config.faithful_rounds or 1
    if rounds > 1 and isinstance(delta, (int, float)):
        text += f"; medians of {rounds} alternated passes each"
    rows.append(("decomposed vs faithful wall", text))
    rows += [("caveat", note) for note in v.caveats]
    return rows


def sampled_shares_text(session: Session) -> str:
    """'target 61% / 2% / 33% / 4% (40% of it inside its copies)' for the slowest rank of the faithful pass, when
    --sample-threads ran (the copies' part when the pass timed them)."""
    parts = []
    for slowest in _slowest_faithful(session, lambda m: bool(m.faithful_sampled_shares)):
        shares = slowest.faithful_sampled_shares or {}
        text = f"{slowest.role} " + " / ".join(f"{100 * shares.get(k, 0.0):.0f}%" for k in SAMPLED_CLASSES)
        if slowest.faithful_copy_s is not None and slowest.faithful_wall_s:
            text += (
                f" ({100 * slowest.faithful_copy_s / slowest.faithful_wall_s:.0f}% of it inside its copies)"
            )
        parts.append(text)
    return "; ".join(parts)


def copy_share_text(session: Session) -> str:
    """'target 92%': the part of the slowest rank's faithful wall spent inside SGLang's copies, per model, when the
    faithful pass timed them."""
    return "; ".join(
        f"{m.role} {100 * (m.faithful_copy_s or 0.0) / (m.faithful_wall_s or 1.0):.0f}%"
        for m in _slowest_faithful(
            session, lambda m: m.faithful_copy_s is not None and bool(m.faithful_wall_s)
        )
    )


def _slowest_faithful(session: Session, keep: Callable[[RankModel], bool]) -> list[RankModel]:
    """Per model role, in order, the kept rank model with the longest faithful wall (the rank the load waits for)."""
    kept = [m for r in session.ranks for m in r.models if keep(m)]
    return [
        max((m for m in kept if m.role == role), key=lambda m: m.faithful_wall_s or 0.0)
        for role in dict.fromkeys(m.role for m in kept)
    ]


def recommendations(session: Session) -> list[tuple[str, str]]:
    """(what to try, predicted outcome and why), fastest first; from the predictions when present."""
    v = session.verdict or Verdict()
    if v.predictions:
        out = []
        for p in v.predictions:
            seconds = p.predicted_s
            predicted = f"~{seconds:.2f} s predicted" if seconds is not None else ""
            if predicted and p.slower_than_now:
                predicted = f"not faster here: {predicted}"
            outcome = f"{predicted} ({p.why})" if predicted and p.why else predicted or p.why
            out.append((p.flags, outcome))
        return out
    return [(r, "") for r in v.recommendations]


def no_recommendation(session: Session) -> str:
    """Why the remedy list is empty: an engine whose flags are not priced, nothing to predict from, or nothing
    predicted to help."""
    if not session.ceilings.measured:
        return "no predictions: the session has no measured ceilings (run without --no-probe)"
    return "no loader flag is predicted to help with this bottleneck"


def slowest_rows(session: Session, n: int = 10) -> list[list[Any]]:
    rows = []
    for rank, role, s in slowest_shards(session, n):
        work = shard_work_s(s)
        rate = s.bytes / work / 1e9 if work > 0 else 0.0
        status = s.status + (f": {s.error}" if s.error else "")
        rows.append(
            [
                rank,
                role,
                s.file,
                f"{work:.3f}",
                "-" if s.queued_s is None else f"{s.queued_s:.3f}",
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


SERVER_HEADERS = ["model", "server load s", "ranks", "replay s", "server / replay"]


def server_rows(session: Session) -> list[list[Any]]:
    """`run --log`: the server's own load-weights time beside the replay's, per model (analysis.server_log)."""
    return [
        [
            r.model,
            "-" if r.server_s is None else f"{r.server_s:.2f}",
            r.server_ranks,
            "-" if r.replay_s is None else f"{r.replay_s:.2f}",
            "-" if r.ratio is None else f"{r.ratio:.1f}x",
        ]
        for r in server_vs_replay(session) or []
    ]


def server_heading(session: Session) -> str | None:
    """The server log's heading, saying when nothing in it was a load-weights phase; None without --log."""
    head = server_log_heading(session)
    if head is not None and not server_vs_replay(session):
        head += ": no load-weights phase found"
    return head

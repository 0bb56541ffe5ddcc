"""The terminal summary: verdict, a model x rank table, the slowest shards, ceilings and notes."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from ckptprof.analysis.attribution import model_totals, slowest_shards
from ckptprof.analysis.memory import memory_summary
from ckptprof.analysis.verdict import VERDICT_NOTES
from ckptprof.session import Session
from ckptprof.units import gbps, human_bytes


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


def ceiling_rows(ceilings: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key, label in (
        ("storage_read_1_stream_GBps", "storage read, cold, 1 stream"),
        ("storage_read_n_streams_GBps", "storage read, cold, N streams"),
        ("page_cache_read_GBps", "page-cache read"),
        ("memcpy_GBps", "host memcpy"),
        ("fresh_write_GBps", "host copy into fresh memory"),
        ("fresh_write_n_threads_GBps", "host copy into fresh memory, N threads at once"),
        ("fastsafetensors_GBps", "fastsafetensors, one loader per file"),
    ):
        value = ceilings.get(key)
        if isinstance(value, (int, float)):
            extra = f" (N={ceilings.get('storage_streams')})" if "n_streams" in key else ""
            rows.append([label + extra, f"{value:.2f} GB/s"])
    for key, label in (("h2d_pageable_GBps", "H2D pageable"), ("h2d_pinned_GBps", "H2D pinned")):
        for dev, value in sorted((ceilings.get(key) or {}).items()):
            rows.append([f"{label} {dev}", f"{value:.2f} GB/s"])
    value = ceilings.get("h2d_pinned_all_devices_GBps")
    if isinstance(value, (int, float)) and value > 0:
        rows.append(["H2D pinned, all devices at once", f"{value:.2f} GB/s"])
    return rows


def ceiling_header(ceilings: dict[str, Any], heading: bool = False) -> str:
    """'ceiling (measured this run)', or how old the reused probe was; 'Ceilings (...)' as a heading."""
    word = "Ceilings" if heading else "ceiling"
    reused = ceilings.get("reused")
    if isinstance(reused, dict) and isinstance(reused.get("age_s"), (int, float)):
        from ckptprof.probe.reuse import age_words

        return f"{word} (reused: measured {age_words(reused['age_s'])} ago)"
    return f"{word} (measured this run)"


def release_line(session: Session) -> str:
    """Which SGLang release the replay stands for, and why that one ("" for sessions from before profiles)."""
    release = session.config.get("sglang_release")
    if not isinstance(release, dict):
        return ""
    return f"replaying {release.get('description')} (profile chosen by {release.get('why')})"


def render(session: Session, slowest: int = 5) -> str:
    out: list[str] = []
    v = session.verdict or {}
    cfg = session.config
    models = ", ".join(
        f"{m.role} {m.path} ({len(m.shards)} shards, {human_bytes(m.total_bytes)}, {m.fs_type})"
        for m in session.models
    )
    out.append(
        f"ckptprof: {models}; tp={cfg.get('tp')} on {', '.join(cfg.get('devices', []))}; cache={cfg.get('cache')}; "
        f"strategy={cfg.get('strategy')}"
        + (f" (draft: {cfg['draft_strategy']})" if cfg.get("draft_strategy") else "")
    )
    release = release_line(session)
    if release:
        out.append(release)
    source = session.config.get("faithful_source")
    if isinstance(source, str) and source:
        out.append(f"faithful pass: {source}")
    out.append("")
    # Numbers stay as formatted: tabulate would print "14.00" GB/s as "14".
    if session.ranks:
        out.append(
            tabulate(rank_rows(session), headers=RANK_HEADERS, tablefmt="simple", disable_numparse=True)
        )
    else:
        out.append("no rank replayed anything")
    out.append("")
    rows = [
        [
            rank,
            role,
            s.file,
            f"{s.wall_s:.3f}",
            f"{s.read_s:.3f}",
            f"{s.deserialize_s:.3f}",
            f"{s.h2d_s:.3f}",
            human_bytes(s.bytes),
            s.status,
        ]
        for rank, role, s in slowest_shards(session, slowest)
    ]
    if rows:
        out.append(f"{len(rows)} slowest shards")
        out.append(
            tabulate(
                rows,
                headers=["rank", "model", "shard", "wall s", "read s", "deser s", "h2d s", "bytes", "status"],
                tablefmt="simple",
            )
        )
        out.append("")
    crow = ceiling_rows(session.ceilings or {})
    if crow:
        out.append(tabulate(crow, headers=[ceiling_header(session.ceilings or {}), ""], tablefmt="simple"))
        out.append("")
    if v:
        out.append(f"verdict: {v.get('summary', '')}")
        extras = []
        if v.get("read_amplification") is not None:
            extras.append(f"read amplification {v['read_amplification']:.2f}x")
        if v.get("storage_amplification") is not None and (v.get("cold_fraction") or 0) > 0:
            extras.append(f"storage amplification {v['storage_amplification']:.2f}x")
        elif v.get("storage_amplification") is not None:
            extras.append("storage amplification n/a (nothing was read from storage)")
        if v.get("major_faults_per_GB") is not None:
            extras.append(f"{v['major_faults_per_GB']:.0f} major faults/GB")
        extras.append(f"rank skew {v.get('rank_skew', 1.0):.2f}")
        if v.get("faithful_delta") is not None:
            rounds = session.config.get("faithful_rounds") or 1
            medians = f" (medians of {rounds} alternated passes)" if rounds > 1 else ""
            extras.append(f"decomposed vs faithful wall {100 * v['faithful_delta']:+.1f}%{medians}")
            on_path = v.get("path_shares") or {}
            if on_path.get("storage", 0.0) >= 0.05:  # on a warm load there is nothing to say
                source = v.get("path_storage_source")
                extras.append(
                    f"storage busy {100 * on_path.get('storage', 0.0):.0f}% of the faithful wall"
                    + (f" ({source})" if source else "")
                )
        elif session.config.get("faithful"):
            extras.append("faithful check interrupted")
        else:
            extras.append("faithful check not run (--faithful)")
        if session.ranks:  # amplification, skew and the faithful check describe a load that ran
            out.append("  " + "; ".join(extras))
        memory = memory_summary(session)
        if memory:
            out.append(f"  memory: {memory}")
        for key in VERDICT_NOTES:
            if v.get(key):
                out.append(f"  note: {v[key]}")
        for rec in v.get("recommendations", []):
            out.append(f"  try: {rec}")
    out.extend(strategy_lines(session))
    out.extend(prediction_lines(session))
    out.extend(server_log_lines(session))
    out.extend(py_spy_lines(session))
    for note in session.notes:
        out.append(f"note: {note}")
    return "\n".join(out)


PY_SPY_HEADERS = ["rank", "phase", "s", "frame"]


def py_spy_rows(session: Session, top: int = 3) -> list[list[Any]]:
    """The leaf frames py-spy saw most in each phase, per rank (only when the run used --py-spy)."""
    tops = session.extra.get("py_spy_top_frames") or {}
    rows: list[list[Any]] = []
    for rank, phases in sorted(tops.items(), key=lambda kv: int(kv[0])):
        for phase, frames in sorted(phases.items()):
            for name, seconds in frames[:top]:
                rows.append([rank, phase, f"{seconds:.2f}", name])
    return rows


def py_spy_lines(session: Session, top: int = 3) -> list[str]:
    rows = py_spy_rows(session, top)
    if not rows:
        return []
    return ["", "py-spy: top frames per phase", tabulate(rows, headers=PY_SPY_HEADERS, tablefmt="simple"), ""]


def server_log_lines(session: Session) -> list[str]:
    """The server's own load-weights time (from `run --log`) beside the replay's, per model."""
    log = session.extra.get("server_log")
    if not log:
        return []
    rows = []
    for phase in log.get("load_weights", []):
        role = phase.get("model") or "target"
        replay = max((m.wall_s for r in session.ranks for m in r.models if m.role == role), default=None)
        server = phase.get("seconds")
        rows.append(
            [
                role,
                "-" if server is None else f"{server:.2f}",
                phase.get("ranks", "-"),
                "-" if replay is None else f"{replay:.2f}",
                "-" if not (server and replay) else f"{server / replay:.1f}x",
            ]
        )
    head = f"server log {log.get('path')} ({log.get('framework')}, state {log.get('state')})"
    followed = [
        f"{role} replayed with {log[key]} (its load-weights bar)"
        for role, key in (("target", "strategy_from_log"), ("draft", "draft_strategy_from_log"))
        if log.get(key)
    ]
    if followed:
        head += "; the log set the path: " + ", ".join(followed)
    if not rows:
        return ["", head + ": no load-weights phase found"]
    table = tabulate(
        rows, headers=["model", "server load s", "ranks", "replay s", "server / replay"], tablefmt="simple"
    )
    return ["", head, table]


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


PREDICTION_HEADERS = ["flags", "predicted", "measured", "error", "within 20%"]
REPRICED_HEADER = "re-priced with the storage then"


def prediction_heading(session: Session) -> str:
    checks = session.extra.get("prediction_check") or [{}]
    head = "predictions checked: each recommended flag set replayed in the same cache mode"
    baseline = checks[0].get("baseline_s")
    if baseline is not None:
        head += f" (this run: {baseline:.2f} s, {checks[0].get('baseline_wall')} wall)"
    return head


def prediction_rows(session: Session) -> list[list[str]]:
    """`run --check-predictions`: each recommendation's predicted wall against the replay of its flags."""
    checks = session.extra.get("prediction_check")
    if not isinstance(checks, list) or not checks:
        return []
    rows = []
    for check in checks:
        error = check.get("error")
        verdict = (
            "-" if check.get("within_tolerance") is None else ("yes" if check["within_tolerance"] else "no")
        )
        measured = check.get("measured_s")
        row = [
            check.get("flags"),
            f"{check['predicted_s']:.2f} s" if check.get("predicted_s") is not None else "-",
            f"{measured:.2f} s ({check.get('measured_wall')})"
            if measured is not None
            else check.get("status"),
            f"{100 * error:+.0f}%" if error is not None else (check.get("reason") or "-"),
            verdict,
        ]
        if any(c.get("repriced_s") is not None for c in checks):
            row.append(_repriced_cell(check))
        rows.append(row)
    return rows


def _repriced_cell(check: dict[str, Any]) -> str:
    """'2.31 s, -9%, yes (storage 1.62 GB/s)': the prediction made again from the storage just before the replay."""
    again = check.get("repriced_s")
    if again is None:
        return "-"
    text = f"{again:.2f} s"
    error = check.get("repriced_error")
    if error is not None:
        text += f", {100 * error:+.0f}%, " + ("yes" if check.get("repriced_within_tolerance") else "no")
    storage = check.get("storage_GBps_then")
    if storage is not None:
        text += f" (storage {storage:.2f} GB/s)"
    return text


def prediction_headers(session: Session) -> list[str]:
    checks = session.extra.get("prediction_check") or []
    repriced = any(isinstance(c, dict) and c.get("repriced_s") is not None for c in checks)
    return PREDICTION_HEADERS + ([REPRICED_HEADER] if repriced else [])


def prediction_lines(session: Session) -> list[str]:
    rows = prediction_rows(session)
    if not rows:
        return []
    return [
        "",
        prediction_heading(session),
        tabulate(rows, headers=prediction_headers(session), tablefmt="simple"),
    ]


def strategy_rows(session: Session) -> list[list[str]]:
    """One row per strategy of `run --strategy` (empty when the run replayed one strategy without --verify)."""
    cmp = session.extra.get("strategies") or {}
    rows = []
    for r in cmp.get("rows", []):
        shares = r.get("shares") or {}
        rows.append(
            [
                r.get("label") or r["strategy"],
                # The reason goes under the table whole: cut to fit a cell it lost its end ("pip install f").
                r["status"] if not r.get("error") else f"{r['status']} (see below)",
                "-" if r.get("wall_s") is None else f"{r['wall_s']:.3f}",
                "-" if r.get("GBps") is None else f"{r['GBps']:.2f}",
                "-" if r.get("x_floor") is None else f"{r['x_floor']:.2f}x",
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
                r.get("bottleneck") or "-",
                r.get("verify", "-"),
                r.get("flags", ""),
            ]
        )
    return rows


def strategy_lines(session: Session) -> list[str]:
    """The side-by-side comparison of loading strategies, for the terminal."""
    rows = strategy_rows(session)
    if not rows:
        return []
    cmp = session.extra["strategies"]
    out = ["", "strategies, side by side (same checkpoint, cache mode and ranks)"]
    out.append(tabulate(rows, headers=STRATEGY_HEADERS, tablefmt="simple"))
    out.append(f"strategies: {cmp.get('summary', '')}")
    out.extend(
        f"  {r.get('label') or r['strategy']} {r['status']}: {r['error']}"
        for r in cmp.get("rows", [])
        if r.get("error")
    )
    out.extend(f"  warning: {w}" for w in cmp.get("warnings", []))
    return out

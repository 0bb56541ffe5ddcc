"""Chrome trace-event JSON (the "JSON object" format), which ui.perfetto.dev and chrome://tracing open.

Layout: one process per rank ("rank N (cuda:K)"), one thread (track) per model, and on it an X slice for the
model, nested X slices per shard and, inside each shard, X slices per phase. A counter track per rank plots
each shard's throughput. Timestamps are microseconds from the rank's replay start (``RankModel.start_s``,
``ShardTiming.start_s``): ranks are separate processes that start together after a barrier, so their clocks
line up to within the barrier's release skew.
"""

from __future__ import annotations

from typing import Any

from ckptprof.analysis.attribution import shard_work_s
from ckptprof.session import RankModel, RankResult, Session, ShardTiming, dumps_strict
from ckptprof.units import gbps

PHASE_FIELDS = (("read", "read_s"), ("deserialize", "deserialize_s"), ("h2d", "h2d_s"))
US = 1e6


def phase_segments(shard: ShardTiming) -> list[tuple[str, float, float]]:
    """(phase, start_s, seconds) for drawing a shard's phases one after the other from its start.

    The recorder sums each phase over the shard's tensors, so the real per-tensor interleaving
    (read t1, copy t1, read t2, ...) is summarised as one block per phase in that order; whatever is left of
    the shard's wall is untimed bookkeeping. If the phases add up to more than the wall (CUDA events can
    overlap the host's view), they are scaled down together so they still fit inside the shard.
    """
    seconds = [(name, max(0.0, float(getattr(shard, attr)))) for name, attr in PHASE_FIELDS]
    total = sum(s for _, s in seconds)
    span = max(0.0, shard.wall_s)
    scale = span / total if total > span and total > 0 else 1.0
    out: list[tuple[str, float, float]] = []
    t = shard.start_s
    for name, s in seconds:
        if s > 0:
            out.append((name, t, s * scale))
            t += s * scale
    return out


def _span_us(start_s: float, end_s: float) -> tuple[float, float]:
    """(ts, dur) in microseconds. Rounding the end, not the duration, keeps children inside their parents."""
    ts = round(start_s * US, 3)
    end = round(max(start_s, end_s) * US, 3)
    return ts, round(end - ts, 3)


def _slice(
    name: str, cat: str, pid: int, tid: int, start_s: float, end_s: float, args: dict[str, Any]
) -> dict[str, Any]:
    ts, dur = _span_us(start_s, end_s)
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}


def _roles(session: Session) -> list[str]:
    roles = [m.role for m in session.models]
    for r in session.ranks:
        roles += [m.role for m in r.models if m.role not in roles]
    return roles


def pid_of(rank: int) -> int:
    # pid 0 is the idle task to trace viewers; keep rank numbers readable but never 0.
    return rank + 1


def tid_stride(session: Session) -> int:
    """Model tracks get tid = pid * stride + k. Trace importers key threads by tid alone (as OS tids are
    unique), so tids must not repeat across ranks nor equal any pid; process-level events use tid = pid."""
    max_pid = max((pid_of(r.rank) for r in session.ranks), default=1)
    return 10 ** max(3, len(str(max_pid)))


def _shard_args(s: ShardTiming) -> dict[str, Any]:
    args: dict[str, Any] = {
        "bytes": s.bytes,
        "GB/s": round(gbps(s.bytes, shard_work_s(s)), 4),
        "storage_bytes": s.storage_bytes,
        "nonresident_bytes": s.nonresident_bytes,
        "major_faults": s.major_faults,
        "h2d_bytes": s.h2d_bytes,
        "tensors": s.tensors,
        "read_s": s.read_s,
        "deserialize_s": s.deserialize_s,
        "h2d_s": s.h2d_s,
        "wall_s": s.wall_s,
        "work_s": shard_work_s(s),
        "queued_s": s.queued_s,
        "status": s.status,
    }
    if s.error:
        args["error"] = s.error
    return args


def _phase_args(s: ShardTiming, phase: str, seconds: float) -> dict[str, Any]:
    args: dict[str, Any] = {"measured_s": seconds}
    if phase == "read":
        args.update(bytes=s.bytes, **{"GB/s": round(gbps(s.bytes, seconds), 4)})
    elif phase == "h2d":
        args.update(bytes=s.h2d_bytes, **{"GB/s": round(gbps(s.h2d_bytes, seconds), 4)})
    return args


def model_events(pid: int, tid: int, m: RankModel) -> list[dict[str, Any]]:
    shards = m.shards
    # The model's slice must enclose its shards even when clocks were read a hair apart.
    start = min([m.start_s, *(s.start_s for s in shards)])
    end = max([m.start_s + m.wall_s, *(s.start_s + max(0.0, s.wall_s) for s in shards)])
    total = sum(s.bytes for s in shards)
    failed = sum(1 for s in shards if s.status != "ok")
    model_args: dict[str, Any] = {
        "shards": len(shards),
        "bytes": total,
        "GB/s": round(gbps(total, m.wall_s), 4),
        "wall_s": m.wall_s,
        "failed_shards": failed,
    }
    if m.faithful_wall_s is not None:
        model_args["faithful_wall_s"] = m.faithful_wall_s
    events = [_slice(m.role, "model", pid, tid, start, end, model_args)]
    for s in shards:
        name = s.file if s.status == "ok" else f"{s.file} ({s.status})"
        events.append(
            _slice(name, "shard", pid, tid, s.start_s, s.start_s + max(0.0, s.wall_s), _shard_args(s))
        )
        seconds = {name: float(getattr(s, attr)) for name, attr in PHASE_FIELDS}
        for phase, t0, dur in phase_segments(s):
            events.append(
                _slice(phase, "phase", pid, tid, t0, t0 + dur, _phase_args(s, phase, seconds[phase]))
            )
    return events


def counter_events(pid: int, m: RankModel) -> list[dict[str, Any]]:
    """A step function: each shard's throughput from its start, back to 0 when the model is done."""
    events = []
    for s in m.shards:
        events.append(
            {
                "ph": "C",
                "name": "throughput GB/s",
                "pid": pid,
                "tid": pid,
                "ts": round(s.start_s * US, 3),
                "args": {
                    "materialised": round(gbps(s.bytes, s.wall_s), 4),
                    "from storage": round(gbps(s.storage_bytes, s.wall_s), 4),
                },
            }
        )
    if m.shards:
        last = max(s.start_s + max(0.0, s.wall_s) for s in m.shards)
        end = round(max(last, m.start_s + m.wall_s) * US, 3)
        events.append(
            {
                "ph": "C",
                "name": "throughput GB/s",
                "pid": pid,
                "tid": pid,
                "ts": end,
                "args": {"materialised": 0, "from storage": 0},
            }
        )
    return events


def rank_events(r: RankResult, roles: list[str], stride: int) -> list[dict[str, Any]]:
    pid = pid_of(r.rank)
    label = f"rank {r.rank} ({r.device})" + ("" if r.status == "ok" else f" {r.status}")
    events = [
        _meta("process_name", pid, pid, {"name": label}),
        _meta("process_sort_index", pid, pid, {"sort_index": r.rank}),
    ]
    if r.host or r.pid:
        events.append(_meta("process_labels", pid, pid, {"labels": f"host {r.host or '?'}, pid {r.pid}"}))
    for m in r.models:
        tid = pid * stride + roles.index(m.role) + 1
        events.append(_meta("thread_name", pid, tid, {"name": m.role}))
        events.append(_meta("thread_sort_index", pid, tid, {"sort_index": roles.index(m.role)}))
        events += model_events(pid, tid, m)
        events += counter_events(pid, m)
    if r.error:
        end = max((m.start_s + m.wall_s for m in r.models), default=0.0)
        events.append(
            {
                "ph": "i",
                "s": "p",
                "name": f"rank {r.status}",
                "cat": "error",
                "pid": pid,
                "tid": pid,
                "ts": round(end * US, 3),
                "args": {"error": r.error},
            }
        )
    return events


def trace(session: Session) -> dict[str, Any]:
    roles = _roles(session)
    stride = tid_stride(session)
    events: list[dict[str, Any]] = []
    for r in sorted(session.ranks, key=lambda r: r.rank):
        events += rank_events(r, roles, stride)
    v = session.verdict
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "tool": "ckptprof",
            "schema_version": session.schema_version,
            "created": session.created,
            "bottleneck": v.bottleneck if v is not None else None,
            "summary": v.summary if v is not None else None,
            "tp": session.config.tp,
            "cache": session.config.cache,
            "note": "phases inside a shard are drawn one after the other; per-tensor interleaving is summarised",
        },
    }


def render(session: Session) -> str:
    # Strict JSON: trace viewers reject the NaN / Infinity tokens Python would otherwise write.
    return dumps_strict(trace(session), separators=(",", ":"))

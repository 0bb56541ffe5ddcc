"""What watch saw, and its JSON: the session of a live server (``"observed": "live-server"``, docs/watch.md).

Kept apart from ckptprof.session (a replay's session): a watched server has no plan, no ceilings and no
per-shard timings, only what the kernel shows from outside. ``ckptprof report`` renders it (render/watch_report.py,
through watch/session_file.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptprof.version import __version__
from ckptprof.watch.counters import ProcCounters
from ckptprof.watch.gpu import GpuTracker
from ckptprof.watch.procs import RankProcess
from ckptprof.watch.reaped import Recovered
from ckptprof.watch.residency import ModelTrack
from ckptprof.watch.stacks import CLASSES as STACK_CLASSES
from ckptprof.watch.stacks import RankStacks

SCHEMA_VERSION = 1
OBSERVED = "live-server"
INTEGRATION = (
    "`ckptprof report` renders it (table, md, html, json); `ckptprof compare` holds it against a `ckptprof run` "
    "session of the same checkpoint"
)
# One row per sample in a rank's "samples": the columns, in order.
SAMPLE_COLUMNS = (
    "t_s",
    "read_bytes",
    "syscr",
    "major_faults",
    "user_s",
    "system_s",
    "rss_bytes",
    "threads",
    "state",
)


@dataclass
class RankTrack:
    rank: RankProcess
    first_seen_s: float
    first: ProcCounters
    last: ProcCounters
    samples: list[ProcCounters] = field(default_factory=list)
    gone_s: float | None = None  # seconds after watch began when it was found gone
    io_note: str | None = None
    stacks: RankStacks | None = None  # with --py-spy
    # How its end was seen: "zombie" (its final counters read before its parent reaped it), "reaped" (gone
    # between two samples: what it read after the last one is lost, unless recovered from its parent)
    end_seen: str | None = None
    recovered: Recovered | None = None  # its last reads, recovered from its parent's /proc/PID/io at its reap

    @property
    def label(self) -> str:
        return self.rank.label

    def add(self, counters: ProcCounters) -> None:
        self.samples.append(counters)
        self.last = counters

    def recovered_read_bytes(self) -> int:
        return 0 if self.recovered is None else self.recovered.read_bytes

    def read_bytes_total(self) -> int | None:
        """Bytes fetched from storage since it started: at the last look, plus what was recovered from its
        parent after it."""
        last = self.last.read_bytes
        return None if last is None else last + self.recovered_read_bytes()

    def delta(self, name: str) -> float | None:
        """How much a counter grew while watched (``read_bytes``, ``syscr``, ``major_faults``, ...)."""
        a, b = getattr(self.first, name), getattr(self.last, name)
        return None if a is None or b is None else b - a

    def rate(self, name: str) -> float | None:
        """The counter's growth per second over the last two samples."""
        if len(self.samples) < 2:
            return None
        a, b = self.samples[-2], self.samples[-1]
        va, vb = getattr(a, name), getattr(b, name)
        if va is None or vb is None or b.at <= a.at:
            return None
        return float(vb - va) / (b.at - a.at)

    def state_shares(self) -> dict[str, float]:
        counts: dict[str, int] = {}
        for s in self.samples[1:]:
            counts[s.state] = counts.get(s.state, 0) + 1
        total = sum(counts.values())
        return {k: round(v / total, 3) for k, v in sorted(counts.items())} if total else {}


@dataclass
class WatchRecord:
    pid: int
    command: list[str]
    started_by_watch: bool
    interval_s: float
    started_at: str  # ISO 8601, local time with offset
    engine: str | None = None
    launcher_age_s: float | None = None  # how long the launcher had run when watch attached
    ended_at: str | None = None
    duration_s: float = 0.0
    end_reason: str = "interrupted"  # exited | ready | timeout | interrupted
    exit_code: int | None = None  # the server's, when watch started it and it ended
    ranks: list[RankTrack] = field(default_factory=list)
    models: list[ModelTrack] = field(default_factory=list)
    log_source: str | None = None
    log_report: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    gpu: GpuTracker | None = None  # None: GPU memory was not looked at (a record built outside the watcher)

    # -- what the figures add up to ---------------------------------------------------------------------------

    def checkpoint_bytes(self) -> int:
        return sum(m.total_bytes for m in self.models)

    def storage_bytes_watched(self) -> int | None:
        """Their growth while watched, with what was recovered from parents at the ranks' reaps."""
        deltas = [r.delta("read_bytes") for r in self.ranks]
        if not deltas or any(d is None for d in deltas):
            return None
        return int(sum(d or 0 for d in deltas)) + self.storage_bytes_recovered()

    def storage_bytes_total(self) -> int | None:
        """What the ranks had fetched from storage since they started, before watch saw them included, with what
        was recovered from parents at the ranks' reaps."""
        values = [r.read_bytes_total() for r in self.ranks]
        return None if not values or any(v is None for v in values) else sum(v or 0 for v in values)

    def storage_bytes_recovered(self) -> int:
        """The part of both totals recovered from the ranks' parents (reads after watch's last look at a rank)."""
        return sum(r.recovered_read_bytes() for r in self.ranks)

    def amplification(self) -> float | None:
        total, ckpt = self.storage_bytes_total(), self.checkpoint_bytes()
        return None if total is None or not ckpt else total / ckpt

    def to_dict(self) -> dict[str, Any]:
        ckpt = self.checkpoint_bytes()
        amplification = self.amplification()
        return {
            "schema_version": SCHEMA_VERSION,
            "observed": OBSERVED,
            "ckptprof_version": __version__,
            "integration": INTEGRATION,
            "target": {
                "pid": self.pid,
                "command": self.command,
                "started_by_watch": self.started_by_watch,
                "engine": self.engine,
                "launcher_age_s": _r(self.launcher_age_s),
                "exit_code": self.exit_code,
            },
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_s": _r(self.duration_s),
            "end_reason": self.end_reason,
            "interval_s": self.interval_s,
            "totals": {
                "checkpoint_bytes": ckpt,
                "resident_bytes_start": sum(s.resident_at_start for m in self.models for s in m.shards),
                "resident_bytes_end": sum(m.resident_bytes for m in self.models),
                "storage_bytes_while_watched": self.storage_bytes_watched(),
                "storage_bytes_since_rank_start": self.storage_bytes_total(),
                "storage_bytes_recovered_from_parents": self.storage_bytes_recovered(),
                "read_amplification": None if amplification is None else round(amplification, 3),
            },
            "models": [_model_dict(m) for m in self.models],
            "sample_columns": list(SAMPLE_COLUMNS),
            "gpus": None if self.gpu is None else self.gpu.to_dict(),
            "ranks": [_rank_dict(r, self.gpu) for r in self.ranks],
            "log": None
            if self.log_source is None
            else {"source": self.log_source, "report": self.log_report},
            "notes": self.notes,
        }


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def _counters_dict(c: ProcCounters) -> dict[str, Any]:
    return {
        "read_bytes": c.read_bytes,
        "syscr": c.syscr,
        "rchar": c.rchar,
        "major_faults": c.major_faults,
        "user_s": _r(c.user_s, 2),
        "system_s": _r(c.system_s, 2),
    }


def _rank_dict(r: RankTrack, gpu: GpuTracker | None = None) -> dict[str, Any]:
    return {
        "label": r.label,
        "pid": r.rank.pid,
        "title": r.rank.role.title,
        "engine": r.rank.role.engine,
        "tp_rank": r.rank.role.tp_rank,
        "status": "running" if r.gone_s is None else "gone",
        "first_seen_s": _r(r.first_seen_s),
        "gone_s": _r(r.gone_s),
        "at_first_sight": _counters_dict(r.first),
        "at_last_sight": _counters_dict(r.last),
        "while_watched": {
            "read_bytes": r.delta("read_bytes"),
            "syscr": r.delta("syscr"),
            "major_faults": r.delta("major_faults"),
            "user_s": _r(r.delta("user_s"), 2),
            "system_s": _r(r.delta("system_s"), 2),
        },
        "peak_rss_bytes": max(s.rss_bytes for s in r.samples),
        "peak_threads": max(s.threads for s in r.samples),
        # NVML's figure for this pid (null: no GPU, or NVML does not list it, e.g. a pid of another namespace)
        "gpu_peak_bytes": None if gpu is None else gpu.peak_by_pid.get(r.rank.pid),
        "state_shares": r.state_shares(),
        "io_note": r.io_note,
        "end_seen": r.end_seen,
        "recovered_from_parent": None if r.recovered is None else _recovered_dict(r.recovered),
        "stacks": None
        if r.stacks is None
        else {
            "dumps": r.stacks.dumps,
            "top_frames": [[frame, n] for frame, n in r.stacks.top()],
            "last": r.stacks.last,
            "error": r.stacks.error,
            "classes": {c: r.stacks.classes[c] for c in STACK_CLASSES},
            "class_shares": r.stacks.shares(),
            "unclassified": r.stacks.unclassified,
        },
        "samples": [
            [
                _r(s.at - r.samples[0].at + r.first_seen_s),
                s.read_bytes,
                s.syscr,
                s.major_faults,
                _r(s.user_s, 2),
                _r(s.system_s, 2),
                s.rss_bytes,
                s.threads,
                s.state,
            ]
            for s in r.samples
        ],
    }


def _recovered_dict(x: Recovered) -> dict[str, Any]:
    return {
        "parent_pid": x.parent_pid,
        "read_bytes": x.read_bytes,
        "syscr": x.syscr,
        "split": x.split,
        "ended_with": list(x.ended_with),
        "parent_unexplained_read_bytes": x.parent_unexplained_read_bytes,
        "interval_s": [x.from_s, x.to_s],
    }


def _model_dict(m: ModelTrack) -> dict[str, Any]:
    return {
        "role": m.role,
        "path": m.path,
        "from": m.flag,
        "fs_type": m.fs_type,
        "total_bytes": m.total_bytes,
        "residency_reliable": m.reliable,
        "problem": m.problem,
        "shards": [
            {
                "file": s.file,
                "bytes": s.bytes,
                "resident_at_start": s.resident_at_start,
                "resident_at_end": s.resident,
                "first_growth_s": s.first_change_s,
                "full_s": s.full_s,
                "points": [list(p) for p in s.points],
            }
            for s in m.shards
        ],
    }


def write(record: WatchRecord, path: Path) -> None:
    """Written whole to a temporary name, then renamed: a reader never sees half a session."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record.to_dict(), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)

"""The one data model of a profiling run, and its versioned JSON form.

Everything downstream of the replay (analysis, renderers, compare) reads only a ``Session``. The JSON layout
is a contract users script against (see docs/json-contract.md): fields may be added, never renamed or
removed, and ``schema_version`` changes only on a breaking change.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ckptprof.errors import SessionFileError, os_problem
from ckptprof.results import Ceilings, ServerLog, StrategyComparison, StuckRank, Verdict

SCHEMA_VERSION = 1


@dataclass
class ShardInfo:
    """A shard file as discovered before the run (headers only)."""

    file: str
    bytes: int
    tensors: int = 0


@dataclass
class ModelInfo:
    """One checkpoint directory: the verifier (``target``) or the speculative ``draft``."""

    role: str
    path: str
    fs_type: str
    total_bytes: int
    shards: list[ShardInfo] = field(default_factory=list)
    # Bytes of the checkpoint that were in the page cache just before the replay started (after cache prep).
    resident_bytes_before: int | None = None
    # What the cache preparation did: "dropped", "warmed", "as-is", or why it could not drop.
    cache_note: str = ""


@dataclass
class ShardTiming:
    """What one rank spent on one shard. Seconds are summed over the shard's tensors."""

    file: str
    bytes: int = 0  # tensor bytes this rank materialised from the file (full tensors, as SGLang does)
    storage_bytes: int = 0  # bytes really fetched from storage (kernel io counters delta)
    nonresident_bytes: int = 0  # bytes of the file not in the page cache when the shard started
    major_faults: int = 0
    read_s: float = 0.0
    deserialize_s: float = 0.0
    h2d_s: float = 0.0
    h2d_bytes: int = 0  # bytes copied into this rank's parameters (its TP slices)
    wall_s: float = 0.0
    start_s: float = 0.0  # offset from the rank's replay start, for timelines
    tensors: int = 0
    status: str = "ok"
    error: str | None = None
    # A shard worked on by several threads (a pool opens it, the rank's thread copies it) spends part of its wall
    # waiting: for a free thread, or in the window until the rank's thread takes it up. work_s is the wall-clock
    # time some thread worked on it (the union of its phases and of each thread's stretch on it), queued_s the rest
    # of its wall; threads names the threads that worked on it, in order. None: an older session.
    work_s: float | None = None
    queued_s: float | None = None
    threads: list[str] | None = None


@dataclass
class RankModel:
    role: str
    wall_s: float = 0.0
    start_s: float = 0.0
    shards: list[ShardTiming] = field(default_factory=list)
    # Wall of SGLang's exact sequence (no decomposition) in a separate pass, when --faithful was asked for.
    faithful_wall_s: float | None = None
    # Bytes that pass fetched from storage (the kernel's count): a cold faithful pass should match this pass's.
    faithful_storage_bytes: int | None = None
    # What the block device under the files read while that pass ran (all processes: the device's own count).
    faithful_disk_read_bytes: int | None = None
    # With --faithful-rounds N > 1: every faithful pass's wall (faithful_wall_s is their median), and the walls of
    # the decomposed passes run in between (this pass's first) - alternated so a drifting machine hits both alike.
    faithful_walls: list[float] | None = None
    decomposed_walls: list[float] | None = None
    # The block device under the model's files (its /proc/diskstats name; None on NFS, FUSE, tmpfs, overlay) and how
    # long it had a request in flight during this pass (io_ticks), with the bytes it read: device-wide counts.
    disk: str | None = None
    disk_busy_s: float | None = None
    disk_read_bytes: int | None = None
    # The same busy time during SGLang's own (faithful) sequence, scaled to faithful_wall_s (the median of the
    # passes' busy fractions times it): how long storage was really busy on SGLang's path, no decomposition.
    faithful_disk_busy_s: float | None = None
    # With --sample-threads: the shares of SGLang's own (faithful) load wall in storage / page_cache / cpu / waiting,
    # from the rank's threads sampled in the kernel while it loaded unchanged (profiling/sampler.py), every pass's.
    faithful_sampled_shares: dict[str, float] | None = None
    # With --faithful: seconds the rank spent inside the copies of SGLang's sequence (each copy_ into a parameter
    # bracketed by the recorder's clock, the median of the passes). A copy from a mapping faults its pages in, so
    # this holds those faults and storage waits too; the sampled copy shares below tell them apart.
    faithful_copy_s: float | None = None
    # With --sample-threads: the part of each sampled share (same keys, fractions of the same wall) that fell inside
    # those copies: its "cpu" and "waiting" are the copies themselves (staging, DMA), the rest faults taken in them.
    faithful_sampled_copy_shares: dict[str, float] | None = None
    # One faithful pass's copy spans (start, end), offsets from the rank's start like start_s: carried from the rank
    # to the sampler in the parent, never saved.
    copy_spans: list[tuple[float, float]] | None = field(default=None, repr=False)
    # Wall-clock seconds of the decomposed pass in which each phase ran on some thread ("read", "deserialize",
    # "h2d"; "any": some phase), so overlapping threads count once: what rates divide bytes by. None: an older
    # session, or a pass that timed no phase.
    busy_s: dict[str, float] | None = None
    # The model's wall cut into "read", "deserialize", "h2d" and "other" (no phase running), adding up to wall_s:
    # each instant goes to the phases running then, split evenly where several threads ran different ones at once.
    wall_parts_s: dict[str, float] | None = None


@dataclass
class RankResult:
    rank: int
    device: str
    status: str = "ok"  # ok | failed
    error: str | None = None
    host: str = ""
    pid: int = 0
    models: list[RankModel] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_user_s: float = 0.0
    cpu_sys_s: float = 0.0
    peak_rss_bytes: int = (
        0  # the rank process's peak over its life (ru_maxrss): CUDA context and libraries too
    )
    rss_before_load_bytes: int = (
        0  # resident set when the load started (after set-up: context, parameters, rings)
    )
    load_peak_rss_bytes: int = (
        0  # peak resident set during the load alone (VmHWM reset at its start); 0: unknown
    )
    param_bytes: int = 0  # bytes of parameters allocated on the device at per-rank shapes
    # time.monotonic() when the load began: the host's processes share that clock, so a sampler outside the rank
    # can cut its ticks to each model's load (its start_s and wall_s from here).
    started_monotonic: float | None = None
    # "role/name" -> blake2b of the parameter's bytes after the load, when the replay was asked to --verify.
    checksums: dict[str, str] | None = None
    # A faithful pass through the installed engine's own iterator: seconds its import took in this rank (before
    # the clock started, never part of a wall), and what the engine wrote to stdout / stderr meanwhile (kept here,
    # not printed; head and tail when it wrote more than 64 KiB).
    engine_import_s: float | None = None
    engine_output: str | None = None
    # A rank that stopped making progress or could not be stopped: where it stood (its shard and byte range, kernel
    # wait, Python stack), read from outside it when the run gave up on it.
    stuck: StuckRank | None = None


@dataclass
class Session:
    config: dict[str, Any] = field(default_factory=dict)
    models: list[ModelInfo] = field(default_factory=list)
    ranks: list[RankResult] = field(default_factory=list)
    # What the hardware can do, measured in the same run (empty: --no-probe).
    ceilings: Ceilings = field(default_factory=Ceilings)
    # Which limit binds, and what to try (None until analysis.verdict computed it).
    verdict: Verdict | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    # Extra analysis results keyed by name (prediction checks, the server's log, py-spy's frames); JSON-safe.
    extra: dict[str, Any] = field(default_factory=dict)
    # Strategies replayed side by side (`run --strategy A,B` or --verify), on the first of their sessions.
    strategies: StrategyComparison | None = None
    # What the server's own boot log said about the load (`run --log`).
    server_log: ServerLog | None = None
    created: str = ""
    schema_version: int = SCHEMA_VERSION

    # -- convenience -----------------------------------------------------------------------------------------
    def model(self, role: str) -> ModelInfo | None:
        return next((m for m in self.models if m.role == role), None)

    @property
    def ok(self) -> bool:
        return bool(self.ranks) and all(r.status == "ok" for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, ceilings=Ceilings(), verdict=None, strategies=None, server_log=None))
        for rank in d["ranks"]:
            for model in rank.get("models") or []:
                model.pop("copy_spans", None)  # transient: the sampler's input, not a result
        d["ceilings"] = {} if self.ceilings == Ceilings() else self.ceilings.to_dict()
        d["verdict"] = self.verdict.to_dict() if self.verdict is not None else {}
        # The comparison and the server's log are written under "extra", where the JSON has always had them.
        del d["strategies"], d["server_log"]
        if self.strategies is not None:
            d["extra"]["strategies"] = self.strategies.to_dict()
        if self.server_log is not None:
            d["extra"]["server_log"] = self.server_log.to_dict()
        # schema_version first: it is the first thing a reader checks.
        return {"schema_version": d.pop("schema_version"), **d}

    def to_json(self) -> str:
        return dumps_strict(self.to_dict(), indent=1, sort_keys=False)

    def save(self, path: str | Path) -> Path:
        """Write atomically, so an interrupted run never leaves half a JSON file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".session-", suffix=".json", dir=path.parent)
        try:
            # mkstemp creates the file 0600; a session is a report to share, so give it the usual mode.
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(self.to_json())
                fh.write("\n")
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Session:
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema_version {version!r} (this ckptprof reads {SCHEMA_VERSION})")
        validate_session_dict(d)
        extra = dict(d.get("extra") or {})
        strategies = StrategyComparison.from_dict(extra.pop("strategies", None))
        server_log = ServerLog.from_dict(extra.pop("server_log", None))
        return cls(
            config=dict(d.get("config") or {}),
            models=[model_from_dict(m) for m in d.get("models") or []],
            ranks=[rank_from_dict(r) for r in d.get("ranks") or []],
            ceilings=Ceilings.from_dict(d.get("ceilings")),
            verdict=Verdict.from_dict(d.get("verdict")),
            environment=dict(d.get("environment") or {}),
            notes=list(d.get("notes") or []),
            artifacts=dict(d.get("artifacts") or {}),
            extra=extra,
            strategies=strategies,
            server_log=server_log,
            created=str(d.get("created") or ""),
        )

    @classmethod
    def load(cls, path: str | Path) -> Session:
        path = Path(path)
        try:
            text = _read_text(path)
        except UnicodeDecodeError:
            raise SessionFileError(path, "not a session JSON file (binary, not UTF-8 text)") from None
        except OSError as exc:
            raise SessionFileError(path, os_problem(exc, "a session JSON file")) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SessionFileError(path, f"not JSON ({exc.msg} at line {exc.lineno})") from None
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            raise SessionFileError(path, f"not a valid ckptprof session: {exc}") from None
        except RecursionError:
            raise SessionFileError(path, "not a valid ckptprof session: nested too deeply") from None
        if not isinstance(data, dict):
            raise SessionFileError(path, "not a ckptprof session (top level is not an object)")
        try:
            return cls.from_dict(data)
        except InvalidField as exc:
            raise SessionFileError(path, f"not a valid ckptprof session: field {exc}") from None
        except RecursionError:
            raise SessionFileError(path, "not a valid ckptprof session: nested too deeply") from None
        except (TypeError, ValueError, KeyError) as exc:
            raise SessionFileError(path, f"not a valid ckptprof session: {exc}") from None


def _pick(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    """Keep only the keys ``cls`` knows, so a session from a newer ckptprof (more fields) still loads."""
    if not isinstance(d, dict):
        raise TypeError(f"expected an object for {cls.__name__}, got {type(d).__name__}")
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def model_from_dict(d: dict[str, Any]) -> ModelInfo:
    kw = _pick(ModelInfo, d)
    kw["shards"] = [ShardInfo(**_pick(ShardInfo, s)) for s in kw.get("shards") or []]
    return ModelInfo(**kw)


def rank_from_dict(d: dict[str, Any]) -> RankResult:
    kw = _pick(RankResult, d)
    models = []
    for m in kw.get("models") or []:
        mk = _pick(RankModel, m)
        mk["shards"] = [ShardTiming(**_pick(ShardTiming, s)) for s in mk.get("shards") or []]
        models.append(RankModel(**mk))
    kw["models"] = models
    if kw.get("stuck") is not None:
        kw["stuck"] = StuckRank.from_dict(kw["stuck"])
    return RankResult(**kw)


# -- strict JSON ---------------------------------------------------------------------------------------------


def finite_or_none(obj: Any) -> Any:
    """``obj`` with every NaN or infinity (at any depth) replaced by None, so it can be written as strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def dumps_strict(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes the NaN / Infinity tokens (not JSON): non-finite numbers become null."""
    return json.dumps(finite_or_none(obj), allow_nan=False, **kwargs)


# -- validation of a loaded session --------------------------------------------------------------------------
# A session file is input: it may have been edited by hand, produced by another tool or truncated into nonsense.
# Every field an analysis or a renderer computes with is checked here, so a bad file is refused with one line
# naming the field instead of a traceback or a report of impossible numbers. Unknown fields are left alone
# (a newer ckptprof may add some).

# Byte counts and other integers fit an int64 (larger ones overflow the float arithmetic of rates).
MAX_COUNT = 2**63 - 1
# No load lasts 30 years: larger "seconds" are corrupt, and would overflow sums into infinity. No clock resolves
# less than a picosecond: a smaller non-zero duration is corrupt too, and would overflow rates (bytes / seconds).
MAX_SECONDS = 1e9
MIN_SECONDS = 1e-12


class InvalidField(ValueError):
    """A session field with the wrong type or an impossible value; the message starts with its path."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        super().__init__(f"{where}: {problem}")


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {text!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int) and abs(value) > MAX_COUNT:
        return format(value, ".3g")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_finite(obj: Any, where: str) -> None:
    """Refuse NaN and infinities anywhere (Python's json reads NaN, Infinity and 1e999 without complaint)."""
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise InvalidField(where, f"not a finite number ({_describe(obj)})")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            check_finite(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            check_finite(v, f"{where}[{i}]")


Check = Callable[[Any, str], object]


def _optional(check: Check) -> Check:
    def run(value: Any, where: str) -> None:
        if value is not None:
            check(value, where)

    return run


def _text(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise InvalidField(where, f"expected a string, got {_describe(value)}")


def _flag(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        raise InvalidField(where, f"expected true or false, got {_describe(value)}")


def _count(value: Any, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        raise InvalidField(where, f"expected a whole number >= 0, got {_describe(value)}")


def _seconds(value: Any, where: str) -> None:
    if not _is_number(value) or not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        raise InvalidField(where, f"expected a number of seconds >= 0, got {_describe(value)}")
    if 0 < value < MIN_SECONDS:
        raise InvalidField(where, f"{_describe(value)} seconds is below any clock's resolution")


def _nonnegative(value: Any, where: str) -> None:
    """A rate, ratio or share: a finite number >= 0."""
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        raise InvalidField(where, f"expected a number >= 0, got {_describe(value)}")


def _number(value: Any, where: str) -> None:
    """A signed figure (a relative error, a delta): any finite number."""
    if not _is_number(value) or not math.isfinite(value):
        raise InvalidField(where, f"expected a number, got {_describe(value)}")


def _list_of(check: Check) -> Check:
    def run(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise InvalidField(where, f"expected a list, got {_describe(value)}")
        for i, item in enumerate(value):
            check(item, f"{where}[{i}]")

    return run


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidField(where, f"expected an object, got {_describe(value)}")
    return value


def _map_of(check: Check) -> Check:
    def run(value: Any, where: str) -> None:
        for k, v in _object(value, where).items():
            check(v, f"{where}.{k}")

    return run


def _keys(spec: dict[str, Check], required: tuple[str, ...] = ()) -> Check:
    """An object whose listed keys, where present, pass their checks (other keys are not looked at); the
    ``required`` ones must be present."""

    def run(value: Any, where: str) -> None:
        obj = _object(value, where)
        for key in required:
            if key not in obj:
                raise InvalidField(where, f"missing field {key!r}")
        for key, check in spec.items():
            if key in obj:
                check(obj[key], f"{where}.{key}")

    return run


# Field checks by the dataclasses' annotations: every int of the data model is a count (bytes, faults, a rank,
# a pid), every float a duration in seconds.
_BY_ANNOTATION: dict[str, Check] = {
    "str": _text,
    "int": _count,
    "float": _seconds,
    "str | None": _optional(_text),
    "int | None": _optional(_count),
    "float | None": _optional(_seconds),
    "list[float] | None": _optional(_list_of(_seconds)),
    "list[str] | None": _optional(_list_of(_text)),
    "dict[str, str] | None": _optional(_map_of(_text)),
    "dict[str, float] | None": _optional(_map_of(_nonnegative)),
}


def _record(cls: type, nested: dict[str, Check] | None = None) -> Check:
    """An object read into dataclass ``cls``: required fields present, every known field of the right type."""
    nested = nested or {}

    def run(value: Any, where: str) -> None:
        obj = _object(value, where)
        for f in fields(cls):
            if f.name not in obj:
                if f.default is MISSING and f.default_factory is MISSING:
                    raise InvalidField(where, f"missing field {f.name!r}")
                continue
            check = nested.get(f.name) or _BY_ANNOTATION.get(str(f.type))
            if check is None:  # pragma: no cover - a new field type needs a check above
                raise TypeError(f"no check for {cls.__name__}.{f.name}: {f.type}")
            check(obj[f.name], f"{where}.{f.name}")

    return run


def _list_or_null(check: Check) -> Check:
    """A top-level list that older sessions may leave out or write as null."""
    return _optional(_list_of(check))


_shard_info = _record(ShardInfo)
_model_info = _record(ModelInfo, {"shards": _list_or_null(_shard_info)})
_shard_timing = _record(ShardTiming)
_rank_model = _record(RankModel, {"shards": _list_or_null(_shard_timing)})
_stuck_rank = _keys(
    {
        "pid": _count,
        "tid": _optional(_count),
        "state": _text,
        "phase": _optional(_text),
        "syscall": _optional(_text),
        "file": _optional(_text),
        "file_source": _optional(_text),
        "offset": _optional(_count),
        "length": _optional(_count),
        "wchan": _optional(_text),
        "kernel_stack": _list_of(_text),
        "python_stack": _list_of(_text),
        "python_stack_note": _optional(_text),
        "mount_point": _optional(_text),
        "fs_type": _optional(_text),
        "threads_in_kernel_wait": _count,
        "abandoned": _flag,
    },
    required=("pid",),
)
_rank_result = _record(RankResult, {"models": _list_or_null(_rank_model), "stuck": _optional(_stuck_rank)})

_config = _keys(
    {
        "tp": _optional(_count),
        "devices": _list_of(_text),
        "rank_devices": _optional(_list_of(_text)),
        "cache": _optional(_text),
        "strategy": _optional(_text),
        "strategy_flags": _optional(_text),
        "strategy_params": _optional(_object),
        "order": _optional(_text),
        "launcher": _optional(_text),
        "faithful_rounds": _optional(_count),
        "sglang_release": _optional(_object),
        "vllm_release": _optional(_object),
    }
)


# Ceilings measured per CUDA device: {device: GB/s}.
PER_DEVICE_CEILINGS = (
    "h2d_pageable_GBps",
    "h2d_pinned_GBps",
    "h2d_pinned_concurrent_GBps",
    "d2h_pinned_GBps",
)


def _ceilings(value: Any, where: str) -> None:
    """``*_GBps`` ceilings: a rate or null (not measured); the per-device ones a rate per device."""
    obj = _object(value, where)
    for key, v in obj.items():
        if key in PER_DEVICE_CEILINGS:
            _optional(_map_of(_nonnegative))(v, f"{where}.{key}")
        elif key.endswith("GBps"):
            _optional(_nonnegative)(v, f"{where}.{key}")
    _keys({"storage_streams": _optional(_count)})(obj, where)


_shares = _optional(_map_of(_nonnegative))
_verdict = _keys(
    {
        "bottleneck": _optional(_text),
        "summary": _optional(_text),
        "faithful_note": _optional(_text),
        "storage_note": _optional(_text),
        "path_storage_source": _optional(_text),
        "shares": _shares,
        "path_shares": _shares,
        "sampled_shares": _shares,
        "achieved_GBps": _optional(_nonnegative),
        "fetched_GBps": _optional(_nonnegative),
        "read_GBps": _optional(_nonnegative),
        "h2d_GBps": _optional(_nonnegative),
        "load_wall_s": _optional(_seconds),
        "floor_s": _optional(_seconds),
        "read_amplification": _optional(_nonnegative),
        "storage_amplification": _optional(_nonnegative),
        "major_faults_per_GB": _optional(_nonnegative),
        "rank_skew": _optional(_nonnegative),
        "cold_fraction": _optional(_nonnegative),
        "faithful_delta": _optional(_number),
        "checkpoint_bytes": _optional(_count),
        "recommendations": _optional(_list_of(_text)),
        "predictions": _optional(_list_of(_keys({"predicted_s": _optional(_seconds)}))),
    }
)


def _frame(value: Any, where: str) -> None:
    """A py-spy top frame: [name, seconds]."""
    if not isinstance(value, list) or len(value) != 2:
        raise InvalidField(where, f"expected [frame, seconds], got {_describe(value)}")
    _text(value[0], f"{where}[0]")
    _seconds(value[1], f"{where}[1]")


def _py_spy_top_frames(value: Any, where: str) -> None:
    for rank, phases in _object(value, where).items():
        if not rank.isdigit():
            raise InvalidField(f"{where}.{rank}", "expected a rank number as the key")
        _map_of(_list_of(_frame))(phases, f"{where}.{rank}")


_extra = _keys(
    {
        "strategies": _keys(
            {
                "summary": _optional(_text),
                "warnings": _list_of(_text),
                "rows": (
                    _list_of(
                        _keys(
                            {
                                "strategy": _text,
                                "label": _optional(_text),
                                "status": _text,
                                "error": _optional(_text),
                                "wall_s": _optional(_seconds),
                                "GBps": _optional(_nonnegative),
                                "x_floor": _optional(_nonnegative),
                                "shares": _shares,
                                "bottleneck": _optional(_text),
                            },
                            required=("strategy", "status"),
                        )
                    )
                ),
            }
        ),
        "prediction_check": _optional(
            _list_of(
                _keys(
                    {
                        "predicted_s": _optional(_seconds),
                        "measured_s": _optional(_seconds),
                        "baseline_s": _optional(_seconds),
                        "error": _optional(_number),
                        "repriced_s": _optional(_seconds),
                        "repriced_error": _optional(_number),
                        "storage_GBps_then": _optional(_nonnegative),
                    }
                )
            )
        ),
        "py_spy_top_frames": _optional(_py_spy_top_frames),
        "server_log": _optional(_keys({"load_weights": _list_of(_keys({"seconds": _optional(_seconds)}))})),
    }
)

_SESSION: dict[str, Check] = {
    "config": _optional(_config),
    "models": _list_or_null(_model_info),
    "ranks": _list_or_null(_rank_result),
    "ceilings": _optional(_ceilings),
    "verdict": _optional(_verdict),
    "environment": _optional(_object),
    "notes": _list_or_null(_text),
    "artifacts": _optional(_object),
    "extra": _optional(_extra),
    "created": _optional(_text),
}


# A compressed session (reports/ keep them as .json.gz) may not inflate past this: a session is megabytes.
MAX_INFLATED_BYTES = 1 << 30


def _read_text(path: Path) -> str:
    """The file's text; a ``.gz`` file is inflated first (at most MAX_INFLATED_BYTES)."""
    if path.suffix != ".gz":
        return path.read_text(encoding="utf-8")
    import gzip
    import zlib

    try:
        with gzip.open(path, "rb") as fh:
            data = fh.read(MAX_INFLATED_BYTES + 1)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise SessionFileError(path, f"named .gz but not a whole gzip file ({exc})") from None
    if len(data) > MAX_INFLATED_BYTES:
        raise SessionFileError(path, f"inflates past {MAX_INFLATED_BYTES} bytes: not a session")
    return data.decode("utf-8")


def validate_session_dict(d: dict[str, Any]) -> None:
    """Raise InvalidField, naming the first bad field (e.g. ``ranks[0].models[0].wall_s``), for a session
    document whose numbers are not finite, whose fields have the wrong types or impossible values."""
    for key, check in _SESSION.items():
        if key in d:
            check_finite(d[key], key)
            check(d[key], key)


def validate_ceilings(d: Any, where: str = "ceilings") -> None:
    """The same checks for ceilings read on their own (`ckptprof probe --json` output)."""
    check_finite(d, where)
    _ceilings(d, where)

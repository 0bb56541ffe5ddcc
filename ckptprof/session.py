"""The one data model of a profiling run, and its versioned JSON form.

Everything downstream of the replay (analysis, renderers, compare) reads only a ``Session``. The JSON layout
is a contract users script against (see docs/json-contract.md): fields may be added, never renamed or
removed, and ``schema_version`` changes only on a breaking change.
"""

from __future__ import annotations

import copy
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, ValidationError, WrapValidator, with_config

from ckptprof.errors import SessionFileError, os_problem
from ckptprof.results import (
    Ceilings,
    CeilingsField,
    ServerLog,
    ServerLogShape,
    StrategyComparison,
    StrategyComparisonField,
    StuckRank,
    StuckRankField,
    Verdict,
    VerdictField,
    check_unknown_rates,
)
from ckptprof.session_config import RunConfig, RunConfigField, SessionExtra, SessionExtraField
from ckptprof.session_fields import (
    EMPTY_AS_NONE,
    MAX_COUNT,
    MAX_SECONDS,
    MIN_SECONDS,
    NULL_AS_EMPTY,
    NULL_AS_EMPTY_OBJECT,
    Count,
    Flag,
    InvalidField,
    Rate,
    Seconds,
    Text,
    adapter,
    check_finite,
    decode,
    refusal,
)

__all__ = [
    "MAX_COUNT",
    "MAX_SECONDS",
    "MIN_SECONDS",
    "SCHEMA_VERSION",
    "Flag",
    "InvalidField",
    "ModelInfo",
    "RankModel",
    "RankResult",
    "RunConfig",
    "Session",
    "SessionExtra",
    "ShardInfo",
    "ShardTiming",
    "check_finite",
    "dumps_strict",
    "finite_or_none",
    "validate_ceilings",
    "validate_session_dict",
]

SCHEMA_VERSION = 1


@dataclass
class ShardInfo:
    """A shard file as discovered before the run (headers only)."""

    file: Text
    bytes: Count
    tensors: Count = 0


@dataclass
class ModelInfo:
    """One checkpoint directory: the verifier (``target``) or the speculative ``draft``."""

    role: Text
    path: Text
    fs_type: Text
    total_bytes: Count
    shards: Annotated[list[ShardInfo], NULL_AS_EMPTY] = field(default_factory=list)
    # Bytes of the checkpoint that were in the page cache just before the replay started (after cache prep).
    resident_bytes_before: Count | None = None
    # What the cache preparation did: "dropped", "warmed", "as-is", or why it could not drop.
    cache_note: Text = ""


@dataclass
class ShardTiming:
    """What one rank spent on one shard. Seconds are summed over the shard's tensors."""

    file: Text
    bytes: Count = 0  # tensor bytes this rank materialised from the file (full tensors, as SGLang does)
    storage_bytes: Count = 0  # bytes really fetched from storage (kernel io counters delta)
    nonresident_bytes: Count = 0  # bytes of the file not in the page cache when the shard started
    major_faults: Count = 0
    read_s: Seconds = 0.0
    deserialize_s: Seconds = 0.0
    h2d_s: Seconds = 0.0
    h2d_bytes: Count = 0  # bytes copied into this rank's parameters (its TP slices)
    wall_s: Seconds = 0.0
    start_s: Seconds = 0.0  # offset from the rank's replay start, for timelines
    tensors: Count = 0
    status: Text = "ok"
    error: Text | None = None
    # A shard worked on by several threads (a pool opens it, the rank's thread copies it) spends part of its wall
    # waiting: for a free thread, or in the window until the rank's thread takes it up. work_s is the wall-clock
    # time some thread worked on it (the union of its phases and of each thread's stretch on it), queued_s the rest
    # of its wall; threads names the threads that worked on it, in order. None: an older session.
    work_s: Seconds | None = None
    queued_s: Seconds | None = None
    threads: list[Text] | None = None


@dataclass
class RankModel:
    role: Text
    wall_s: Seconds = 0.0
    start_s: Seconds = 0.0
    shards: Annotated[list[ShardTiming], NULL_AS_EMPTY] = field(default_factory=list)
    # Wall of SGLang's exact sequence (no decomposition) in a separate pass, when --faithful was asked for.
    faithful_wall_s: Seconds | None = None
    # Bytes that pass fetched from storage (the kernel's count): a cold faithful pass should match this pass's.
    faithful_storage_bytes: Count | None = None
    # What the block device under the files read while that pass ran (all processes: the device's own count).
    faithful_disk_read_bytes: Count | None = None
    # With --faithful-rounds N > 1: every faithful pass's wall (faithful_wall_s is their median), and the walls of
    # the decomposed passes run in between (this pass's first) - alternated so a drifting machine hits both alike.
    faithful_walls: list[Seconds] | None = None
    decomposed_walls: list[Seconds] | None = None
    # The block device under the model's files (its /proc/diskstats name; None on NFS, FUSE, tmpfs, overlay) and how
    # long it had a request in flight during this pass (io_ticks), with the bytes it read: device-wide counts.
    disk: Text | None = None
    disk_busy_s: Seconds | None = None
    disk_read_bytes: Count | None = None
    # The same busy time during SGLang's own (faithful) sequence, scaled to faithful_wall_s (the median of the
    # passes' busy fractions times it): how long storage was really busy on SGLang's path, no decomposition.
    faithful_disk_busy_s: Seconds | None = None
    # With --sample-threads: the shares of SGLang's own (faithful) load wall in storage / page_cache / cpu / waiting,
    # from the rank's threads sampled in the kernel while it loaded unchanged (profiling/sampler.py), every pass's.
    faithful_sampled_shares: dict[str, Rate] | None = None
    # With --faithful: seconds the rank spent inside the copies of SGLang's sequence (each copy_ into a parameter
    # bracketed by the recorder's clock, the median of the passes). A copy from a mapping faults its pages in, so
    # this holds those faults and storage waits too; the sampled copy shares below tell them apart.
    faithful_copy_s: Seconds | None = None
    # With --sample-threads: the part of each sampled share (same keys, fractions of the same wall) that fell inside
    # those copies: its "cpu" and "waiting" are the copies themselves (staging, DMA), the rest faults taken in them.
    faithful_sampled_copy_shares: dict[str, Rate] | None = None
    # One faithful pass's copy spans (start, end), offsets from the rank's start like start_s: carried from the rank
    # to the sampler in the parent, never saved.
    copy_spans: list[tuple[Seconds, Seconds]] | None = field(default=None, repr=False)
    # Wall-clock seconds of the decomposed pass in which each phase ran on some thread ("read", "deserialize",
    # "h2d"; "any": some phase), so overlapping threads count once: what rates divide bytes by. None: an older
    # session, or a pass that timed no phase.
    busy_s: dict[str, Rate] | None = None
    # The model's wall cut into "read", "deserialize", "h2d" and "other" (no phase running), adding up to wall_s:
    # each instant goes to the phases running then, split evenly where several threads ran different ones at once.
    wall_parts_s: dict[str, Rate] | None = None


@dataclass
class RankResult:
    rank: Count
    device: Text
    status: Text = "ok"  # ok | failed
    error: Text | None = None
    host: Text = ""
    pid: Count = 0
    models: Annotated[list[RankModel], NULL_AS_EMPTY] = field(default_factory=list)
    wall_s: Seconds = 0.0
    cpu_user_s: Seconds = 0.0
    cpu_sys_s: Seconds = 0.0
    # the rank process's peak over its life (ru_maxrss): CUDA context and libraries too
    peak_rss_bytes: Count = 0
    # resident set when the load started (after set-up: context, parameters, rings)
    rss_before_load_bytes: Count = 0
    # what the rank process had read from block storage when its load started (/proc/self/io: the interpreter,
    # imports, the engine's import): a watcher outside sees these besides the checkpoint. None: no /proc/self/io.
    read_bytes_before_load: Count | None = None
    # the same for the first faithful pass's rank process (a process of its own, that imported the engine)
    faithful_read_bytes_before_load: Count | None = None
    # peak resident set during the load alone (VmHWM reset at its start); 0: unknown
    load_peak_rss_bytes: Count = 0
    param_bytes: Count = 0  # bytes of parameters allocated on the device at per-rank shapes
    # time.monotonic() when the load began: the host's processes share that clock, so a sampler outside the rank
    # can cut its ticks to each model's load (its start_s and wall_s from here).
    started_monotonic: Seconds | None = None
    # "role/name" -> blake2b of the parameter's bytes after the load, when the replay was asked to --verify.
    checksums: dict[str, Text] | None = None
    # A faithful pass through the installed engine's own iterator: seconds its import took in this rank (before
    # the clock started, never part of a wall), and what the engine wrote to stdout / stderr meanwhile (kept here,
    # not printed; head and tail when it wrote more than 64 KiB).
    engine_import_s: Seconds | None = None
    engine_output: Text | None = None
    # A rank that stopped making progress or could not be stopped: where it stood (its shard and byte range, kernel
    # wait, Python stack), read from outside it when the run gave up on it.
    stuck: StuckRankField | None = None


@dataclass(init=False)
class Session:
    # What the run replayed and how (session_config.RunConfig: a field per key).
    config: RunConfig = field(default_factory=RunConfig)
    models: list[ModelInfo] = field(default_factory=list)
    ranks: list[RankResult] = field(default_factory=list)
    # What the hardware can do, measured in the same run (empty: --no-probe).
    ceilings: Ceilings = field(default_factory=Ceilings)
    # Which limit binds, and what to try (None until analysis.verdict computed it).
    verdict: Verdict | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    # Extra analysis results (prediction checks, the server's log, py-spy's frames): session_config.SessionExtra.
    extra: SessionExtra = field(default_factory=SessionExtra)
    # Strategies replayed side by side (`run --strategy A,B` or --verify), on the first of their sessions.
    strategies: StrategyComparison | None = None
    # What the server's own boot log said about the load (`run --log`).
    server_log: ServerLog | None = None
    created: str = ""
    schema_version: int = SCHEMA_VERSION

    def __init__(
        self,
        config: RunConfig | Mapping[str, Any] | None = None,
        models: list[ModelInfo] | None = None,
        ranks: list[RankResult] | None = None,
        ceilings: Ceilings | None = None,
        verdict: Verdict | None = None,
        environment: dict[str, Any] | None = None,
        notes: list[str] | None = None,
        artifacts: dict[str, Any] | None = None,
        extra: SessionExtra | Mapping[str, Any] | None = None,
        strategies: StrategyComparison | None = None,
        server_log: ServerLog | None = None,
        created: str = "",
        schema_version: int = SCHEMA_VERSION,
    ) -> None:
        # A config or extra may be given as the dict it is written as (the readers and writers that still build
        # one, tests, scripts): it is decoded into its record, checked as on load.
        self.config = config if isinstance(config, RunConfig) else RunConfig.from_dict(dict(config or {}))
        self.models = [] if models is None else models
        self.ranks = [] if ranks is None else ranks
        self.ceilings = Ceilings() if ceilings is None else ceilings
        self.verdict = verdict
        self.environment = {} if environment is None else environment
        self.notes = [] if notes is None else notes
        self.artifacts = {} if artifacts is None else artifacts
        self.extra = (
            extra
            if isinstance(extra, SessionExtra)
            else decode(SessionExtraField, dict(extra or {}), "extra")
        )
        self.strategies = strategies
        self.server_log = server_log
        self.created = created
        self.schema_version = schema_version

    # -- convenience -----------------------------------------------------------------------------------------
    def model(self, role: str) -> ModelInfo | None:
        return next((m for m in self.models if m.role == role), None)

    @property
    def ok(self) -> bool:
        return bool(self.ranks) and all(r.status == "ok" for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        ranks = [asdict(r) for r in self.ranks]
        for rank in ranks:
            for model in rank.get("models") or []:
                model.pop("copy_spans", None)  # transient: the sampler's input, not a result
        extra = self.extra.to_dict()
        # The comparison and the server's log are written under "extra", where the JSON has always had them.
        if self.strategies is not None:
            extra["strategies"] = self.strategies.to_dict()
        if self.server_log is not None:
            extra["server_log"] = self.server_log.to_dict()
        # schema_version first: it is the first thing a reader checks.
        return {
            "schema_version": self.schema_version,
            "config": self.config.to_dict(),
            "models": [asdict(m) for m in self.models],
            "ranks": ranks,
            "ceilings": {} if self.ceilings == Ceilings() else self.ceilings.to_dict(),
            "verdict": self.verdict.to_dict() if self.verdict is not None else {},
            "environment": copy.deepcopy(self.environment),
            "notes": list(self.notes),
            "artifacts": copy.deepcopy(self.artifacts),
            "extra": extra,
            "created": self.created,
        }

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
        """The session ``d`` describes, checked field by field (InvalidField names the first bad one)."""
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema_version {version!r} (this ckptprof reads {SCHEMA_VERSION})")
        return cls._from_document(validate_session_dict(d), d)

    @classmethod
    def _from_document(cls, doc: _Document, d: dict[str, Any]) -> Session:
        raw_extra = d.get("extra") or {}
        return cls(
            config=doc.config,
            models=doc.models,
            ranks=doc.ranks,
            ceilings=doc.ceilings,
            verdict=doc.verdict,
            environment=doc.environment,
            notes=doc.notes,
            artifacts=doc.artifacts,
            extra=_session_extra(doc.extra),
            strategies=doc.extra.strategies,
            server_log=ServerLog.from_dict(raw_extra.get("server_log")),
            created=doc.created or "",
        )

    @classmethod
    def load(cls, path: str | Path) -> Session:
        path = Path(path)
        return cls.from_file_data(path, read_session_json(path))

    @classmethod
    def from_file_data(cls, path: Path, data: dict[str, Any]) -> Session:
        """The session in ``data``, the JSON object ``read_session_json`` read from ``path``: ``load``'s checking
        half, with its one-line errors naming the file."""
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
# Every field an analysis or a renderer computes with is typed (session_fields: counts, seconds, rates), and pydantic
# checks each where it decodes it, so a bad file is refused with one line naming the field instead of a traceback
# or a report of impossible numbers. Unknown fields are left alone (a newer ckptprof may add some).


@with_config(ConfigDict(title="SessionExtra", use_attribute_docstrings=True))
@dataclass
class _Extra(SessionExtra):
    """``extra`` as written: the session's own comparison and server log sit under it too."""

    strategies: Annotated[StrategyComparisonField | None, EMPTY_AS_NONE] = None
    """Strategies replayed side by side (``run --strategy A,B`` or ``--verify``): ``Session.strategies``."""
    server_log: ServerLogShape | None = None
    """What the server's own boot log said about the load (``run --log``): ``Session.server_log``; its phases
    are ``ckptprof log --json``'s."""


_EXTRA_KNOWN = SessionExtra.known()


def _extra_unknown_keys(value: Any, handler: Any) -> Any:
    extra = handler(value)
    if isinstance(value, dict):
        extra.other = {
            k: v for k, v in value.items() if k not in _EXTRA_KNOWN and k not in ("strategies", "server_log")
        }
    return extra


@dataclass
class _Document:
    """A session document as decoded: the typed parts the ``Session`` is built from."""

    config: Annotated[RunConfigField, NULL_AS_EMPTY_OBJECT] = field(default_factory=RunConfig)
    models: Annotated[list[ModelInfo], NULL_AS_EMPTY] = field(default_factory=list)
    ranks: Annotated[list[RankResult], NULL_AS_EMPTY] = field(default_factory=list)
    ceilings: Annotated[CeilingsField, NULL_AS_EMPTY_OBJECT] = field(default_factory=Ceilings)
    verdict: Annotated[VerdictField | None, EMPTY_AS_NONE] = None
    environment: Annotated[dict[str, Any], NULL_AS_EMPTY_OBJECT] = field(default_factory=dict)
    notes: Annotated[list[Text], NULL_AS_EMPTY] = field(default_factory=list)
    artifacts: Annotated[dict[str, Any], NULL_AS_EMPTY_OBJECT] = field(default_factory=dict)
    extra: Annotated[_Extra, NULL_AS_EMPTY_OBJECT, WrapValidator(_extra_unknown_keys)] = field(
        default_factory=_Extra
    )
    created: Text | None = None


_DOCUMENT_KEYS = tuple(f.name for f in fields(_Document))


def _session_extra(extra: _Extra) -> SessionExtra:
    out = SessionExtra(**{k: getattr(extra, k) for k in _EXTRA_KNOWN})
    out.other = extra.other
    return out


def validate_session_dict(d: dict[str, Any]) -> _Document:
    """The document decoded; InvalidField, naming the first bad field (e.g. ``ranks[0].models[0].wall_s``), for a
    session whose numbers are not finite, whose fields have the wrong types or impossible values."""
    known = {k: d[k] for k in _DOCUMENT_KEYS if k in d}
    for key, value in known.items():
        check_finite(value, key)
    check_unknown_rates(known.get("ceilings"), "ceilings")
    try:
        document: _Document = adapter(_Document).validate_python(known)
    except ValidationError as exc:
        raise refusal(_Document, known, exc) from None
    return document


def validate_ceilings(d: Any, where: str = "ceilings") -> Ceilings:
    """The same checks for ceilings read on their own (`ckptprof probe --json` output)."""
    check_finite(d, where)
    check_unknown_rates(d, where)
    ceilings: Ceilings = decode(CeilingsField, d, where)
    return ceilings


# A compressed session (reports/ keep them as .json.gz) may not inflate past this: a session is megabytes.
MAX_INFLATED_BYTES = 1 << 30


def read_session_json(path: Path) -> dict[str, Any]:
    """A session file's JSON object (``.gz`` inflated), or the one-line ``SessionFileError`` that says why it is
    not one: the reading half of ``Session.load``, for readers that look at the document before decoding it (a watch
    session is told apart by its ``observed`` key)."""
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
    return data


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


def session_json_schema() -> dict[str, Any]:
    """The JSON Schema of what ``Session.load`` accepts (scripts/gen_session_schema.py publishes it in docs/)."""
    schema: dict[str, Any] = adapter(_Document).json_schema(mode="validation")
    return schema

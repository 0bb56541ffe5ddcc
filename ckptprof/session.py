"""The one data model of a profiling run, and its versioned JSON form.

Everything downstream of the replay (analysis, renderers, compare) reads only a ``Session``. The JSON layout
is a contract users script against (see README "JSON contracts"): fields may be added, never renamed or
removed, and ``schema_version`` changes only on a breaking change.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ckptprof.errors import SessionFileError

SCHEMA_VERSION = 1

GB = 1e9


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
    # "role/name" -> blake2b of the parameter's bytes after the load, when the replay was asked to --verify.
    checksums: dict[str, str] | None = None


@dataclass
class Session:
    config: dict[str, Any] = field(default_factory=dict)
    models: list[ModelInfo] = field(default_factory=list)
    ranks: list[RankResult] = field(default_factory=list)
    ceilings: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    # Extra analysis results (e.g. the strategy comparison) keyed by name; free-form but JSON-safe.
    extra: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    schema_version: int = SCHEMA_VERSION

    # -- convenience -----------------------------------------------------------------------------------------
    def model(self, role: str) -> ModelInfo | None:
        return next((m for m in self.models if m.role == role), None)

    @property
    def ok(self) -> bool:
        return bool(self.ranks) and all(r.status == "ok" for r in self.ranks)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # schema_version first: it is the first thing a reader checks.
        return {"schema_version": d.pop("schema_version"), **d}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False)

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
        return cls(
            config=dict(d.get("config") or {}),
            models=[model_from_dict(m) for m in d.get("models") or []],
            ranks=[rank_from_dict(r) for r in d.get("ranks") or []],
            ceilings=dict(d.get("ceilings") or {}),
            verdict=dict(d.get("verdict") or {}),
            environment=dict(d.get("environment") or {}),
            notes=list(d.get("notes") or []),
            artifacts=dict(d.get("artifacts") or {}),
            extra=dict(d.get("extra") or {}),
            created=str(d.get("created") or ""),
        )

    @classmethod
    def load(cls, path: str | Path) -> Session:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SessionFileError(path, "no such file") from None
        except IsADirectoryError:
            raise SessionFileError(path, "is a directory, not a session JSON file") from None
        except UnicodeDecodeError:
            raise SessionFileError(path, "not a session JSON file (binary, not UTF-8 text)") from None
        except OSError as exc:
            raise SessionFileError(path, f"cannot read: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SessionFileError(path, f"not JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, dict):
            raise SessionFileError(path, "not a ckptprof session (top level is not an object)")
        try:
            return cls.from_dict(data)
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
    return RankResult(**kw)

"""The typed results a session carries besides its timings: the measured ceilings, the verdict and its predictions,
the comparison of strategies replayed side by side, and what the server's own log said (``run --log``).

Each is a frozen dataclass whose field names are the JSON keys (the contract users script against:
docs/json-contract.md). ``from_dict`` reads a document written by any earlier version (a missing key takes its default, a key
this version does not know is ignored) and ``to_dict`` writes every field, so the renderers read attributes that
mypy checks instead of string keys that it cannot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, with_config

from ckptprof.session_fields import (
    NULL_AS_EMPTY,
    Count,
    Flag,
    Rate,
    Seconds,
    Signed,
    Text,
    fill,
    null_as,
)

if (
    TYPE_CHECKING
):  # the log reader compiles its tables on import: loaded only when a session holds a server log
    from ckptprof.bootlog.report import PhaseReport

# The JSON Schema (docs/session.schema.json) describes each field by its docstring.
_SCHEMA_CONFIG = ConfigDict(use_attribute_docstrings=True)

# A rate per CUDA device ("cuda:0" -> GB/s); None where that device's figure could not be measured.
PerDevice = dict[str, Rate | None]


def _known(cls: type[Any], d: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``d`` that are fields of ``cls`` (a document from another version may hold others)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it: tuples become lists, records their own ``to_dict()``."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


def _as_json(record: Any) -> dict[str, Any]:
    """Every field of a record under its own name: the JSON keys are the field names."""
    return {f.name: _plain(getattr(record, f.name)) for f in fields(record)}


@with_config(_SCHEMA_CONFIG)
@dataclass(frozen=True)
class Ceilings:
    """What the hardware under the run can do, measured in the same run (``ckptprof probe`` writes the same keys).

    A rate is in GB/s (1e9 bytes per second); None means not measured (no bytes to sample, no CUDA device, the
    probe interrupted or skipped).
    """

    storage_read_GBps: Rate | None = None
    """The best cold storage rate measured (the larger of the 1- and N-stream figures)."""
    storage_read_1_stream_GBps: Rate | None = None
    """Cold reads of the checkpoint's own files by one stream, the page cache dropped first."""
    storage_read_n_streams_GBps: Rate | None = None
    """Cold reads by ``storage_streams`` streams at once: what ranks or loader threads reading together reach."""
    storage_streams: Count | None = None
    """How many streams the N-stream figure used."""
    storage_method: Text | None = None
    """How the storage probe read: O_DIRECT, or buffered reads after dropping the files from the page cache."""
    storage_block_bytes: Count | None = None
    """The size of each read the storage probe issued."""
    storage_sample_bytes: Count | None = None
    """Bytes the storage probe read (a sample spread over the checkpoint's files)."""
    storage_sample_files: Count | None = None
    """How many of the checkpoint's files the storage sample touched."""
    storage_cold_verified: Flag | None = None
    """Whether the sampled bytes were checked to be out of the page cache before the cold reads."""
    storage_drop_note: Text | None = None
    """How the page cache was dropped for the cold reads, or why it could not be."""
    storage_learned_from: Text | None = None
    """Set when a replay fetched from storage faster than the probe and the probe measured again with other
    settings (more streams, larger reads, the other read method): that replay's strategy (probe/learn.py)."""
    fs_type: Text | None = None
    """The file system the storage probe read from (ext4, nfs4, fuse.sshfs, ...)."""
    page_cache_read_GBps: Rate | None = None
    """The best warm read rate: the same bytes served from the page cache."""
    page_cache_read_1_thread_GBps: Rate | None = None
    """Warm reads by one thread."""
    page_cache_read_n_threads_GBps: Rate | None = None
    """Warm reads by several threads at once."""
    page_cache_sample_bytes: Count | None = None
    """Bytes the page-cache probe read."""
    memcpy_GBps: Rate | None = None
    """One thread copying between warm host buffers (the stand-in for H2D with no CUDA device)."""
    memcpy_n_threads_GBps: Rate | None = None
    """``memcpy_threads`` threads copying at once."""
    memcpy_threads: Count | None = None
    """How many threads the N-thread memcpy figure used."""
    memcpy_bytes: Count | None = None
    """Bytes each memcpy measurement copied."""
    fresh_write_GBps: Rate | None = None
    """One thread copying into freshly allocated memory (a page fault per 4 KiB): what whole-file reads pay."""
    fresh_write_n_threads_GBps: Rate | None = None
    """Several threads writing fresh memory at once: what ranks on one node share."""
    h2d_pageable_GBps: PerDevice | None = None
    """Host-to-device copies from pageable memory, per device (SGLang's default path)."""
    h2d_pinned_GBps: PerDevice | None = None
    """Host-to-device copies from pinned memory, per device: the link's ceiling."""
    h2d_pinned_concurrent_GBps: PerDevice | None = None
    """Each device's pinned rate while every device copies at once."""
    d2h_pinned_GBps: PerDevice | None = None
    """Device-to-host copies into pinned memory, per device."""
    h2d_pinned_all_devices_GBps: Rate | None = None
    """Pinned copies to every device at once, summed: the host side's ceiling."""
    h2d_pageable_all_devices_GBps: Rate | None = None
    """Pageable copies to every device at once, summed."""
    h2d_transfer_bytes: Count | None = None
    """Bytes each host-to-device measurement copied."""
    warm_pipeline_GBps: Rate | None = None
    """The page cache read into pinned buffers and copied to the device, both at once (``warm_pipeline_threads``
    threads, a warm sample of ``warm_pipeline_sample_bytes``): what a loader copying through host memory can reach
    warm, below min(page cache, H2D) where the two share the host's memory."""
    warm_pipeline_threads: Count | None = None
    """Threads of the warm-pipeline measurement."""
    warm_pipeline_sample_bytes: Count | None = None
    """Bytes of the checkpoint the warm-pipeline measurement read and copied each time."""
    warm_pipeline_devices: Count | None = None
    """Devices the warm-pipeline measurement copied to, in turn (every CUDA device of the run's ranks)."""
    fastsafetensors_GBps: Rate | None = None
    """fastsafetensors reading a sample of the checkpoint's files, one loader per file as SGLang makes them."""
    fastsafetensors_sample: tuple[tuple[Count, Seconds], ...] | None = None
    """(file bytes, seconds) for each sampled file: each file of a load is priced by its size between them."""
    fastsafetensors_sample_files: Count | None = None
    """How many files the fastsafetensors sample read."""
    fastsafetensors_sample_bytes: Count | None = None
    """Bytes the fastsafetensors sample read."""
    fastsafetensors_setup_s: Seconds | None = None
    """A fixed cost per loader (sessions from before the per-file sample; read, never written now)."""
    probe_s: Seconds | None = None
    """How long the whole probe took."""
    notes: Annotated[tuple[Text, ...], NULL_AS_EMPTY] = ()
    """What the probe could not measure, and why."""
    reused: dict[str, Any] | None = None
    """Set when the figures come from an earlier probe of the same file systems and devices: its age and key."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Ceilings:
        known = _known(cls, d or {})
        if known.get("fastsafetensors_sample") is not None:
            known["fastsafetensors_sample"] = tuple(
                (int(b), float(s)) for b, s in known["fastsafetensors_sample"]
            )
        known["notes"] = tuple(known.get("notes") or ())
        for key in ("h2d_pageable_GBps", "h2d_pinned_GBps", "h2d_pinned_concurrent_GBps", "d2h_pinned_GBps"):
            if known.get(key) is not None:
                known[key] = dict(known[key])
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        """Every field, null where not measured."""
        return _as_json(self)

    @property
    def measured(self) -> bool:
        """Whether any rate was measured (a probe that ran), as opposed to a run with --no-probe."""
        rates: list[float | None] = []
        for f in fields(self):
            if f.name.endswith("GBps"):
                value = getattr(self, f.name)
                rates += list(value.values()) if isinstance(value, dict) else [value]
        return any(isinstance(v, (int, float)) and v > 0 for v in rates)

    def with_figures(self, figures: Mapping[str, Any]) -> Ceilings:
        """These ceilings with some figures measured again (``--check-predictions`` re-measures storage)."""
        return Ceilings.from_dict({**self.to_dict(), **figures})


def positive(value: object) -> float | None:
    """A measured rate, or None for one that is missing or zero (a zero means the probe measured nothing)."""
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def slowest_device(per_device: PerDevice | None, devices: list[str]) -> float | None:
    """The slowest of ``devices``' figures in a per-device ceiling (a load waits for the slowest link)."""
    values = [float(v) for d in devices if isinstance(v := (per_device or {}).get(d), (int, float)) and v > 0]
    return min(values) if values else None


@with_config(_SCHEMA_CONFIG)
@dataclass(frozen=True)
class Prediction:
    """One remedy the verdict recommends, with the time the measured ceilings predict for it."""

    flags: Text
    """The SGLang flags to add, spelled as the replayed release accepts them (or an action such as copying)."""
    predicted_s: Seconds | None
    """Predicted load wall with those flags; None where no ceiling measures what it depends on."""
    why: Text
    """The model behind the prediction, in words, with the figures it used."""
    strategy: Text | None = None
    """The replay strategy that reproduces the flags (``--check-predictions`` runs it); None: none does."""
    slower_than_now: Flag = False
    """Predicted no faster than the load just measured: listed and checked, never sold as a remedy."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Prediction:
        known = _known(cls, d)
        known.setdefault("flags", "")
        known.setdefault("predicted_s", None)
        known.setdefault("why", "")
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)


@with_config(_SCHEMA_CONFIG)
@dataclass(frozen=True)
class Verdict:
    """Which limit binds the load, the figures that back it, and what to try (``analysis.verdict`` builds it)."""

    bottleneck: Text | None = None
    """One of analysis.verdict.BOTTLENECKS, or "unknown" when no rank produced timings."""
    secondary: Text | None = None
    """Under "rank-skew": what binds the ranks themselves."""
    close: tuple[Text, ...] = ()
    """Under "mixed": the phases within a few points of each other, largest first."""
    shares: dict[str, Rate] = field(default_factory=dict)
    """Fractions of rank time per phase (storage, page_cache, deserialize, h2d, other), serialised as replayed."""
    sampled_shares: dict[str, Rate] | None = None
    """With --sample-threads: the same phases as fractions of SGLang's own wall, from the slowest rank's threads
    sampled in the kernel while it loaded unchanged (its running time split as the replay split it); when present,
    the bottleneck and the summary follow these."""
    summary: Text = ""
    """The verdict in one paragraph, with achieved against ceiling figures."""
    recommendations: tuple[Text, ...] = ()
    """The predictions as one line each, fastest first."""
    predictions: tuple[PredictionField, ...] = ()
    """Each remedy with its predicted wall, fastest first."""
    achieved_GBps: Rate | None = None
    """Checkpoint bytes over the slowest rank's load wall; None for an unfinished load."""
    incomplete: tuple[Text, ...] = ()
    """What the run did not finish (failed or missing ranks, failed shards); empty for a complete run."""
    fetched_GBps: Rate | None = None
    """Bytes fetched from storage over the load wall."""
    h2d_GBps: Rate | None = None
    """Bytes copied to the devices over the time the copies took."""
    cold_fraction: Rate | None = None
    """Fraction of the checkpoint not in the page cache when the load began."""
    load_wall_s: Seconds | None = None
    """The slowest rank's wall for the whole load."""
    checkpoint_bytes: Count | None = None
    """Tensor bytes of every model loaded."""
    read_amplification: Rate | None = None
    """Bytes all ranks materialised over checkpoint bytes (8 ranks reading every byte: 8)."""
    storage_amplification: Rate | None = None
    """Bytes all ranks fetched from storage over checkpoint bytes."""
    storage_amplification_source: Text | None = None
    """Where that figure comes from: the kernel's I/O accounting, or an upper bound on network file systems."""
    major_faults_per_GB: Rate | None = None
    """Major page faults per GB materialised: mmap reads that went to storage."""
    rank_skew: Rate | None = None
    """The slowest rank's wall over the median rank's."""
    fs_type: Text | None = None
    """The file systems under the models, comma-separated."""
    network_fs: Flag = False
    """Whether any of them is a network or FUSE file system."""
    h2d_stand_in: Flag = False
    """No CUDA device: the "h2d" phase is a host copy standing in for the link."""
    faithful_delta: Signed | None = None
    """(decomposed wall - SGLang's own sequence's wall) / the latter, with --faithful."""
    path_shares: dict[str, Rate] | None = None
    """Shares of SGLang's own (faithful) wall, with storage from the device's busy time."""
    path_storage_source: Text | None = None
    """Where the storage share of ``path_shares`` comes from."""
    faithful_note: Text | None = None
    """A caveat when the decomposed replay took markedly longer than SGLang's own sequence."""
    storage_note: Text | None = None
    """A caveat when the replay read faster than the storage ceiling measured in the same run."""
    engine_note: Text | None = None
    """What the verdict cannot say for the engine replayed (vLLM: no flags recommended yet)."""
    read_GBps: Rate | None = None
    """Fetched bytes over the slowest-reading rank's read time."""
    floor_s: Seconds | None = None
    """No loader gets below this: max(bytes from storage / storage ceiling, per-rank bytes / pinned H2D, all copied
    bytes / the host's warm pipeline where it was measured)."""

    @property
    def caveats(self) -> tuple[str, ...]:
        """The free-text caveats that are set, in the order a report prints them."""
        return tuple(note for note in (self.faithful_note, self.storage_note, self.engine_note) if note)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Verdict | None:
        """None for an empty document (a session saved before any verdict was computed)."""
        if not d:
            return None
        known = _known(cls, d)
        for key in ("close", "recommendations", "incomplete"):
            known[key] = tuple(known.get(key) or ())
        known["predictions"] = tuple(Prediction.from_dict(p) for p in known.get("predictions") or ())
        for key in ("shares", "path_shares", "sampled_shares"):
            if known.get(key) is not None:
                known[key] = dict(known[key])
        known["shares"] = known.get("shares") or {}
        known["network_fs"] = bool(known.get("network_fs"))
        known["h2d_stand_in"] = bool(known.get("h2d_stand_in"))
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)


@with_config(_SCHEMA_CONFIG)
@dataclass(frozen=True)
class StrategyRow:
    """One loading strategy's replay in a side-by-side comparison (``run --strategy A,B``)."""

    strategy: Text
    """The strategy's name (sglang, sglang-mt, no-mmap, prefetch, pipelined, fastsafetensors, ...)."""
    params: dict[str, Any]
    """Its parameters as given (``pipelined:readers=32`` gives {"readers": 32})."""
    flags: Text
    """The SGLang flags that select it, or why none do."""
    status: Text
    """ok, failed, or unavailable (its package is not installed)."""
    label: Text = ""
    """The strategy with its parameters: unique within a comparison of variants."""
    error: Text | None = None
    """Why it failed or is unavailable."""
    wall_s: Seconds | None = None
    """The slowest rank's load wall."""
    GBps: Rate | None = None
    """Checkpoint bytes over that wall."""
    shares: dict[str, Rate] = field(default_factory=dict)
    """Fractions of rank time per phase, as in the verdict."""
    bottleneck: Text | None = None
    """The verdict's bottleneck for this strategy's replay."""
    storage_bytes: Count = 0
    """Bytes its ranks fetched from storage."""
    floor_s: Seconds | None = None
    """What no loader gets below on these devices (see analysis.strategies.floor_seconds)."""
    x_floor: Rate | None = None
    """wall_s / floor_s."""
    verify: Text = "not verified"
    """equal, differs, not verified, reference, or no reference: its values against SGLang's default path."""
    differing: tuple[Text, ...] = ()
    """The parameters that differ ("rank r: role/name"), at most a few."""
    notes: tuple[Text, ...] = ()
    """What the reader should know about this row (direct I/O that bypassed a warm page cache, ...)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StrategyRow:
        known = _known(cls, d)
        known.setdefault("strategy", "?")
        known.setdefault("params", {})
        known.setdefault("flags", "")
        known.setdefault("status", "failed")
        known["params"] = dict(known.get("params") or {})
        known["shares"] = dict(known.get("shares") or {})
        known["differing"] = tuple(known.get("differing") or ())
        known["notes"] = tuple(known.get("notes") or ())
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)


@with_config(_SCHEMA_CONFIG)
@dataclass(frozen=True)
class StrategyComparison:
    """Strategies replayed side by side on the same checkpoint, cache mode and ranks (``analysis.strategies``)."""

    rows: tuple[StrategyRowField, ...]
    """One per strategy, in the order they ran."""
    fastest: Text | None
    """The label of the fastest strategy that completed."""
    fastest_flags: Text | None
    """The flags that select it."""
    fastest_sglang: Text | None
    """The fastest strategy a server can select with SGLang flags."""
    floor_s: Seconds | None
    """The largest of the rows' floors."""
    summary: Text
    """The comparison in one paragraph."""
    warnings: tuple[Text, ...] = ()
    """Why the comparison may not be like for like, and values that differ from SGLang's."""

    @property
    def verified(self) -> bool | None:
        """True when every verified strategy matched the reference, False if one differs, None if none verified."""
        states = [r.verify for r in self.rows if r.verify in ("equal", "differs")]
        return None if not states else all(s == "equal" for s in states)

    def row(self, strategy: str) -> StrategyRow | None:
        """The row of ``strategy``: a label (``pipelined:readers=32``) or a name (its first run)."""
        return next((r for r in self.rows if r.label == strategy), None) or next(
            (r for r in self.rows if r.strategy == strategy), None
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> StrategyComparison | None:
        if not d:
            return None
        return cls(
            rows=tuple(StrategyRow.from_dict(r) for r in d.get("rows") or ()),
            fastest=d.get("fastest"),
            fastest_flags=d.get("fastest_flags"),
            fastest_sglang=d.get("fastest_sglang"),
            floor_s=d.get("floor_s"),
            summary=str(d.get("summary") or ""),
            warnings=tuple(d.get("warnings") or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        return {**_as_json(self), "verified": self.verified}


@with_config(_SCHEMA_CONFIG)
@dataclass(frozen=True)
class ServerLog:
    """What the server's own boot log said about the load (``run --log``), beside the replay."""

    path: str
    """The log file read."""
    framework: str | None
    """The engine that wrote it (sglang, vllm), or None when the log did not say."""
    state: str | None
    """Where that boot got to (``ckptprof log``'s state)."""
    load_weights: tuple[PhaseReport, ...] = ()
    """The load-weights phases of the boot, one per model, as ``ckptprof log`` reports them."""
    loader: str | None = None
    """The loader the log shows (default, multithread, fastsafetensors, runai_streamer, instanttensor)."""
    loaders: dict[str, str] = field(default_factory=dict)
    """Each model's loader, from its own load-weights bar ("target", "draft")."""
    strategy_from_log: str | None = None
    """The strategy replayed for the target because the log showed its loader (no --strategy given)."""
    draft_strategy_from_log: str | None = None
    """The same for the draft (no --draft-strategy given)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ServerLog | None:
        if not d:
            return None
        from ckptprof.bootlog.report import PhaseReport

        known = _known(cls, d)
        known.setdefault("path", "")
        known.setdefault("framework", None)
        known.setdefault("state", None)
        known["load_weights"] = tuple(PhaseReport.from_dict(p) for p in known.get("load_weights") or ())
        known["loaders"] = {str(k): str(v) for k, v in (known.get("loaders") or {}).items()}
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)


@with_config(_SCHEMA_CONFIG)
@dataclass(frozen=True)
class StuckRank:
    """Where a rank stood when it stopped making progress (``--rank-timeout``) or could not be stopped, read from
    outside it (loader/stuck.py): the shard and byte range of its call, its kernel wait, its Python stack."""

    pid: Count
    """The rank's process."""
    state: Text = "unknown"
    """The stuck thread's state: "D (uninterruptible wait)" is a wait in the kernel that no signal ends."""
    tid: Count | None = None
    """The stuck thread (the rank's thread waiting on a file system, else its main thread)."""
    phase: Text | None = None
    """What that thread was doing: open, read, stat, mmap, page fault in a mapped file, ..."""
    syscall: Text | None = None
    """The system call it was in (None: none, e.g. a page fault)."""
    file: Text | None = None
    """The file it was reading (a shard, as the kernel names it)."""
    file_source: Text | None = None
    """How the file is known: the system call's own argument, its only mapped shard, or the next shard it had not
    reported (a guess from the plan's order)."""
    offset: Count | None = None
    """The first byte of the read, where the call says."""
    length: Count | None = None
    """Bytes the call asked for."""
    wchan: Text | None = None
    """The kernel function it waits in (/proc/PID/wchan)."""
    kernel_stack: tuple[Text, ...] = ()
    """Its kernel stack, innermost first (/proc/PID/stack: root only)."""
    python_stack: tuple[Text, ...] = ()
    """Its Python frames, innermost first (py-spy dump --nonblocking)."""
    python_stack_note: Text | None = None
    """Why there is no Python stack."""
    mount_point: Text | None = None
    """The mount holding the file."""
    fs_type: Text | None = None
    """That mount's file-system type."""
    threads_in_kernel_wait: Count = 0
    """The rank's threads in an uninterruptible wait."""
    abandoned: Flag = False
    """Still alive after SIGKILL (a wait in the kernel): left behind, not joined, when ckptprof exited."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StuckRank:
        known = _known(cls, d)
        known.setdefault("pid", 0)
        for key in ("kernel_stack", "python_stack"):
            known[key] = tuple(known.get(key) or ())
        known["abandoned"] = bool(known.get("abandoned"))
        known["threads_in_kernel_wait"] = int(known.get("threads_in_kernel_wait") or 0)
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)

    @property
    def in_kernel(self) -> bool:
        return self.state.startswith("D") or self.threads_in_kernel_wait > 0

    def where(self) -> str:
        """'open of /mnt/ck/model-00002.safetensors (bytes 0-4095) on fuse.sshfs at /mnt'."""
        what = self.phase or "an unknown call"
        if self.file:
            span = ""
            if self.offset is not None:
                end = f"{self.offset + self.length - 1}" if self.length else "?"
                span = f" (bytes {self.offset}-{end})"
            guess = (
                " (the next shard it had not reported)"
                if self.file_source == "the next shard it had not reported"
                else ""
            )
            what += f" of {self.file}{span}{guess}"
        elif self.file_source:
            what += f" in {self.file_source}"
        if self.fs_type and self.mount_point:
            what += f" on {self.fs_type} at {self.mount_point}"
        return what

    def describe(self) -> str:
        """One clause for the rank's error: the pid, its wait and where."""
        wait = f" in {self.wchan}" if self.wchan else ""
        top = f"; Python: {self.python_stack[0]}" if self.python_stack else ""
        return f"pid {self.pid} {self.state}{wait}, {self.where()}{top}"


# -- how each record is read from a session document (session.py decodes them) -------------------------------
# Older versions left out keys the dataclasses require, or wrote null where a list or text is now always written:
# those read as the defaults below, as they always have. Everything else is checked by its type.

PredictionField = Annotated[Prediction, fill(flags="", predicted_s=None, why="")]
VerdictField = Annotated[
    Verdict,
    null_as(
        close=tuple,
        recommendations=tuple,
        incomplete=tuple,
        predictions=tuple,
        shares=dict,
        network_fs=False,
        h2d_stand_in=False,
        summary="",
    ),
]
StrategyRowField = Annotated[
    StrategyRow,
    null_as(
        params=dict,
        flags="",
        label="",
        shares=dict,
        differing=tuple,
        notes=tuple,
        verify="not verified",
        storage_bytes=0,
    ),
]
StrategyComparisonField = Annotated[
    StrategyComparison,
    fill(fastest=None, fastest_flags=None, fastest_sglang=None, floor_s=None, rows=tuple),
    null_as(summary=""),
]
StuckRankField = StuckRank
CeilingsField = Ceilings


@dataclass(frozen=True)
class PhaseSeconds:
    """What a session's server log is checked for in each load-weights phase (the rest is the log reader's)."""

    seconds: Seconds | None = None


@dataclass(frozen=True)
class ServerLogShape:
    """The checks a session's ``extra.server_log`` passes before ``ServerLog.from_dict`` reads it."""

    load_weights: list[PhaseSeconds] = field(default_factory=list)


def check_unknown_rates(value: Any, where: str) -> None:
    """A ceilings key this version does not know that ends in GBps is a rate all the same: a number >= 0 or null
    (an object of them for a per-device one). ``value`` is not an object: left to the decoding to refuse."""
    from ckptprof.session_fields import InvalidField, describe

    if not isinstance(value, dict):
        return
    known = {f.name for f in fields(Ceilings)}
    for key, v in value.items():
        if key in known or not key.endswith("GBps") or v is None:
            continue
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
        if not ok:
            raise InvalidField(f"{where}.{key}", f"expected a number >= 0, got {describe(v)}")

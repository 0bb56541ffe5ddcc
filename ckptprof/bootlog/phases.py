"""What a boot log says the server did: phases per rank, shard progress, failures, and the state at the end.

``BootLogAnalyzer`` is an incremental state machine fed with blocks of whole lines (parse.py makes them); it
can report at any point, which is what ``--follow`` needs. Both SGLang boot orders come out of the same rules:
a rank's n-th ``Load weight begin`` (and n-th KV pool, n-th plain graph capture) belongs to the target when n
is 1 and to the draft after that, when speculative decoding is on.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import BinaryIO, TypeAlias

from ckptprof.bootlog.parse import (
    Bar,
    LineSplitter,
    LogInputError,
    Record,
    candidate_lines,
    first_timestamp,
    iter_blocks,
    last_timestamp_before,
    looks_binary,
    open_log,
    shift_timestamp,
    split_line,
    timestamp_seconds,
)

STATES = ("starting", "init-distributed", "load-weights", "kv-cache", "cuda-graph", "ready", "failed")
# A bar that has not moved for this long while the log's clock went on is reported as stalled.
STALL_AFTER_S = 120.0
# Bounds that keep memory flat whatever the input (a hostile log could invent endless ranks or bars).
MAX_RANKS = 4096
MAX_BARS_KEPT = 64
MAX_FAILURES_KEPT = 256
MAX_WARNINGS = 40
# Timestamps have whole-second resolution unless SGLANG_LOG_MS is set: a logged ``elapsed=`` that agrees with
# the timestamps within that resolution is the more precise figure.
TIMESTAMP_RESOLUTION_S = 1.5

PhaseKey: TypeAlias = tuple[str, "str | None", "str | None"]  # (name, model, variant)

# ASCII-only digits with bounded repeats: int() and float() must stay cheap and finite on hostile input.
_ELAPSED_RE = re.compile(
    r"(?:elapsed=|Time elapsed: |took |finished in |and )(\d{1,9}(?:\.\d{1,6})?) ?(?:s\b|secs?\b|seconds)",
    re.ASCII,
)
_EXCEPTION_LINE_RE = re.compile(
    r"(?:\[rank\d{1,6}\]: ?)?(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)(?::\s.*|:?\s*$)",
    re.ASCII,
)
_DEATH_RE = re.compile(
    r"\bis dead\b|\bsigquit\b|unexpectedly failed|initialization failed|failed to start|(?:^|\s)Killed(?:\s|$)"
)
_INT_ARG_RE = {
    name: re.compile(rf"\b{name}=(\d{{1,6}})\b", re.ASCII)
    for name in ("tp_size", "pp_size", "dp_size", "nnodes", "tensor_parallel_size", "pipeline_parallel_size")
}
_SPECULATIVE_RE = re.compile(
    r"\b(?:speculative_algorithm|speculative_config)=(None\b|'[^']*'|\"[^\"]*\"|\{|\w+)"
)
_DP_ATTENTION_RE = re.compile(r"\benable_dp_attention=True\b")
_FILESYSTEM_RE = re.compile(r"Filesystem type for checkpoints: ([\w.-]+)")
_RANK_NUMBER_RE = re.compile(r"\d+", re.ASCII)
_PLAIN_LABEL_RE = re.compile(r"([A-Za-z]+)(\d+)", re.ASCII)
_DESC_DETAIL_RE = re.compile(r"\s*\(.*\)\s*$")


@dataclass
class RankSpan:
    start: str | None
    end: str | None = None
    elapsed_s: float | None = None


@dataclass
class PhaseTrack:
    key: PhaseKey
    order: int
    slot: str  # which begin/end pair opened it: says which end line is awaited
    spans: dict[str, RankSpan] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.key[0]


@dataclass
class RankState:
    begun: dict[str, int] = field(default_factory=dict)  # how many begins per counter, for the n-th rule
    open: dict[str, PhaseKey] = field(default_factory=dict)  # slot -> phase currently open on this rank
    last_end: str | None = None
    last_event_seq: int = -1


@dataclass
class BarTrack:
    desc: str
    phase: PhaseKey | None
    done: int
    total: int
    rate: float | None
    elapsed_s: int | None
    eta_s: int | None
    moved_at: str | None

    @property
    def model(self) -> str | None:
        return self.phase[1] if self.phase else None


@dataclass
class Failure:
    rank: str
    timestamp: str | None
    error: str
    kind: str  # "traceback", "exception" or "death"
    seq: int
    phase: PhaseKey | None
    after_ready: bool


@dataclass(frozen=True)
class PhaseReport:
    name: str
    model: str | None
    variant: str | None
    start: str | None
    end: str | None
    seconds: float | None
    ranks: int
    slowest_rank: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "model": self.model,
            "start": self.start,
            "end": self.end,
            "seconds": self.seconds,
            "ranks": self.ranks,
            "slowest_rank": self.slowest_rank,
            "variant": self.variant,
        }


@dataclass(frozen=True)
class ProgressReport:
    desc: str
    model: str | None
    done: int
    total: int
    rate: float | None
    elapsed_s: int | None
    eta_s: int | None

    def to_json(self) -> dict[str, object]:
        return {
            "desc": self.desc,
            "model": self.model,
            "done": self.done,
            "total": self.total,
            "rate": round(self.rate, 3) if self.rate is not None else None,
            "elapsed_s": self.elapsed_s,
            "eta_s": self.eta_s,
        }


@dataclass(frozen=True)
class BootReport:
    framework: str  # "sglang", "vllm" or "unknown"
    state: str  # one of STATES
    phases: tuple[PhaseReport, ...]
    progress: tuple[ProgressReport, ...]
    warnings: tuple[str, ...]
    summary: str
    first_timestamp: str | None
    last_timestamp: str | None
    error: str | None
    filesystem: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def to_json(self) -> dict[str, object]:
        return {
            "framework": self.framework,
            "state": self.state,
            "ready": self.ready,
            "phases": [phase.to_json() for phase in self.phases],
            "progress": [bar.to_json() for bar in self.progress],
            "warnings": list(self.warnings),
            "summary": self.summary,
            "first_timestamp": self.first_timestamp,
            "last_timestamp": self.last_timestamp,
            "error": self.error,
            "filesystem": self.filesystem,
        }


Handler: TypeAlias = Callable[[Record], None]


class BootLogAnalyzer:
    """Feed blocks of whole lines (``feed_block``) or decoded physical lines (``feed_line``); ``report()``
    at any time."""

    def __init__(self, stall_after_s: float = STALL_AFTER_S) -> None:
        self.stall_after_s = stall_after_s
        self._evidence = {"sglang": 0, "vllm": 0}
        self._now: str | None = None  # the latest timestamp read so far: the log's clock
        self._now_s = float("-inf")
        self._boots = 1
        self._seq = 0
        self._start_boot(first_ts=None)
        self._handlers: tuple[tuple[str, Handler], ...] = (
            ("ServerArgs(", self._on_server_args),
            ("Init torch distributed begin", self._on_init_begin),
            ("Init torch distributed ends", self._on_init_end),
            ("Load weight begin", self._on_load_begin),
            ("Load weight end", self._on_load_end),
            ("KV Cache is allocated", self._on_kv_allocated),
            ("Memory pool end", self._on_memory_pool_end),
            ("Capture draft extend cuda graph begin", self._on_draft_extend_graph_begin),
            ("Capture draft extend cuda graph end", self._on_draft_extend_graph_end),
            ("Capture draft cuda graph begin", self._on_draft_graph_begin),
            ("Capture draft cuda graph end", self._on_draft_graph_end),
            ("Capture cuda graph begin", self._on_graph_begin),
            ("Capture cuda graph end", self._on_graph_end),
            ("The server is fired up and ready to roll", self._on_sglang_ready),
            ("LLM engine", self._on_vllm_config),
            ("Starting to load model", self._on_vllm_load_begin),
            ("Loading weights took", self._on_vllm_weights_loaded),
            ("Model loading took", self._on_vllm_model_loaded),
            ("KV cache size", self._on_vllm_kv),
            ("GPU blocks", self._on_vllm_kv),
            ("Graph capturing finished", self._on_vllm_graphs),
            ("Application startup complete", self._on_vllm_ready),
            ("Filesystem type for checkpoints", self._on_vllm_filesystem),
        )

    def _start_boot(self, first_ts: str | None) -> None:
        """Forget everything about the previous boot: a log that a restarted server appends to holds several."""
        self._phases: dict[PhaseKey, PhaseTrack] = {}
        self._ranks: dict[str, RankState] = {}
        self._bars: list[BarTrack] = []
        self._current_bars: dict[tuple[str, PhaseKey | None], BarTrack] = {}
        self._bar_cache: dict[tuple[str, str], tuple[str, PhaseKey | None]] = {}
        self._bar_cache_seq = -1
        self._failures: list[Failure] = []
        self._recent_failures: deque[Failure] = deque(maxlen=MAX_FAILURES_KEPT // 2)
        self._awaiting_error: Failure | None = None
        self._speculative: bool | None = None  # None: the log did not say
        self._sizes: dict[str, int] = {}
        self._dp_attention = False
        self._filesystem: str | None = None
        self._first_ts = first_ts
        self._last_phase_end: str | None = None
        self._ready_seq: int | None = None
        self._lead_rank: str | None = None

    def _maybe_restart(self, record: Record, only_after_ready: bool = False) -> None:
        """A configuration line after boot progress means the server was started again."""
        if self._phases and (self.ready or not only_after_ready):
            self._boots += 1
            self._start_boot(first_ts=record.timestamp)

    # ----------------------------------------------------------------------------------------------- input

    def feed_block(self, block: bytes) -> None:
        """A block of whole lines (``\\n`` or ``\\r`` terminated), as parse.LineSplitter produces them."""
        if looks_binary(block):
            return
        if self._first_ts is None:
            self._advance_clock(first_timestamp(block))
        for offset, raw in candidate_lines(block):
            line = raw.decode("utf-8", "replace")
            if "%" in line:
                # A bar frame carries no time of its own: it happened after the record above it.
                self._advance_clock(last_timestamp_before(block, offset))
            self.feed_line(line)
        # Lines the pre-filter skipped still move the log's clock, which stall detection needs.
        self._advance_clock(last_timestamp_before(block, len(block)))

    def feed_line(self, line: str) -> None:
        for item in split_line(line):
            if isinstance(item, Bar):
                self._on_bar(item)
            else:
                self._on_record(item)

    @property
    def ready(self) -> bool:
        return self._ready_seq is not None

    def _advance_clock(self, timestamp: str | None) -> None:
        """Move the log's clock forward only: a look-back may find an older line than a record already read."""
        if timestamp is None or timestamp == self._now:
            return
        seconds = timestamp_seconds(timestamp)
        if seconds is None:
            return
        if seconds > self._now_s:
            self._now, self._now_s = timestamp, seconds
        if self._first_ts is None:
            self._first_ts = timestamp

    def _on_record(self, record: Record) -> None:
        self._advance_clock(record.timestamp)
        if record.rank not in self._ranks and len(self._ranks) >= MAX_RANKS:
            record = Record(record.timestamp, "?", record.message, record.style)
        if record.timestamp is None and self._now is not None:
            # Untimed lines (uvicorn's, traceback bodies) happened after the last timed one.
            record = Record(self._now, record.rank, record.message, record.style)
        if record.style == "vllm" and record.timestamp is not None:
            self._evidence["vllm"] += 1
        message = record.message
        for needle, handler in self._handlers:
            if needle in message:
                handler(record)
                break
        self._check_failure(record)

    # ------------------------------------------------------------------------------------ phase bookkeeping

    def _rank(self, label: str) -> RankState:
        state = self._ranks.get(label)
        if state is None:
            state = self._ranks[label] = RankState()
            # Global rank 0 draws the bars: TP0 (or DP0 TP0 ...); untagged only when nothing is tagged.
            if _is_lead_label(label) and (self._lead_rank is None or (label and not self._lead_rank)):
                self._lead_rank = label
        return state

    def _track(self, key: PhaseKey, slot: str) -> PhaseTrack:
        track = self._phases.get(key)
        if track is None:
            track = self._phases[key] = PhaseTrack(key, order=len(self._phases), slot=slot)
        return track

    def _nth_model(self, rank: RankState, counter: str) -> str:
        """Target for a rank's first model of this kind, draft for the next (when speculation is on)."""
        count = rank.begun.get(counter, 0) + 1
        rank.begun[counter] = count
        if count == 1 or self._speculative is False:
            return "target"
        return "draft"

    def _touch(self, label: str) -> None:
        self._seq += 1
        self._rank(label).last_event_seq = self._seq

    def _begin(self, record: Record, slot: str, key: PhaseKey, start: str | None = None) -> None:
        rank = self._rank(record.rank)
        self._track(key, slot).spans[record.rank] = RankSpan(start=start or record.timestamp)
        rank.open[slot] = key
        self._touch(record.rank)

    def _end(
        self,
        record: Record,
        slot: str,
        implicit_key: Callable[[RankState], PhaseKey],
        elapsed_s: float | None = None,
    ) -> None:
        """Close ``slot`` on the record's rank; when its begin was never logged, open it implicitly."""
        rank = self._rank(record.rank)
        key = rank.open.pop(slot, None)
        span = self._phases[key].spans.get(record.rank) if key is not None else None
        if span is None:
            span = RankSpan(start=self._implicit_start(record, rank, elapsed_s))
            self._track(implicit_key(rank), slot).spans[record.rank] = span
        span.end = record.timestamp
        span.elapsed_s = elapsed_s
        if record.timestamp is not None:
            rank.last_end = record.timestamp
            self._last_phase_end = record.timestamp
        self._touch(record.rank)

    def _implicit_start(self, record: Record, rank: RankState, elapsed_s: float | None) -> str | None:
        if record.timestamp is not None and elapsed_s is not None:
            return shift_timestamp(record.timestamp, -elapsed_s)
        return rank.last_end or self._last_phase_end or record.timestamp

    # ------------------------------------------------------------------------------------- SGLang records

    def _on_server_args(self, record: Record) -> None:
        self._evidence["sglang"] += 5
        self._maybe_restart(record)
        self._read_sizes(record.message)
        self._dp_attention = bool(_DP_ATTENTION_RE.search(record.message))

    def _read_sizes(self, text: str) -> None:
        for name, pattern in _INT_ARG_RE.items():
            match = pattern.search(text)
            if match is not None:
                self._sizes[name] = int(match.group(1))
        speculative = _SPECULATIVE_RE.search(text)
        if speculative is not None:
            self._speculative = speculative.group(1) != "None"

    def _sglang(self) -> None:
        self._evidence["sglang"] += 1

    def _on_init_begin(self, record: Record) -> None:
        self._sglang()
        self._begin(record, "init", ("init-distributed", None, None))

    def _on_init_end(self, record: Record) -> None:
        self._sglang()
        self._end(record, "init", lambda rank: ("init-distributed", None, None), _elapsed(record.message))

    def _on_load_begin(self, record: Record) -> None:
        self._sglang()
        rank = self._rank(record.rank)
        self._begin(record, "load", ("load-weights", self._nth_model(rank, "load"), None))

    def _on_load_end(self, record: Record) -> None:
        self._sglang()
        self._end(record, "load", self._implicit_load_key, _elapsed(record.message))

    def _implicit_load_key(self, rank: RankState) -> PhaseKey:
        return ("load-weights", self._nth_model(rank, "load"), None)

    def _on_kv_allocated(self, record: Record) -> None:
        self._sglang()
        rank = self._rank(record.rank)
        if "kv" not in rank.open:
            key = ("kv-cache", self._nth_model(rank, "kv"), None)
            self._begin(record, "kv", key, start=rank.last_end or record.timestamp)

    def _on_memory_pool_end(self, record: Record) -> None:
        self._sglang()
        self._end(record, "kv", lambda rank: ("kv-cache", self._nth_model(rank, "kv"), None))

    def _on_graph_begin(self, record: Record) -> None:
        self._sglang()
        rank = self._rank(record.rank)
        self._begin(record, "graph", ("cuda-graph", self._nth_model(rank, "graph"), None))

    def _on_graph_end(self, record: Record) -> None:
        self._sglang()
        implicit = lambda rank: ("cuda-graph", self._nth_model(rank, "graph"), None)  # noqa: E731
        self._end(record, "graph", implicit, _elapsed(record.message))

    def _on_draft_graph_begin(self, record: Record) -> None:
        self._sglang()
        self._begin(record, "graph-draft", ("cuda-graph", "draft", None))

    def _on_draft_graph_end(self, record: Record) -> None:
        self._sglang()
        self._end(record, "graph-draft", lambda rank: ("cuda-graph", "draft", None), _elapsed(record.message))

    def _on_draft_extend_graph_begin(self, record: Record) -> None:
        self._sglang()
        self._begin(record, "graph-draft-extend", ("cuda-graph", "draft", "extend"))

    def _on_draft_extend_graph_end(self, record: Record) -> None:
        self._sglang()
        key: PhaseKey = ("cuda-graph", "draft", "extend")
        self._end(record, "graph-draft-extend", lambda rank: key, _elapsed(record.message))

    def _on_sglang_ready(self, record: Record) -> None:
        self._sglang()
        self._mark_ready(record)

    def _mark_ready(self, record: Record) -> None:
        if self._ready_seq is not None:
            return
        start = self._last_phase_end or record.timestamp
        self._track(("ready", None, None), "ready").spans[record.rank] = RankSpan(
            start=start, end=record.timestamp
        )
        self._rank(record.rank)
        self._touch(record.rank)
        self._ready_seq = self._seq

    # --------------------------------------------------------------------------------------- vLLM records

    def _vllm(self) -> None:
        self._evidence["vllm"] += 2

    def _on_vllm_config(self, record: Record) -> None:
        self._vllm()
        # Several engine cores (data parallel) each print their config while others already load.
        self._maybe_restart(record, only_after_ready=True)
        self._read_sizes(record.message)

    def _on_vllm_load_begin(self, record: Record) -> None:
        self._vllm()
        rank = self._rank(record.rank)
        self._begin(record, "load", ("load-weights", self._nth_model(rank, "load"), None))

    def _on_vllm_weights_loaded(self, record: Record) -> None:
        self._vllm()
        self._end(record, "load", self._implicit_load_key, _elapsed(record.message))

    def _on_vllm_model_loaded(self, record: Record) -> None:
        self._vllm()
        rank = self._rank(record.rank)
        # `Loading weights took` usually closed the phase already; this line only closes what is still open.
        if "load" in rank.open or rank.begun.get("load", 0) == 0:
            self._end(record, "load", self._implicit_load_key, _elapsed(record.message))

    def _on_vllm_kv(self, record: Record) -> None:
        self._vllm()
        rank = self._rank(record.rank)
        if rank.begun.get("kv", 0) == 0:
            self._end(record, "kv", lambda state: ("kv-cache", self._nth_model(state, "kv"), None))

    def _on_vllm_graphs(self, record: Record) -> None:
        self._vllm()
        implicit = lambda rank: ("cuda-graph", self._nth_model(rank, "graph"), None)  # noqa: E731
        self._end(record, "graph", implicit, _elapsed(record.message))

    def _on_vllm_ready(self, record: Record) -> None:
        # Uvicorn prints this line under SGLang too, before its warm-up: only vLLM means "ready" by it.
        if self._evidence["vllm"] > self._evidence["sglang"]:
            self._mark_ready(record)

    def _on_vllm_filesystem(self, record: Record) -> None:
        self._vllm()
        match = _FILESYSTEM_RE.search(record.message)
        if match is not None:
            self._filesystem = match.group(1).rstrip(".")

    # ---------------------------------------------------------------------------------- bars and failures

    def _on_bar(self, bar: Bar) -> None:
        desc, phase = self._bar_identity(bar)
        identity = (desc, phase)
        track = self._current_bars.get(identity)
        if track is None or bar.total != track.total or bar.done < track.done:
            track = BarTrack(desc, phase, bar.done, bar.total, bar.rate, bar.elapsed_s, bar.eta_s, self._now)
            self._bars.append(track)
            del self._bars[:-MAX_BARS_KEPT]
            if len(self._current_bars) > 4 * MAX_BARS_KEPT:
                self._current_bars.clear()
            self._current_bars[identity] = track
            return
        if bar.done > track.done:
            track.moved_at = self._now
        track.done, track.rate, track.elapsed_s, track.eta_s = bar.done, bar.rate, bar.elapsed_s, bar.eta_s

    def _bar_identity(self, bar: Bar) -> tuple[str, PhaseKey | None]:
        """(normalised description, owning phase), cached until the next phase event: a log can hold
        millions of frames and the answer only changes when a phase begins or ends."""
        if self._bar_cache_seq != self._seq or len(self._bar_cache) > 1024:
            self._bar_cache.clear()
            self._bar_cache_seq = self._seq
        cache_key = (bar.desc, bar.rank)
        identity = self._bar_cache.get(cache_key)
        if identity is None:
            desc = _DESC_DETAIL_RE.sub("", bar.desc) or bar.desc
            identity = self._bar_cache[cache_key] = (desc, self._phase_for_bar(bar))
        return identity

    def _phase_for_bar(self, bar: Bar) -> PhaseKey | None:
        """The phase a bar belongs to: the one open on the rank drawing it (global rank 0 under SGLang)."""
        desc = bar.desc.lower()
        if "shard" in desc or "loading" in desc or "weight" in desc:
            name = "load-weights"
        elif "graph" in desc or "capturing" in desc:
            name = "cuda-graph"
        else:
            return self._current_key()
        rank = self._ranks.get(bar.rank or self._lead_rank or "")
        candidates = [key for key in rank.open.values() if key[0] == name] if rank else []
        if not candidates:
            candidates = [key for key in self._phases if key[0] == name]
        return max(candidates, key=lambda key: self._phases[key].order) if candidates else None

    def _current_key(self) -> PhaseKey | None:
        tracks = [track for track in self._phases.values() if track.name != "ready"]
        return max(tracks, key=lambda track: track.order).key if tracks else None

    def _check_failure(self, record: Record) -> None:
        message = record.message
        if "Traceback (most recent call last)" in message:
            self._awaiting_error = self._add_failure(record, "traceback", message.strip())
        elif _EXCEPTION_LINE_RE.match(message):
            if self._awaiting_error is not None:
                self._awaiting_error.error = message.strip()
                self._awaiting_error = None
            else:
                self._add_failure(record, "exception", message.strip())
        elif _DEATH_RE.search(message):
            self._add_failure(record, "death", message.strip())

    def _add_failure(self, record: Record, kind: str, error: str) -> Failure:
        rank = self._ranks.get(record.rank)
        open_keys = list(rank.open.values()) if rank else []
        phase = max(open_keys, key=lambda key: self._phases[key].order) if open_keys else self._current_key()
        failure = Failure(
            record.rank, record.timestamp or self._now, error[:500], kind, self._seq, phase, self.ready
        )
        # The first errors are usually the cause and the last ones the verdict: keep both ends, bounded.
        if len(self._failures) < MAX_FAILURES_KEPT // 2:
            self._failures.append(failure)
        else:
            self._recent_failures.append(failure)
        return failure

    def _all_failures(self) -> list[Failure]:
        return [*self._failures, *self._recent_failures]

    def _is_fatal(self, failure: Failure) -> bool:
        if self._ready_seq is not None and failure.seq < self._ready_seq:
            return False  # the server came up after it
        if failure.after_ready and failure.kind != "death":
            return False  # a request failed; the server lives on
        if failure.kind == "death":
            return True
        # A traceback the rank survived (it went on to log boot progress) was only a warning.
        if failure.rank in self._ranks and failure.rank:
            later = self._ranks[failure.rank].last_event_seq
        else:
            later = self._seq
        return later <= failure.seq

    # -------------------------------------------------------------------------------------------- report

    def framework(self) -> str:
        sglang, vllm = self._evidence["sglang"], self._evidence["vllm"]
        if sglang == 0 and vllm == 0:
            return "unknown"
        return "sglang" if sglang >= vllm else "vllm"

    def report(self) -> BootReport:
        framework = self.framework()
        now_s = timestamp_seconds(self._now) if self._now else None
        tracks = sorted(self._phases.values(), key=lambda track: track.order)
        expected = self._expected_ranks()
        fatal = next((failure for failure in self._all_failures() if self._is_fatal(failure)), None)
        current = self._current_key()
        if fatal is not None:
            state = "failed"
        elif self.ready:
            state = "ready"
        elif current is not None:
            state = current[0]
        else:
            state = "starting"
        context = _SummaryContext(
            framework=framework,
            current=self._phases[current] if current else None,
            tracks=tracks,
            expected=expected,
            now_s=now_s,
            first_ts=self._first_ts,
            speculative=self._speculative,
            stalls=self._stalled_bars(now_s),
            latest_bars={bar.phase: bar for bar in self._bars},
        )
        return BootReport(
            framework=framework,
            state=state,
            phases=tuple(_phase_report(track, now_s) for track in tracks),
            progress=tuple(_progress_report(bar) for bar in self._bars),
            warnings=self._warnings(expected, context),
            summary=_summary(state, context, fatal),
            first_timestamp=self._first_ts,
            last_timestamp=self._now,
            error=fatal.error if fatal else None,
            filesystem=self._filesystem,
        )

    def _expected_ranks(self) -> list[str]:
        """The ranks that should log each phase: those seen, plus those server_args says exist."""
        seen = {rank for track in self._phases.values() if track.name != "ready" for rank in track.spans}
        tagged = {rank for rank in seen if rank and rank != "?"}
        expected = set(tagged) if tagged else seen
        world = self._declared_world()
        plain = [_PLAIN_LABEL_RE.fullmatch(rank) for rank in tagged]
        prefixes = {match.group(1) for match in plain if match is not None}
        # Name the missing ranks only when the labels are simple (TPn / rankn) and the log covers one node.
        single_node = self._sizes.get("nnodes", 1) == 1
        if world and world <= MAX_RANKS and len(prefixes) == 1 and all(plain) and single_node:
            prefix = prefixes.pop()
            expected |= {f"{prefix}{index}" for index in range(world)}
        return sorted(expected, key=rank_sort_key)

    def _declared_world(self) -> int | None:
        tp = self._sizes.get("tp_size") or self._sizes.get("tensor_parallel_size")
        if tp is None:
            return None
        pp = self._sizes.get("pp_size") or self._sizes.get("pipeline_parallel_size") or 1
        dp = self._sizes.get("dp_size", 1)
        return tp * pp * (1 if self._dp_attention else dp)

    def _stalled_bars(self, now_s: float | None) -> list[tuple[BarTrack, float]]:
        if now_s is None:
            return []
        latest: dict[tuple[str, PhaseKey | None], BarTrack] = {}
        for bar in self._bars:
            latest[(bar.desc, bar.phase)] = bar
        stalls = []
        for bar in latest.values():
            moved_s = timestamp_seconds(bar.moved_at) if bar.moved_at else None
            if bar.done >= bar.total or moved_s is None or not self._phase_still_open(bar.phase):
                continue
            if now_s - moved_s >= self.stall_after_s:
                stalls.append((bar, now_s - moved_s))
        return stalls

    def _phase_still_open(self, key: PhaseKey | None) -> bool:
        if key is None:
            return True
        return any(span.end is None for span in self._phases[key].spans.values())

    def _warnings(self, expected: list[str], context: _SummaryContext) -> tuple[str, ...]:
        warnings = [*self._failure_warnings(), *_stall_warnings(context.stalls, self._now)]
        if self._boots > 1:
            warnings.insert(0, f"the log holds {self._boots} boots; this report covers the last one")
        warnings += self._missing_rank_warnings(expected)
        if len(warnings) > MAX_WARNINGS:
            extra = len(warnings) - MAX_WARNINGS
            warnings = [*warnings[:MAX_WARNINGS], f"... and {extra} more warnings"]
        return tuple(warnings)

    def _failure_warnings(self) -> list[str]:
        """One warning per distinct error, naming every rank that logged it."""
        grouped: dict[str, list[Failure]] = {}
        for failure in self._all_failures():
            grouped.setdefault(failure.error, []).append(failure)
        warnings = []
        for error, failures in grouped.items():
            first = failures[0]
            ranks = format_ranks(sorted({failure.rank for failure in failures}, key=rank_sort_key))
            where = f" during {phase_label(first.phase)}" if first.phase else ""
            when = f" at {first.timestamp}" if first.timestamp else ""
            if any(self._is_fatal(failure) for failure in failures):
                warnings.append(f"failed: {ranks}{when}{where}: {error}")
            else:
                verdict = "after the server was ready" if first.after_ready else "the boot went on"
                warnings.append(f"error logged by {ranks}{when}{where} ({verdict}): {error}")
        return warnings

    def _missing_rank_warnings(self, expected: list[str]) -> list[str]:
        tracks = sorted(self._phases.values(), key=lambda track: track.order)
        boot_tracks = [track for track in tracks if track.name != "ready"]
        seen = {rank for track in boot_tracks for rank in track.spans}
        silent = [rank for rank in expected if rank not in seen]
        warnings = []
        if silent:
            warnings.append(
                f"{format_ranks(silent)} logged no boot record at all "
                f"({len(expected) - len(silent)} of {len(expected)} ranks did)"
            )
        latest_order = max((track.order for track in boot_tracks), default=-1)
        for track in boot_tracks:
            if track.order == latest_order or _is_single_process(track, expected):
                continue  # the current phase is described by the summary, not warned about
            absent = [rank for rank in expected if rank not in track.spans and rank not in silent]
            unfinished = [rank for rank, span in track.spans.items() if span.end is None]
            label = phase_label(track.key)
            if absent:
                warnings.append(
                    f"{label}: not logged by {format_ranks(absent)} ({len(track.spans)} of {len(expected)} ranks)"
                )
            if unfinished:
                marker = end_marker(track, self.framework())
                warnings.append(
                    f"{label}: {marker} never logged by {format_ranks(sorted(unfinished, key=rank_sort_key))} "
                    "although the boot moved on"
                )
        return warnings


# ------------------------------------------------------------------------------------------- reporting


@dataclass(frozen=True)
class _SummaryContext:
    framework: str
    current: PhaseTrack | None
    tracks: list[PhaseTrack]
    expected: list[str]
    now_s: float | None
    first_ts: str | None
    speculative: bool | None
    stalls: list[tuple[BarTrack, float]]
    latest_bars: dict[PhaseKey | None, BarTrack]


def _elapsed(message: str) -> float | None:
    match = _ELAPSED_RE.search(message)
    return float(match.group(1)) if match else None


def _is_lead_label(label: str) -> bool:
    numbers = _RANK_NUMBER_RE.findall(label)
    return all(int(number) == 0 for number in numbers)


def _is_single_process(track: PhaseTrack, expected: list[str]) -> bool:
    """A record logged once by an untagged process (vLLM's engine core) in a log whose ranks are tagged."""
    return all(rank == "" for rank in track.spans) and any(expected)


def rank_sort_key(label: str) -> tuple[tuple[int, ...], str]:
    return tuple(int(number) for number in _RANK_NUMBER_RE.findall(label)), label


def format_ranks(labels: list[str], limit: int = 8) -> str:
    shown = [label or "the main process" for label in labels[:limit]]
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(shown) + more


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def phase_label(key: PhaseKey | None) -> str:
    if key is None:
        return "boot"
    name, model, variant = key
    detail = " ".join(part for part in (model, variant) if part)
    return f"{name} ({detail})" if detail else name


def _model_words(key: PhaseKey) -> str:
    return " ".join(part for part in (key[1], key[2]) if part)


def doing_words(key: PhaseKey) -> str:
    name, model = key[0], _model_words(key)
    words = {
        "init-distributed": "initialising torch.distributed",
        "load-weights": f"loading {model} weights",
        "kv-cache": f"allocating the {model} KV cache",
        "cuda-graph": f"capturing {model} CUDA graphs",
        "ready": "serving",
    }
    return " ".join(words.get(name, name).split())


def done_words(key: PhaseKey) -> str:
    name, model = key[0], _model_words(key)
    words = {
        "init-distributed": "torch.distributed initialised",
        "load-weights": f"{model} weights loaded",
        "kv-cache": f"{model} KV cache allocated",
        "cuda-graph": f"{model} CUDA graphs captured",
    }
    return " ".join(words.get(name, f"{name} done").split())


_SGLANG_END_MARKERS = {
    "init": "`Init torch distributed ends`",
    "load": "`Load weight end`",
    "kv": "`Memory pool end`",
    "graph": "`Capture cuda graph end`",
    "graph-draft": "`Capture draft cuda graph end`",
    "graph-draft-extend": "`Capture draft extend cuda graph end`",
}
_VLLM_END_MARKERS = {
    "load": "`Loading weights took`",
    "kv": "`GPU KV cache size`",
    "graph": "`Graph capturing finished`",
}


def end_marker(track: PhaseTrack, framework: str) -> str:
    """The log line that would close ``track``, as the user would grep for it."""
    markers = _VLLM_END_MARKERS if framework == "vllm" else _SGLANG_END_MARKERS
    return markers.get(track.slot, "its end")


def _seconds_between(start: str | None, end: str | None) -> float | None:
    start_s = timestamp_seconds(start) if start else None
    end_s = timestamp_seconds(end) if end else None
    return end_s - start_s if start_s is not None and end_s is not None else None


def _earliest(timestamps: Iterable[str | None]) -> str | None:
    valid = [ts for ts in timestamps if ts and timestamp_seconds(ts) is not None]
    return min(valid, key=lambda ts: timestamp_seconds(ts) or 0.0) if valid else None


def _latest(timestamps: Iterable[str | None]) -> str | None:
    valid = [ts for ts in timestamps if ts and timestamp_seconds(ts) is not None]
    return max(valid, key=lambda ts: timestamp_seconds(ts) or 0.0) if valid else None


def _rank_seconds(span: RankSpan, now_s: float | None) -> float | None:
    if span.elapsed_s is not None:
        return span.elapsed_s
    if span.end is not None:
        return _seconds_between(span.start, span.end)
    start_s = timestamp_seconds(span.start) if span.start else None
    return now_s - start_s if now_s is not None and start_s is not None else None


def _phase_report(track: PhaseTrack, now_s: float | None) -> PhaseReport:
    spans = list(track.spans.values())
    start = _earliest(span.start for span in spans)
    finished = all(span.end is not None for span in spans)
    end = _latest(span.end for span in spans) if finished else None
    seconds = _phase_seconds(spans, start, end, now_s, finished)
    slowest = None
    if len(track.spans) > 1:
        durations = {rank: _rank_seconds(span, now_s) for rank, span in track.spans.items()}
        timed = {rank: value for rank, value in durations.items() if value is not None}
        # Ranks that all took the same time have no slowest one worth naming.
        if timed and max(timed.values()) > min(timed.values()):
            slowest = max(timed, key=lambda rank: timed[rank])
    name, model, variant = track.key
    return PhaseReport(name, model, variant, start, end, seconds, len(spans), slowest)


def _phase_seconds(
    spans: list[RankSpan], start: str | None, end: str | None, now_s: float | None, finished: bool
) -> float | None:
    if not finished:
        start_s = timestamp_seconds(start) if start else None
        return round(now_s - start_s, 2) if now_s is not None and start_s is not None else None
    wall = _seconds_between(start, end)
    elapsed = [span.elapsed_s for span in spans if span.elapsed_s is not None]
    logged = max(elapsed) if elapsed and len(elapsed) == len(spans) else None
    if logged is not None and (wall is None or abs(wall - logged) <= TIMESTAMP_RESOLUTION_S):
        return round(logged, 2)
    return round(wall, 2) if wall is not None else None


def _progress_report(bar: BarTrack) -> ProgressReport:
    return ProgressReport(bar.desc, bar.model, bar.done, bar.total, bar.rate, bar.elapsed_s, bar.eta_s)


def _stall_warnings(stalls: list[tuple[BarTrack, float]], now: str | None) -> list[str]:
    return [
        f"stalled: '{bar.desc}' ({bar.model or 'unknown model'}) has been at {bar.done}/{bar.total} since "
        f"{bar.moved_at} while the log went on to {now} ({format_duration(stuck_s)} without progress)"
        for bar, stuck_s in stalls
    ]


def _summary(state: str, context: _SummaryContext, fatal: Failure | None) -> str:
    if fatal is not None:
        where = f"while {doing_words(fatal.phase)}" if fatal.phase else "before the first boot phase"
        who = fatal.rank or "the main process"
        return f"failed {where}: {who} logged {fatal.error}"
    if state == "ready":
        return _ready_summary(context)
    if context.current is None:
        if context.framework == "unknown":
            return "no SGLang or vLLM boot records found"
        return "starting: no rank has begun a boot phase yet"
    return _phase_summary(context.current, context)


def _ready_summary(context: _SummaryContext) -> str:
    ready = next((track for track in context.tracks if track.name == "ready"), None)
    ready_at = _latest(span.end for span in ready.spans.values()) if ready else None
    total = _seconds_between(context.first_ts, ready_at)
    text = "ready: the server reported ready"
    if total is not None:
        text += f" {format_duration(total)} after the first log record"
    boot = [_phase_report(track, context.now_s) for track in context.tracks if track.name != "ready"]
    timed = [phase for phase in boot if phase.seconds is not None]
    if timed:
        longest = max(timed, key=lambda phase: phase.seconds or 0.0)
        key = (longest.name, longest.model, longest.variant)
        text += f"; longest phase: {phase_label(key)} {format_duration(longest.seconds or 0.0)}"
    return text


def _phase_summary(track: PhaseTrack, context: _SummaryContext) -> str:
    expected = context.expected if not _is_single_process(track, context.expected) else list(track.spans)
    expected = expected or list(track.spans)
    ended = [rank for rank in expected if rank in track.spans and track.spans[rank].end is not None]
    note = _next_step_note(track, context)
    if len(ended) == len(expected):
        report = _phase_report(track, context.now_s)
        took = f" in {format_duration(report.seconds)}" if report.seconds is not None else ""
        text = f"{done_words(track.key)} on {len(ended)} of {len(expected)} ranks{took}; nothing newer logged yet"
        return f"{text} - {note}" if note else text
    details = []
    bar = context.latest_bars.get(track.key)
    if bar is not None:
        unit = "shards read" if track.name == "load-weights" else "done"
        details.append(f"{bar.done}/{bar.total} {unit}")
    marker = end_marker(track, context.framework)
    pending = len(expected) - len(ended)
    details.append(
        f"{marker} not yet logged on {pending} of {len(expected)} ranks"
        if len(expected) > 1
        else f"{marker} not yet logged"
    )
    text = f"{doing_words(track.key)}: {', '.join(details)}"
    stuck = next((stuck_s for stalled, stuck_s in context.stalls if stalled.phase == track.key), None)
    if stuck is not None:
        text += f"; the bar has not moved for {format_duration(stuck)}"
    return f"{text} - {note}" if note else text


def _next_step_note(track: PhaseTrack, context: _SummaryContext) -> str:
    """What has not happened yet, so nobody mistakes the current step for a later one."""
    if track.name in ("cuda-graph", "ready"):
        return ""
    if track.name == "init-distributed":
        return "no weights loaded yet"
    graphs = [other for other in context.tracks if other.name == "cuda-graph"]
    if not graphs:
        return "CUDA graph capture has not started"
    if context.speculative and track.key[1] == "draft" and all(other.key[1] != "draft" for other in graphs):
        return "target CUDA graphs are captured; draft CUDA graph capture has not started"
    return ""


def analyze_stream(stream: BinaryIO, stall_after_s: float = STALL_AFTER_S, name: str = "-") -> BootReport:
    """Read a whole stream in bounded chunks and report on it."""
    analyzer = BootLogAnalyzer(stall_after_s)
    try:
        for block in iter_blocks(stream):
            analyzer.feed_block(block)
    except OSError as exc:  # EIO, a directory that slipped through open(), ...
        raise LogInputError(name, exc.strerror or str(exc)) from None
    return analyzer.report()


def analyze_path(path: str, stall_after_s: float = STALL_AFTER_S) -> BootReport:
    """Report on the log at ``path`` ("-" is standard input). Raises LogInputError when it cannot be read."""
    stream = open_log(path)
    try:
        return analyze_stream(stream, stall_after_s, name=path)
    finally:
        if path != "-":
            stream.close()


def analyze_bytes(data: bytes, stall_after_s: float = STALL_AFTER_S) -> BootReport:
    """Report on a log held in memory (tests, small inputs)."""
    analyzer = BootLogAnalyzer(stall_after_s)
    splitter = LineSplitter()
    for block in (splitter.feed(data), splitter.flush()):
        if block:
            analyzer.feed_block(block)
    return analyzer.report()

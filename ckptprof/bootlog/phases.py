"""What a boot log says the server did: phases per rank, shard progress, failures, and the state at the end.

``BootLogAnalyzer`` is an incremental state machine fed with blocks of whole lines (parse.py makes them); it
can report at any point, which is what ``--follow`` needs. This module only keeps the state: which phase is
open on which rank, since when, which bar belongs to it, which boot this is. The rest lives beside it:

- sglang.py, vllm.py: what each engine's records mean, one table row per line a release writes (rules.py
  says what a row can do);
- bars.py: which phase and loader a progress bar belongs to;
- failures.py: tracebacks, error lines and dying processes;
- wrappers.py: prefixes that log collectors add;
- summary.py and words.py: the report's sentences.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import BinaryIO, NamedTuple, cast

from ckptprof.bootlog import sglang
from ckptprof.bootlog.bars import bar_kind
from ckptprof.bootlog.failures import (
    FAILURE_GATE_RE,
    FAILURE_NEEDLES,
    FRAME_NEEDLE,
    Failure,
    FailureTracker,
    Where,
)
from ckptprof.bootlog.parse import (
    MAX_LINE_BYTES,
    Bar,
    LineSplitter,
    LogInputError,
    Record,
    bar_runs,
    first_timestamp,
    iter_blocks,
    last_timestamp_before,
    looks_binary,
    needle_pattern,
    open_log,
    parse_record,
    shift_timestamp,
    split_line,
    timestamp_seconds,
)
from ckptprof.bootlog.report import BootReport, FailureReport
from ckptprof.bootlog.rules import (
    Action,
    Begin,
    Capture,
    Configure,
    End,
    Engine,
    Evidence,
    Fail,
    Model,
    Ready,
    Rule,
)
from ckptprof.bootlog.state import BarTrack, PhaseTrack, RankSpan, RankState
from ckptprof.bootlog.summary import (
    ENGINES,
    SummaryContext,
    build_summary,
    failure_warnings,
    missing_rank_warnings,
    phase_report,
    progress_report,
    stall_warnings,
)
from ckptprof.bootlog.words import (
    PhaseKey,
    boots_warning,
    done_words,
    rank_sort_key,
)
from ckptprof.bootlog.wrappers import unwrap

STATES = ("starting", "init-distributed", "load-weights", "kv-cache", "cuda-graph", "ready", "failed")
# A bar that has not moved for this long while the log's clock went on is reported as stalled.
STALL_AFTER_S = 120.0
# Bounds that keep memory flat whatever the input (a hostile log could invent endless ranks, bars or boots).
MAX_RANKS = 4096
MAX_BARS_KEPT = 64
MAX_WARNINGS = 40
# Readings of recent messages kept: ranks print the same message one after another (about 40% of a real log's
# records repeat one of the last few dozen).
READINGS_KEPT = 64
BOOTS_KEPT = 16  # the reports of the first and of the last boots; a retry loop can restart thousands of times
# Above this share of its boot records not understood, a report says so (a few such records are pasting noise).
UNPARSED_WARN_SHARE = 0.05
UNPARSED_EXAMPLES = 3
# The phase each bar opens when a log has bars but no boot records (a CI log, a worker's own output).
_BAR_SLOTS = {"load-weights": "load", "cuda-graph": "graph"}


# ASCII-only digits with bounded repeats: int() and float() must stay cheap and finite on hostile input.
_ELAPSED_RE = re.compile(
    r"(?:elapsed=|Time elapsed: |took |finished in |and )(\d{1,9}(?:\.\d{1,6})?) ?(?:s\b|secs?\b|seconds)",
    re.ASCII,
)
_UNITS_PER_GIB = {"GiB": 1.0, "GB": 1e9 / 2**30, "MiB": 1 / 1024, "MB": 1e6 / 2**30}
_SPECULATIVE_RE = re.compile(r"speculative_(?:algorithm|config)=(None\b|'[^']*'|\"[^\"]*\"|\{|\w+)")
_PLAIN_LABEL_RE = re.compile(r"([A-Za-z]+)(\d+)", re.ASCII)
_DESC_DETAIL_RE = re.compile(r"\s*\(.*\)\s*$")


def _needles() -> tuple[str, ...]:
    records = [rule.needle for engine in ENGINES for rule in engine.records]
    return (*dict.fromkeys(records), *FAILURE_NEEDLES, FRAME_NEEDLE, "%")


# Needles that start with a capital, a digit or punctuation go into one regex; those that start with a small
# letter are looked for one by one with bytes.find. Small letters are most of a log's text, so the regex would
# otherwise try a branch at almost every byte: split this way the pre-filter runs twice as fast.
_CANDIDATE_RE = needle_pattern(needle for needle in _needles() if not needle[0].islower())
_RARE_NEEDLES = tuple(needle.encode() for needle in _needles() if needle[0].islower())
_FRAME_BYTES = FRAME_NEEDLE.encode()
_FRAME_RULES_RE = needle_pattern(
    frame.needle
    for engine in ENGINES
    for frame in engine.frames
    if frame.phase is not None or frame.model is not None or frame.step is not None
)
# An engine frame that says nothing about the phase is read only while it can still tell which engine ran or that
# a traceback began above the excerpt: once both are known, most of a long traceback's lines are passed over.
_ENGINE_FRAME_RE = needle_pattern(path for engine in ENGINES for path in engine.module_paths)


class BootLogAnalyzer:
    """Feed blocks of whole lines (``feed_block``) or decoded physical lines (``feed_line``); ``report()``
    at any time."""

    def __init__(self, stall_after_s: float = STALL_AFTER_S) -> None:
        self.stall_after_s = stall_after_s
        self._now: str | None = None  # the latest timestamp read so far: the log's clock
        self._now_s = float("-inf")
        self._year: str | None = None  # of the last dated timestamp, lent to vLLM's year-less ones
        self._day: str | None = None  # likewise the last date, lent to time-only stamps
        self._boots = 1
        self._seq = 0
        self._early_boots: list[dict[str, object]] = []
        self._late_boots: deque[dict[str, object]] = deque(maxlen=BOOTS_KEPT)
        self._clock_floor = 0
        self._readings: dict[tuple[str, str], Reading] = {}
        self._block = b""  # the block being read, and where the current line starts in it
        self._line_start = 0
        self._start_boot(first_ts=None)

    def _start_boot(self, first_ts: str | None) -> None:
        """Forget everything about the previous boot: a log that a restarted server appends to holds several."""
        self._evidence = {engine.name: 0 for engine in ENGINES}
        self._styles = {engine.name: 0 for engine in ENGINES}
        self._module_frames = {engine.name: 0 for engine in ENGINES}
        self._process_tags = {engine.name: 0 for engine in ENGINES}
        self._boot_records = 0  # records a table knows
        self._unparsed = 0  # of them, those behind a line prefix the reader could not read
        self._unparsed_examples: list[str] = []
        self._last_boot_record: dict[str, tuple[str | None, str]] = {}  # rank -> its last boot record
        self._phases: dict[PhaseKey, PhaseTrack] = {}
        self._ranks: dict[str, RankState] = {}
        self._bars: list[BarTrack] = []
        self._current_bars: dict[tuple[str, PhaseKey | None], BarTrack] = {}
        self._bar_cache: dict[tuple[str, str], tuple[str, PhaseKey | None]] = {}
        self._bar_cache_seq = -1
        self._failures = FailureTracker()
        self._speculative: bool | None = None  # None: the log did not say
        self._sizes: dict[str, int] = {}
        self._dp_attention = False
        self._filesystem: str | None = None
        self._loader: str | None = None
        self._model_loaders: dict[str, str] = {}  # the loader each model's load-weights bar shows
        self._throughput: float | None = None
        self._prefetch: str | None = None
        self._first_ts = first_ts
        self._last_phase_end: str | None = None
        self._ready_seq: int | None = None
        # (rank, start, time) of an HTTP server that came up before the engine said ready, and the event count then
        self._http_up: tuple[str, str | None, str | None] | None = None
        self._http_up_seq = -1
        self._lead_rank: str | None = None
        self._untagged_bar_phases: list[PhaseKey] = []  # opened by untagged bars before the lead was tagged
        self._record_phases = 0  # phases opened by a boot record (not by a bar alone)
        self._order = 0

    def _restart(self, record: Record) -> None:
        # The finished boot's state is kept by reference and reported only if asked for: a retry loop can
        # restart thousands of times, and building each report would cost more than reading the log.
        finished = {name: getattr(self, name) for name in _BOOT_STATE}
        if len(self._early_boots) < BOOTS_KEPT:
            self._early_boots.append(finished)
        else:
            self._late_boots.append(finished)
        self._boots += 1
        self._start_boot(first_ts=record.timestamp)

    # ----------------------------------------------------------------------------------------------- input

    def feed_block(self, block: bytes) -> None:
        """A block of whole lines (``\\n`` or ``\\r`` terminated), as parse.LineSplitter produces them."""
        if looks_binary(block):
            return
        block = unwrap(block)
        if self._process_tags_needed():
            # Nothing has said which engine wrote the log yet: the names it gives its processes may (a paste of
            # bars whose worker tags stand alone on their lines holds nothing else). Searched only until then.
            for engine in ENGINES:
                if engine.process_tag is not None:
                    self._process_tags[engine.name] += len(engine.process_tag.findall(block))
        if self._first_ts is None:
            self._advance_clock(first_timestamp(block))
        self._clock_floor = 0
        self._block = block
        search = _CANDIDATE_RE.search
        rare = _rare_line_starts(block)
        pos = 0
        size = len(block)
        while True:
            match = search(block, pos)
            if match is not None:
                hit_start, hit_end = match.span()
                # Never before ``pos``: a run of bar frames may have ended inside this physical line.
                start = block.rfind(b"\n", 0, hit_start) + 1
                if start < pos:
                    start = pos
            else:
                start = hit_end = size
            while rare and rare[-1] < pos:
                rare.pop()
            if rare and rare[-1] < start:
                start = hit_end = rare.pop()
            elif match is None:
                break
            self._line_start = start
            if block.find(b"%", start, hit_end) >= 0:  # a bar frame carries no time of its own
                self._advance_clock(self._timestamp_before(block, start))
                run_end = self._feed_bar_run(block, start)
                if run_end is not None:
                    pos = run_end
                    continue
            end = block.find(b"\n", hit_end)
            if end < 0:
                end = size
            if (
                match is not None
                and hit_end - hit_start == len(_FRAME_BYTES)  # cheaper than the group, on every line
                and start <= hit_start < end
                and match.group() == _FRAME_BYTES
                and _FRAME_RULES_RE.search(block, start, end) is None
                and (
                    (self._failures.any() and not self._process_tags_needed())
                    or _ENGINE_FRAME_RE.search(block, start, end) is None
                )
            ):
                # A traceback frame no engine's table knows says nothing (most of a traceback's lines).
                pos = end + 1
                continue
            text = block[start : end if end - start <= MAX_LINE_BYTES else start + MAX_LINE_BYTES].decode(
                "utf-8", "replace"
            )
            if "%" in text or "\r" in text or "\x1b" in text:
                self.feed_line(text)
            elif text and not text.isspace():
                # feed_line's common case, inlined: one plain record on the line.
                self._on_record(parse_record(text))
            pos = end + 1
        # Lines the pre-filter skipped still move the log's clock, which stall detection needs.
        self._advance_clock(last_timestamp_before(block, size))

    def _line_before(self) -> str:
        """The physical line before the one being read (a traceback's code line above a bare error)."""
        block, start = self._block, self._line_start
        if start <= 0:
            return ""
        return block[block.rfind(b"\n", 0, start - 1) + 1 : start].decode("utf-8", "replace").strip()

    def _timestamp_before(self, block: bytes, offset: int) -> str | None:
        """The newest timestamp between the last look-up and ``offset``: every line is looked at once."""
        floor, self._clock_floor = self._clock_floor, offset
        return last_timestamp_before(block, offset, floor=floor)

    def _feed_bar_run(self, block: bytes, start: int) -> int | None:
        """Consecutive frames of one bar from ``start``: only those that change what is reported are parsed.

        A bar redrawn ten thousand times between two records moves no clock (frames carry no time), so within
        such a run only each frame that starts a new bar and the last frame before the next one matter.
        Returns where the run ends, or None when there is no run of at least two frames there.
        """
        runs = bar_runs(block, start)
        if runs is None:
            return None
        pieces, run_end = runs
        for first, last in pieces:
            self.feed_line(block[first[0] : first[1]].decode("utf-8", "replace"))
            if last != first:
                self.feed_line(block[last[0] : last[1]].decode("utf-8", "replace"))
        self._clock_floor = run_end
        return run_end

    def feed_line(self, line: str) -> None:
        if "%" not in line and "\r" not in line and "\x1b" not in line:
            # Most lines are one plain record: no bar frame to separate, no colours to strip.
            if not line.isspace() and line:
                self._on_record(parse_record(line.rstrip("\n")))
            return
        # tqdm redraws a bar dozens of times on one physical line, and frames carry no time: between two
        # records, a frame that continues the bar before it (same bar, same total, count not going down)
        # changes nothing the last one does not, so only a bar's first frame and its newest are applied.
        drawn: Bar | None = None  # the bar frame seen last since the last record
        skipped: Bar | None = None  # its newest frame, when it has not been applied
        for item in split_line(line):
            if isinstance(item, Bar):
                if drawn is not None and _continues(drawn, item):
                    skipped = item
                else:
                    if skipped is not None:
                        self._on_bar(skipped)
                        skipped = None
                    self._on_bar(item)
                drawn = item
                continue
            if skipped is not None:
                self._on_bar(skipped)
                skipped = None
            drawn = None
            self._on_record(item)
        if skipped is not None:
            self._on_bar(skipped)

    @property
    def ready(self) -> bool:
        return self._ready_seq is not None

    def _advance_clock(self, timestamp: str | None) -> None:
        """Move the log's clock forward only: a look-back may find an older line than a record already read."""
        if timestamp is None or timestamp == self._now:
            return
        self._advance_to(self._with_year(timestamp))

    def _advance_to(self, timestamp: str) -> None:
        """``_advance_clock`` for a timestamp that already has its year."""
        seconds = timestamp_seconds(timestamp)
        if seconds is None:
            return
        if seconds > self._now_s:
            self._now, self._now_s = timestamp, seconds
        first = self._first_ts
        if first is None or (timestamp[4:5] == "-" and first[4:5] != "-"):  # dated after year-less ones
            # A year-less stamp before the first dated one comes from a foreign logger (vLLM's, imported by an
            # older SGLang) whose clock the server's own records do not share: the span starts at a dated one.
            self._first_ts = timestamp

    def _with_year(self, timestamp: str) -> str:
        """vLLM prints no year: next to SGLang's or Ray's dated records it borrows theirs, so the clock compares."""
        if timestamp[4:5] == "-":  # a dated stamp
            self._year, self._day = timestamp[:4], timestamp[:10]
            return timestamp
        if timestamp[2:3] == "-":
            if self._year is None:
                self._day = timestamp[:5]
                return timestamp
            self._day = f"{self._year}-{timestamp[:5]}"
            return f"{self._year}-{timestamp}"
        if timestamp[2:3] == ":" and self._day is not None:
            # A time without a date (SGLang before 0.4) happened on the day of the records around it.
            return f"{self._day} {timestamp}"
        return timestamp

    def _on_record(self, record: Record) -> None:
        timestamp = record.timestamp
        if timestamp is not None:
            timestamp = self._with_year(timestamp)
            if timestamp != self._now:
                self._advance_to(timestamp)
        else:
            # Untimed lines (uvicorn's, traceback bodies) happened after the last timed one.
            timestamp = self._now
        rank = record.rank
        if rank not in self._ranks and len(self._ranks) >= MAX_RANKS:
            rank = "?"
        if timestamp != record.timestamp or rank != record.rank:
            record = Record(timestamp, rank, record.message, record.style, record.level)
        message = record.message
        style = record.style
        # A record in one engine's prefix style is read by that engine's table only; an unprefixed line by the
        # table of whichever engine the log has shown so far, then the other's.
        tables = style if style in _ENGINES_BY_STYLE else f"plain {self.framework()}"
        readings = self._readings
        reading = readings.get((tables, message))
        if reading is None:
            if len(readings) >= READINGS_KEPT:
                readings.clear()
            reading = readings[(tables, message)] = _read(message, _ENGINES_READING[tables])
        if reading.frame:
            self._on_frame(record)
            return
        if reading.rule is not None and self._relayed_again(record):
            return
        if reading.rule is not None:
            self._boot_records += 1
            if style == "plain":
                self._note_unparsed(message, reading.rule.needle)
            self._apply(reading, record)
        # Counted after the record's own rule ran: a record that restarts the boot belongs to the new one.
        if record.timestamp is not None and style in self._styles:
            self._styles[style] += 1
        if reading.may_fail or record.level in ("ERROR", "CRITICAL"):  # most records: skip the callbacks
            self._failures.on_record(record, lambda: self._where(record), self._line_before)

    def _relayed_again(self, record: Record) -> bool:
        """The rank's previous boot record again, same time and words: a relay (Ray prints a worker's line once
        with the outer process tags and once without), not a second event."""
        seen = (record.timestamp, record.message)
        if record.timestamp is not None and self._last_boot_record.get(record.rank) == seen:
            return True
        self._last_boot_record[record.rank] = seen
        return False

    def _note_unparsed(self, message: str, needle: str) -> None:
        """A boot record on a line whose prefix was read as nothing: a time or a number before the record's words
        says a prefix was there (uvicorn's bare `INFO:     Application startup complete.` has none)."""
        at = message.find(needle)
        if at > 0 and any(char.isdigit() for char in message[:at]):
            self._unparsed += 1
            if len(self._unparsed_examples) < UNPARSED_EXAMPLES:
                self._unparsed_examples.append(message.strip()[:160])

    # ------------------------------------------------------------------------------------ phase bookkeeping

    def _rank(self, label: str) -> RankState:
        state = self._ranks.get(label)
        if state is None:
            state = self._ranks[label] = RankState()
            # Global rank 0 draws the bars: TP0 (or DP0 TP0 ...); untagged only when nothing is tagged.
            if _is_lead_label(label) and (self._lead_rank is None or (label and not self._lead_rank)):
                self._lead_rank = label
                if label and self._untagged_bar_phases:
                    self._hand_bars_to_lead(label)
        return state

    def _hand_bars_to_lead(self, label: str) -> None:
        """Phases that untagged bars opened before any rank was tagged were global rank 0's (it draws the bars):
        they move to the tagged lead rank as soon as it shows up, instead of counting as one more rank."""
        untagged = self._ranks.get("")
        for key in self._untagged_bar_phases:
            track = self._phases.get(key)
            span = track.spans.pop("", None) if track is not None else None
            if track is None or span is None:
                continue
            # Only the span moves: the lead's own records then say whose phase it was (a draft's end line
            # replaces a bar's guess of the target, as it does on a tagged rank).
            track.spans.setdefault(label, span)
            if untagged is not None:
                for slot in [slot for slot, open_key in untagged.open.items() if open_key == key]:
                    del untagged.open[slot]
        self._untagged_bar_phases.clear()

    def _track(self, key: PhaseKey, slot: str, provisional: bool = False) -> PhaseTrack:
        track = self._phases.get(key)
        if track is None:
            if not provisional:
                self._drop_provisional(key)
            self._order += 1
            track = self._phases[key] = PhaseTrack(key, order=self._order, slot=slot, provisional=provisional)
        elif not provisional:
            track.provisional = False
        return track

    def _drop_provisional(self, key: PhaseKey) -> None:
        """A phase a bar opened on a guess (target, on whichever rank drew it) gives way to the phase of that name
        a record names: its bars move over to it."""
        for other in [track for track in self._phases.values() if track.provisional and track.name == key[0]]:
            del self._phases[other.key]
            for rank in self._ranks.values():
                for slot in [slot for slot, open_key in rank.open.items() if open_key == other.key]:
                    del rank.open[slot]
            for bar in self._bars:
                if bar.phase == other.key:
                    bar.phase = key
            self._current_bars = {
                (desc, key if phase == other.key else phase): bar
                for (desc, phase), bar in self._current_bars.items()
            }
            self._bar_cache.clear()

    def _model(self, rank: RankState, slot: str, phase: str, model: str | None) -> str | None:
        """Count the rank's begins of ``slot`` and say whose phase this is; "nth" follows ``_nth_model``."""
        count = rank.begun.get(slot, 0) + 1
        rank.begun[slot] = count
        if model == "nth":
            model = self._nth_model(rank, phase, count)
        rank.phases_seen.add(phase)
        if phase == "load-weights" and model is not None:
            rank.models_loaded.add(model)
        return model

    def _nth_model(self, rank: RankState, phase: str, count: int) -> str:
        """The target's the first time, the draft's after that when the server runs speculative decoding.

        Both boot orders follow from it: a load that begins after the rank captured graphs is the draft's (the
        2025 order), and a pool or graph capture on a rank that has loaded only the draft (a log that starts after
        the target's load) is the draft's too.
        """
        if self._speculative is False:
            return "target"
        if phase == "load-weights":
            return "target" if count == 1 and "cuda-graph" not in rank.phases_seen else "draft"
        if count == 1:
            loaded: set[str | None] = set(rank.models_loaded) or {
                key[1]
                for key, track in self._phases.items()
                if key[0] == "load-weights" and not track.provisional
            }
            return "draft" if loaded == {"draft"} else "target"
        return "draft"

    def _touch(self, label: str, rank: RankState | None = None) -> None:
        """Count an event on the rank (``rank``: its state, when the caller holds it already)."""
        self._seq += 1
        (rank or self._rank(label)).last_event_seq = self._seq

    def _begin(
        self,
        label: str,
        slot: str,
        key: PhaseKey,
        start: str | None,
        provisional: bool = False,
        rank: RankState | None = None,
        begun_at: str | None = None,
    ) -> None:
        """Open ``key`` in ``slot`` on rank ``label`` (``rank``: its state, when the caller holds it already).

        A rank does one boot phase at a time: a phase still open on it ends where this one is known to have
        begun (``begun_at``, else ``start``), so a release that logs no end line for it (no `Init torch
        distributed ends`) does not leave it running to the end of the log."""
        if rank is None:
            rank = self._rank(label)
        if rank.open:
            self._end_previous(label, rank, key[0], begun_at or start)
        self._track(key, slot, provisional).spans[label] = RankSpan(start=start)
        rank.open[slot] = key
        self._touch(label, rank)

    def _end_previous(self, label: str, rank: RankState, phase: str, at: str | None) -> None:
        """End the rank's open phases of other names at ``at`` (variants of one phase, SGLang's decode and
        prefill graphs, may run at once); the end is inferred, and said so."""
        for other_slot, other_key in list(rank.open.items()):
            if other_key[0] == phase:
                continue
            del rank.open[other_slot]
            track = self._phases.get(other_key)
            span = track.spans.get(label) if track is not None else None
            if span is not None and span.end is None and at is not None:
                span.end = at
                span.end_inferred = True

    def _end(
        self, record: Record, rank: RankState, action: End, model: Model, elapsed_s: float | None
    ) -> None:
        """Close the action's slot on the record's rank (``rank``: its state); when its begin was never logged,
        open it implicitly, for ``model``."""
        slot = action.slot
        key = rank.open.pop(slot, None)
        span = None
        if key is not None:
            track = self._phases[key]
            track.provisional = False  # a record closed it: no longer a guess
            span = track.spans.get(record.rank)
        if span is None:
            span = RankSpan(start=self._implicit_start(record, rank, elapsed_s))
            implicit = (action.phase, self._model(rank, slot, action.phase, model), action.variant)
            self._track(implicit, slot).spans[record.rank] = span
        span.end = record.timestamp
        span.elapsed_s = elapsed_s
        if record.timestamp is not None:
            rank.last_end = record.timestamp
            self._last_phase_end = record.timestamp
        self._touch(record.rank, rank)

    def _implicit_start(self, record: Record, rank: RankState, elapsed_s: float | None) -> str | None:
        if record.timestamp is not None and elapsed_s is not None:
            return shift_timestamp(record.timestamp, -elapsed_s)
        return rank.last_end or self._last_phase_end or record.timestamp

    # ----------------------------------------------------------------------------------------- the tables

    def _apply(self, reading: Reading, record: Record) -> None:
        engine, rule = reading.engine, reading.rule
        action: Action | None = reading.action
        assert engine is not None and rule is not None
        if isinstance(action, Begin):
            self._apply_begin(action, record)
        elif isinstance(action, End):
            self._apply_end(action, reading, record)
        elif isinstance(action, Configure):
            self._apply_configure(action, record)
        elif isinstance(action, Ready):
            if action.until_more:
                if self.framework() == engine.name and self._ready_seq is None and self._http_up is None:
                    self._http_up = (record.rank, self._last_phase_end or record.timestamp, record.timestamp)
                    self._http_up_seq = self._seq
            elif not action.when_leading or self.framework() == engine.name:
                self._mark_ready(record)
        elif isinstance(action, Capture):
            self._apply_capture(action, record)
        elif isinstance(action, Fail):
            failure = self._failures.add(record, "death", record.message.strip(), self._where(record))
            failure.phase, failure.step = None, action.step
        elif not isinstance(action, Evidence):  # pragma: no cover - the tables hold only the types above
            raise TypeError(f"unknown action {action!r}")
        # Counted after the action: a configuration line that restarts the boot is evidence for the new one.
        self._evidence[engine.name] += rule.weight

    def _apply_begin(self, action: Begin, record: Record) -> None:
        rank = self._rank(record.rank)
        slot = action.slot
        if action.unless_open and slot in rank.open:
            return
        key = (action.phase, self._model(rank, slot, action.phase, action.model), action.variant)
        start = (rank.last_end or record.timestamp) if action.from_last_end else record.timestamp
        self._record_phases += 1
        self._begin(record.rank, slot, key, start, rank=rank, begun_at=record.timestamp)

    def _apply_end(self, action: End, reading: Reading, record: Record) -> None:
        rank = self._rank(record.rank)
        begun = rank.begun.get(action.slot, 0)
        if begun > 0 and (action.only_first or (action.only_if_open_or_new and action.slot not in rank.open)):
            return
        self._record_phases += 1
        self._end(record, rank, action, reading.model, reading.elapsed_s)

    def _apply_configure(self, action: Configure, record: Record) -> None:
        if self._phases and (
            action.restart == "after-progress" or (action.restart == "after-ready" and self.ready)
        ):
            self._restart(record)
        message = record.message
        for key in _SIZE_KEYS:
            if key not in self._sizes and (size := _int_arg(message, key)) is not None:
                self._sizes[key] = size
        at = message.find("speculative_")  # a server_args line is kilobytes long: find before matching
        speculative = _SPECULATIVE_RE.search(message, at) if at >= 0 else None
        if speculative is not None:
            self._speculative = speculative.group(1) != "None"
        if sglang.DP_ATTENTION in message:
            self._dp_attention = True

    def _apply_capture(self, action: Capture, record: Record) -> None:
        value = action.value
        match = action.pattern.search(record.message) if action.pattern is not None else None
        if match is not None:
            value = match.group(1)
        if value is None:
            return
        if action.field == "filesystem":
            self._filesystem = value.rstrip(".")
        elif action.field == "prefetch":
            self._prefetch = value
        elif action.field == "throughput_GiBps":
            unit = match.group(2) if match is not None and match.lastindex == 2 else "GiB"
            self._throughput = round(float(value) * _UNITS_PER_GIB.get(unit or "GiB", 1.0), 4)
        else:
            self._loader = value

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

    # ---------------------------------------------------------------------------------- bars and failures

    def _on_bar(self, bar: Bar) -> None:
        desc, phase = self._bar_identity(bar)
        identity = (desc, phase)
        track = self._current_bars.get(identity)
        if track is None or bar.total != track.total or bar.done < track.done:
            track = BarTrack(desc, phase, bar, self._now)
            self._bars.append(track)
            del self._bars[:-MAX_BARS_KEPT]
            if len(self._current_bars) > 4 * MAX_BARS_KEPT:
                self._current_bars.clear()
            self._current_bars[identity] = track
            return
        if bar.done > track.done:
            track.moved_at = self._now
        track.last = bar

    def _bar_identity(self, bar: Bar) -> tuple[str, PhaseKey | None]:
        """(normalised description, owning phase), cached until the next phase event: a log can hold
        millions of frames and the answer only changes when a phase begins or ends."""
        if self._bar_cache_seq != self._seq or len(self._bar_cache) > 1024:
            self._bar_cache.clear()
            self._bar_cache_seq = self._seq
        cache_key = (bar.desc, bar.rank)
        identity = self._bar_cache.get(cache_key)
        if identity is None:
            desc = _bar_desc(bar.desc)
            identity = (desc, self._phase_for_bar(bar))
            self._note_model_loader(bar, identity[1])
            # Opening a phase moved the sequence: cache under the new one.
            if self._bar_cache_seq != self._seq:
                self._bar_cache.clear()
                self._bar_cache_seq = self._seq
            self._bar_cache[cache_key] = identity
        return identity

    def _note_model_loader(self, bar: Bar, key: PhaseKey | None) -> None:
        """A load-weights bar names its model's loader: the target and a draft may load through different ones
        (SGLang's --speculative-draft-load-format)."""
        kind = bar_kind(bar.desc)
        if kind is not None and kind.loader is not None and key is not None and key[0] == "load-weights":
            model = key[1]
            if model:
                self._model_loaders[model] = kind.loader

    def _phase_for_bar(self, bar: Bar) -> PhaseKey | None:
        """The phase a bar belongs to: the one open on the rank drawing it (global rank 0 under SGLang)."""
        kind = bar_kind(bar.desc)
        if kind is None:
            return self._current_key()
        if kind.loader is not None:
            self._loader = kind.loader
        name = kind.phase
        rank = self._ranks.get(bar.rank or self._lead_rank or "")
        candidates = [key for key in rank.open.values() if key[0] == name] if rank else []
        if not candidates:
            candidates = [key for key in self._phases if key[0] == name]
        if candidates:
            return max(candidates, key=lambda key: self._phases[key].order)
        if name in _BAR_SLOTS and not self.ready and (kind.opens_phase or self._record_phases == 0):
            # No record opened this phase (vLLM V1 logs none when capture begins; an excerpt or a CI log may
            # hold the bar alone): the bar is the evidence, and its time the phase's start.
            slot = _BAR_SLOTS[name]
            label = bar.rank or self._lead_rank or ""
            key = (name, self._model(self._rank(label), slot, name, "nth"), None)
            self._begin(label, slot, key, self._now, provisional=True)
            if not label:
                self._untagged_bar_phases.append(key)
            return key
        return None

    def _current_key(self) -> PhaseKey | None:
        tracks = [track for track in self._phases.values() if track.name != "ready"]
        return max(tracks, key=lambda track: track.order).key if tracks else None

    def _on_frame(self, record: Record) -> None:
        message = record.message
        for name, path in _MODULE_PATHS:
            if path in message:
                self._module_frames[name] += 1
        self._failures.on_frame(record, _FRAMES_READ_BY[self.framework()], lambda: self._where(record))

    def _where(self, record: Record) -> Where:
        """The phase open on the record's rank (else the boot's newest), for a failure logged there."""
        rank = self._ranks.get(record.rank)
        open_keys = list(rank.open.values()) if rank else []
        if open_keys:
            return Where(
                max(open_keys, key=lambda key: self._phases[key].order),
                False,
                self._now,
                self._seq,
                self.ready,
            )
        phase = self._current_key()
        after = phase is not None and not self._phase_still_open(phase)
        return Where(phase, after, self._now, self._seq, self.ready)

    def _is_fatal(self, failure: Failure) -> bool:
        if self._ready_seq is not None and failure.seq < self._ready_seq:
            return False  # the server came up after it
        if failure.after_ready and failure.kind != "death":
            return False  # a request failed; the server lives on
        if failure.kind == "death":
            return True
        if failure.kind == "error-record":
            return self._seq <= failure.seq  # nothing moved on anywhere after it
        # A traceback the rank survived (it went on to log boot progress) was only a warning.
        if failure.rank in self._ranks and failure.rank:
            later = self._ranks[failure.rank].last_event_seq
        else:
            later = self._seq
        return later <= failure.seq

    def _fatal(self) -> Failure | None:
        """The failure that ended the boot: the first fatal one, with the richest traceback among its rank's."""
        fatal = [failure for failure in self._failures.all() if self._is_fatal(failure)]
        if not fatal:
            return None
        # The most telling first: a traceback whose frames say what was running, then a Python error, then a
        # bare ERROR record.
        with_frames = [
            failure for failure in fatal if failure.frame_phase or failure.frame_model or failure.step
        ]
        errors = [failure for failure in fatal if failure.kind != "error-record"]
        # A rank's own failure says more than an untagged one (a launcher's summary, a line whose tag a paste lost).
        errors.sort(key=lambda failure: not failure.rank)
        return (with_frames or errors or fatal)[0]

    # -------------------------------------------------------------------------------------------- report

    def framework(self) -> str:
        # Records that only an engine writes first, then its record prefixes, then its modules in tracebacks.
        for counts in (self._evidence, self._styles, self._module_frames, self._process_tags):
            best = max(counts, key=lambda name: counts[name])
            if counts[best] > 0:
                return best
        return "unknown"

    def _process_tags_needed(self) -> bool:
        return not any(
            any(counts.values())
            for counts in (self._evidence, self._styles, self._module_frames, self._process_tags)
        )

    @property
    def boots(self) -> int:
        return self._boots

    def report(self, boot: int | None = None, log_ended: bool = False) -> BootReport:
        """The report of the last boot, or of boot ``boot`` (1-based; negative counts from the end).

        ``log_ended``: the whole log has been read (not a log still being followed), so an HTTP server that came up
        with nothing after it counts as up; a follower waits for the engine's own ready line instead."""
        if boot is not None:
            index = boot if boot > 0 else self._boots + 1 + boot
            if index != self._boots:
                return self._kept_boot(index, log_ended)
        framework = self.framework()
        now_s = timestamp_seconds(self._now) if self._now else None
        ready = self._phases.get(("ready", None, None))
        ready_at = next((span.end for span in ready.spans.values()), None) if ready else None
        # A phase whose end was never logged in a boot that came up ended, at the latest, when it was ready.
        until_s = timestamp_seconds(ready_at) if ready_at else now_s
        tracks = sorted(self._phases.values(), key=lambda track: track.order)
        expected = self._expected_ranks()
        fatal = self._fatal()
        failure = self._failure_report(fatal) if fatal else None
        current = self._current_key()
        up = (
            self._http_up
            if log_ended and fatal is None and not self.ready and self._seq == self._http_up_seq
            else None
        )
        if up is not None:
            # Nothing happened after the HTTP server came up: the server is up (its ready line is past the log).
            rank, start, at = up
            tracks.append(
                PhaseTrack(
                    ("ready", None, None), self._order + 1, "ready", {rank: RankSpan(start=start, end=at)}
                )
            )
            until_s = timestamp_seconds(at) if at else now_s
        if fatal is not None:
            state = "failed"
        elif self.ready or up is not None:
            state = "ready"
        elif current is not None:
            state = current[0]
        else:
            state = "starting"
        context = SummaryContext(
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
            phases=tuple(phase_report(track, until_s) for track in tracks),
            progress=tuple(progress_report(bar) for bar in self._bars),
            warnings=self._warnings(expected, context),
            summary=build_summary(state, context, failure),
            first_timestamp=self._first_ts,
            last_timestamp=self._now,
            error=fatal.error if fatal else None,
            filesystem=self._filesystem,
            boots=self._boots,
            boot=self._boots,
            loader=self._loader,
            loaders=dict(self._model_loaders),
            throughput_GiBps=self._throughput,
            prefetch=self._prefetch,
            failure=failure,
            unparsed_records=self._unparsed,
        )

    def _kept_boot(self, index: int, log_ended: bool = False) -> BootReport:
        kept = {cast(int, state["_boots"]): state for state in (*self._early_boots, *self._late_boots)}
        if not 1 <= index <= self._boots:
            raise LookupError(f"the log holds {self._boots} boot{'s' if self._boots > 1 else ''}")
        if index not in kept:
            raise LookupError(
                f"boot {index} of {self._boots} was not kept: the first {BOOTS_KEPT} and the last {BOOTS_KEPT + 1} are"
            )
        current = {name: getattr(self, name) for name in _BOOT_STATE}
        boots = self._boots
        try:
            for name, value in kept[index].items():
                setattr(self, name, value)
            report = self.report(log_ended=log_ended)
        finally:
            for name, value in current.items():
                setattr(self, name, value)
        warnings = tuple(w for w in report.warnings if not w.startswith("the log holds"))
        return _replace_boots(report, boots, warnings)

    def _failure_report(self, fatal: Failure) -> FailureReport:
        recorded = fatal.phase
        step = fatal.step
        error = fatal.error
        if fatal.kind == "traceback" and not fatal.error_final:
            error += " (the log ends before its error line)"
        if fatal.after and fatal.frame_phase is None and recorded is not None:
            # Nothing was running on that rank: the newest phase had ended everywhere.
            step = step or f"after {done_words(recorded)}"
            return FailureReport(fatal.rank, None, fatal.frame_model, step, error, fatal.timestamp)
        name = fatal.frame_phase or (recorded[0] if recorded else None)
        model = fatal.frame_model
        if model is None and recorded is not None and recorded[0] == name:
            model = recorded[1]
        if (
            model is None
            and name in ("load-weights", "kv-cache", "cuda-graph")
            and self._speculative is False
        ):
            model = "target"
        return FailureReport(fatal.rank, name, model, step, error, fatal.timestamp)

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
        tp = self._size("tp")
        if tp is None:
            return None
        pp = self._size("pp") or 1
        dp = self._size("dp") or 1
        return tp * pp * (1 if self._dp_attention else dp)

    def _size(self, kind: str) -> int | None:
        for engine in ENGINES:
            for key in engine.size_keys.get(kind, ()):
                if key in self._sizes:
                    return self._sizes[key]
        return None

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

    def _warnings(self, expected: list[str], context: SummaryContext) -> tuple[str, ...]:
        warnings = [
            *failure_warnings(self._failures.all(), self._is_fatal),
            *stall_warnings(context.stalls, self._now),
        ]
        if self._boots > 1:
            warnings.insert(0, boots_warning(self._boots, self._boots))
        if self._unparsed and self._unparsed > UNPARSED_WARN_SHARE * self._boot_records:
            shown = "; ".join(f"`{example}`" for example in self._unparsed_examples)
            warnings.insert(
                0,
                f"part of the log was not understood: {self._unparsed} of {self._boot_records} boot records sit "
                f"behind a line prefix the reader does not know, so phases, ranks and times may be missing "
                f"(e.g. {shown})",
            )
        tracks = sorted(self._phases.values(), key=lambda track: track.order)
        warnings += missing_rank_warnings(tracks, expected, self.framework())
        if len(warnings) > MAX_WARNINGS:
            extra = len(warnings) - MAX_WARNINGS
            warnings = [*warnings[:MAX_WARNINGS], f"... and {extra} more warnings"]
        return tuple(warnings)


_ENGINES_BY_STYLE = {engine.name: (engine,) for engine in ENGINES}
# (engine, module path) pairs, and the frame tables a traceback is read with once the framework is known.
_MODULE_PATHS = tuple((engine.name, path) for engine in ENGINES for path in engine.module_paths)
_FRAMES_READ_BY = {
    name: tuple(
        frame for engine in ENGINES if engine.name == name or name == "unknown" for frame in engine.frames
    )
    for name in (*(engine.name for engine in ENGINES), "unknown")
}
_ENGINES_LED_BY = {
    leader: tuple(sorted(ENGINES, key=lambda engine: engine.name != leader))
    for leader in (*_ENGINES_BY_STYLE, "unknown")
}
# The tables a record is read with, by its style ("plain <leader>" for an unprefixed line).
_ENGINES_READING = {
    **_ENGINES_BY_STYLE,
    **{f"plain {leader}": engines for leader, engines in _ENGINES_LED_BY.items()},
}

# What one boot's report is built from: kept by reference when the server restarts.
_BOOT_STATE = (
    "_evidence",
    "_styles",
    "_module_frames",
    "_process_tags",
    "_boot_records",
    "_unparsed",
    "_unparsed_examples",
    "_last_boot_record",
    "_phases",
    "_ranks",
    "_bars",
    "_current_bars",
    "_failures",
    "_speculative",
    "_sizes",
    "_dp_attention",
    "_filesystem",
    "_loader",
    "_model_loaders",
    "_throughput",
    "_prefetch",
    "_first_ts",
    "_last_phase_end",
    "_ready_seq",
    "_http_up",
    "_http_up_seq",
    "_lead_rank",
    "_untagged_bar_phases",
    "_record_phases",
    "_order",
    "_now",
    "_now_s",
    "_boots",
    "_seq",
)

_SIZE_KEYS = sorted(
    {key for engine in ENGINES for keys in engine.size_keys.values() for key in keys} | {"nnodes"}
)
_DIGITS_RE = re.compile(r"\d{1,6}\b", re.ASCII)


def _int_arg(message: str, key: str) -> int | None:
    """The number after ``key=`` where ``key`` is a whole name (``tp_size=8``, not ``attn_tp_size=2``).

    str.find per key: a regex over a 14 kB server_args line costs more than the whole rest of a boot."""
    needle = key + "="
    at = message.find(needle)
    while at >= 0:
        before = message[at - 1 : at]
        if not (before.isalnum() or before == "_"):
            digits = _DIGITS_RE.match(message, at + len(needle))
            return int(digits.group()) if digits else None
        at = message.find(needle, at + 1)
    return None


def _rare_line_starts(block: bytes) -> list[int]:
    """Where the lines holding a rare needle start, last first (the reader pops them in order)."""
    starts: set[int] = set()
    for needle in _RARE_NEEDLES:
        at = block.find(needle)
        while at >= 0:
            starts.add(block.rfind(b"\n", 0, at) + 1)
            at = block.find(needle, at + len(needle))
    return sorted(starts, reverse=True)


def _continues(frame: Bar, later: Bar) -> bool:
    """Whether ``later`` redraws the bar that ``frame`` drew, moved on or not. Descriptions that differ only in
    their parenthesised detail name one bar ("Capturing batches (bs=8 avail_mem=7.19 GB)"), as they do for
    ``_bar_identity``."""
    return (
        later.total == frame.total
        and later.done >= frame.done
        and later.rank == frame.rank
        and (later.desc == frame.desc or _bar_desc(later.desc) == _bar_desc(frame.desc))
    )


def _bar_desc(desc: str) -> str:
    """A bar's description without its parenthesised detail, which changes from frame to frame."""
    return _DESC_DETAIL_RE.sub("", desc) or desc


class Reading(NamedTuple):
    """What a record's message says by itself, whatever the state: which rule of which engine it matches and
    what that rule does with it. Ranks print the same message one after another, so the analyzer keeps the
    last few readings."""

    frame: bool  # a traceback's "File ..." line
    engine: Engine | None
    rule: Rule | None
    action: Action | None  # the rule's, with the variant the message names
    model: Model  # an End's model, "draft" when the message names a draft architecture
    elapsed_s: float | None  # the time an End's message reports
    may_fail: bool  # one of the failure checks' words is in it (the level is the caller's to add)


def _read(message: str, engines: tuple[Engine, ...]) -> Reading:
    may_fail = FAILURE_GATE_RE.search(message) is not None
    if FRAME_NEEDLE in message and message.lstrip().startswith(FRAME_NEEDLE):
        return Reading(True, None, None, None, None, None, may_fail)
    for engine in engines:
        rule = _first_rule(engine, message)
        if rule is None:
            continue
        action = rule.action
        if rule.pattern is not None and isinstance(action, (Begin, End)):
            action = _with_variant(action, rule, message)
        model: Model = None
        elapsed_s = None
        if isinstance(action, End):
            model = action.model
            if engine.draft_pattern is not None and action.phase == "load-weights":
                model = "draft" if engine.draft_pattern.search(message) else model
            elapsed_s = _elapsed(message)
        return Reading(False, engine, rule, action, model, elapsed_s, may_fail)
    return Reading(False, None, None, None, None, None, may_fail)


def _first_rule(engine: Engine, message: str) -> Rule | None:
    for rule in engine.records:
        if rule.needle in message and (rule.pattern is None or rule.pattern.search(message) is not None):
            return rule
    return None


def _with_variant(action: Begin | End, rule: Rule, message: str) -> Begin | End:
    """A patterned rule's action for this record: its variant (and so its slot) read from the record."""
    match = rule.pattern.search(message) if rule.pattern is not None else None
    variant = match.groupdict().get("variant") if match is not None else None
    if not variant:
        return action
    variant = variant.lower()
    return replace(action, slot=f"{action.slot}-{variant}", variant=variant)


def _replace_boots(report: BootReport, boots: int, warnings: tuple[str, ...]) -> BootReport:
    if boots > 1:
        warnings = (boots_warning(boots, report.boot), *warnings)
    return replace(report, boots=boots, warnings=warnings)


def analyze_stream(
    stream: BinaryIO,
    stall_after_s: float = STALL_AFTER_S,
    name: str = "-",
    boot: int | None = None,
    on_bytes: Callable[[int], object] | None = None,
) -> BootReport:
    """Read a whole stream in bounded chunks and report on it (on its last boot, or on boot ``boot``); ``on_bytes``
    is told the size of each block read (a progress bar)."""
    analyzer = BootLogAnalyzer(stall_after_s)
    try:
        for block in iter_blocks(stream):
            analyzer.feed_block(block)
            if on_bytes is not None:
                on_bytes(len(block))
    except OSError as exc:  # EIO, a directory that slipped through open(), ...
        raise LogInputError(name, exc.strerror or str(exc)) from None
    return analyzer.report(boot, log_ended=True)


def analyze_path(
    path: str,
    stall_after_s: float = STALL_AFTER_S,
    boot: int | None = None,
    on_bytes: Callable[[int], object] | None = None,
) -> BootReport:
    """Report on the log at ``path`` ("-" is standard input). Raises LogInputError when it cannot be read."""
    stream = open_log(path)
    try:
        return analyze_stream(stream, stall_after_s, name=path, boot=boot, on_bytes=on_bytes)
    finally:
        if path != "-":
            stream.close()


def analyze_bytes(data: bytes, stall_after_s: float = STALL_AFTER_S, boot: int | None = None) -> BootReport:
    """Report on a log held in memory (tests, small inputs)."""
    analyzer = BootLogAnalyzer(stall_after_s)
    splitter = LineSplitter()
    for block in (splitter.feed(data), splitter.flush()):
        if block:
            analyzer.feed_block(block)
    return analyzer.report(boot, log_ended=True)


def _elapsed(message: str) -> float | None:
    match = _ELAPSED_RE.search(message)
    return float(match.group(1)) if match else None


def _is_lead_label(label: str) -> bool:
    return all(number == 0 for number in rank_sort_key(label)[0])

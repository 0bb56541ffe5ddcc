"""What a boot log says the server did: phases per rank, shard progress, failures, and the state at the end.

``BootLogAnalyzer`` reads a log as a pipeline of stages, fed with blocks of whole lines (parse.LineSplitter makes
them), and can report at any point, which is what ``--follow`` needs:

1. lines: collectors' prefixes come off the block (wrappers.py); only the lines that hold a needle are read
   (prefilter.py), and runs of one bar's frames are cut to the frames that change something (parse.bar_runs);
2. records: each line read into timestamp, rank, style and message, its decoration stripped (parse.py);
3. readings: what a message says by itself, by the engines' tables (reading.py; the tables are data in
   ckptprof/engines/: sglang_log.py, vllm_log.py, log_rules.py);
4. boots: a server configuration after boot progress starts a new boot; each boot's state is one ``Boot``
   (boot.py), changed by the records' actions (actions.py), bars (bar_tracks.py) and failures (failures.py);
5. report: a ``BootReport`` of the last boot, or of any kept one (boot_report.py, summary.py, words.py).

This module owns the log-wide part: the clock, the boots, the cache of readings.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import BinaryIO

from ckptprof.bootlog.actions import apply_reading, restarts
from ckptprof.bootlog.bar_tracks import continues, on_bar
from ckptprof.bootlog.boot import MAX_RANKS, Boot
from ckptprof.bootlog.boot_report import build_report
from ckptprof.bootlog.clock import LogClock
from ckptprof.bootlog.failures import FRAME_NEEDLE, TRACEBACK_START, Where
from ckptprof.bootlog.newest_first import NEWEST_FIRST_WARNING, OldestFirst, reversed_lines, runs_newest_first
from ckptprof.bootlog.parse import (
    HOST_MARK,
    MAX_LINE_BYTES,
    PID_LABEL,
    WORLD_RANK_LABEL,
    Bar,
    LineSplitter,
    LogInputError,
    Record,
    Utf16Log,
    as_utf8,
    bar_runs,
    has_bar_or_escape,
    iter_blocks,
    looks_binary,
    needle_pattern,
    new_record,
    open_log,
    parse_record,
    pid_label,
    split_line,
    strip_ansi,
    utf8_bytes,
)
from ckptprof.bootlog.prefilter import (
    ANCHOR_BYTES,
    ENGINE_FRAME_RE,
    FRAME_BYTES,
    FRAME_RULES_RE,
    REGULAR_RE,
    candidate_view,
    next_candidate,
    next_until_ready_line,
    rare_line_starts,
    until_ready_ahead,
)
from ckptprof.bootlog.reading import (
    ENGINE_NAMES,
    ENGINES,
    ERROR_WORDS_READ_BY,
    FRAMES_READ_BY,
    MODULE_PATHS,
    TABLES_FOR_STYLE,
    NamedRank,
    Reading,
    read_message,
)
from ckptprof.bootlog.report import BootReport
from ckptprof.bootlog.timestamps import (
    first_timestamp_line,
    last_timestamp_before,
    last_timestamp_of_form,
    timestamp_seconds,
)
from ckptprof.bootlog.words import boots_warning
from ckptprof.bootlog.wrappers import unwrap_paste
from ckptprof.engines.log_rules import Configure, FrameRule

STATES = ("starting", "init-distributed", "load-weights", "kv-cache", "cuda-graph", "ready", "failed")
# A bar that has not moved for this long while the log's clock went on is reported as stalled.
STALL_AFTER_S = 120.0
# Readings of recent messages kept: ranks print the same message one after another (about 40% of a real log's
# records repeat one of the last few dozen). A thousand also keep what ranks repeat further apart (each rank's
# traceback in turn, tens of lines each): on one copy of the real corpus (4 MiB, 7,300 records) 15% fewer messages
# are read than with 64 (3,948 against 4,652), and as many fewer per copy on 16 MiB of it, so none of it comes from
# the benchmark repeating the corpus. Cleared when full: a few hundred kB at most.
READINGS_KEPT = 1024
BOOTS_KEPT = 16  # the reports of the first and of the last boots; a retry loop can restart thousands of times
UNPARSED_EXAMPLES = 3
# The tables an unprefixed line is read with, by the engine leading the evidence (reading.TABLES_FOR_STYLE's keys).
_PLAIN_STYLE = {name: f"plain {name}" for name in (*ENGINE_NAMES, "unknown")}


class BootLogAnalyzer:
    """Feed blocks of whole lines (``feed_block``) or decoded physical lines (``feed_line``); ``report()``
    at any time."""

    def __init__(self, stall_after_s: float = STALL_AFTER_S) -> None:
        self.stall_after_s = stall_after_s
        self._clock = LogClock()
        self._boot = Boot(1, self._clock)
        # Finished boots, kept as they were: the first few and the last few.
        self._early_boots: list[Boot] = []
        self._late_boots: deque[Boot] = deque(maxlen=BOOTS_KEPT)
        self._clock_floor = 0  # where the last look-back for a timestamp stopped in the block
        self._readings: dict[tuple[str, str], Reading] = {}
        self._indent: bytes | None = (
            None  # the indentation a pasted log's lines share (wrappers.learn_indent)
        )
        self._block = b""  # the block being read, and where the current line starts in it
        self._line_start = 0
        # The stamp a record carried last, as clock.with_year gave it back, and the year and day it left.
        self._stamp_raw: str | None = None
        self._stamp = ""
        self._stamp_year: str | None = None
        self._stamp_day: str | None = None
        # The log's lines ran newest first and were read from its last (newest_first.py): the report says so.
        self.newest_first = False
        # The rank label the last record was read under (_on_record), and that of a worker's tag standing alone on
        # the line above the bar line being read (_tag_alone_above): the bar's, where its own line names none.
        self._record_label = ""
        self._bar_tag = ""

    def _restart(
        self, record: Record, before: tuple[str | None, float] | None, first_before: str | None = ""
    ) -> None:
        """The server started again: the boot so far is kept as it was (unless it held no start of its own: see
        Boot.holds_a_start), and a fresh one begins here. ``before``:
        the log's time before this record moved it, when it did; ``first_before``: the boot's first stamp before
        this record's moved the clock ("": the record did not move it)."""
        # Kept by reference and reported only if asked for: a retry loop can restart thousands of times, and
        # building each report would cost more than reading the log.
        finished = self._boot
        number = finished.number + 1
        if not finished.holds_a_start():
            # An excerpt that opened in an earlier server's serving: the boots counted are the starts the log
            # holds (a notebook cell that opens on the last engine's bar, then rebuilds it nine times, holds nine).
            number = finished.number
        else:
            finished.finish()
            if before is not None:
                # The new server's first record is no part of the old boot: an open phase of that boot ran until the
                # boot's own last time, not into the next server's (days later, where two runs share a file).
                finished.clock.now, finished.clock.now_s = before
            if first_before != "":
                # Nor is its stamp the old boot's first (a boot with no stamp of its own took it as it moved the
                # clock).
                finished.first_ts = first_before
            if len(self._early_boots) < BOOTS_KEPT:
                self._early_boots.append(finished)
            else:
                self._late_boots.append(finished)
        self._boot = Boot(number, self._clock, first_ts=record.timestamp)
        seconds = timestamp_seconds(record.timestamp) if record.timestamp is not None else None
        if seconds is not None and seconds < self._clock.now_s:
            # The new server's time starts at its own first record: a run from earlier (or from a machine whose
            # clock is behind) appended after a later one must not measure its open phases to the old boot's end.
            self._clock.now, self._clock.now_s = record.timestamp, seconds

    # ----------------------------------------------------------------------------------------------- lines

    def feed_block(self, block: bytes) -> None:
        """A block of whole lines (``\\n`` or ``\\r`` terminated), as parse.LineSplitter produces them."""
        if looks_binary(block):
            return
        block, self._indent = unwrap_paste(block, self._indent)
        boot = self._boot
        if boot.process_tags_needed():
            # Nothing has said which engine wrote the log yet: the names it gives its processes may (a paste of
            # bars whose worker tags stand alone on their lines holds nothing else). Searched only until then, and
            # only up to the next server's start in the block: another server's tags are its boot's, not this one's
            # (a paste of vLLM bars, then an SGLang server's log in the same file). If that start is this boot's
            # own, its configuration's words will say which engine it is.
            server = _SERVER_START_RE.search(block)
            # The start's own line is the next server's, its process tag too (`(APIServer pid=2) ... non-default args`).
            end = len(block) if server is None else block.rfind(b"\n", 0, server.start()) + 1
            for engine in ENGINES:
                if engine.process_tag is not None:
                    boot.process_tags[engine.name] += len(engine.process_tag.findall(block, 0, end))
                if engine.record_prefix is not None:
                    boot.process_tags[engine.name] += len(
                        engine.record_prefix.findall(b"\n" + block, 0, end + 1)
                    )
        if boot.first_ts is None:
            self._advance_clock(self._first_own_timestamp(block))
        self._clock_floor = 0
        self._block = block
        rare = rare_line_starts(block)
        view = candidate_view(block)
        # The next line that holds a needle (prefilter.py): the line of the next needle or the next "%", or a rare
        # needle's line when that comes first. Written out here with the loop's names bound locally: this loop runs
        # once per line read (about 2,500 a MB of the real corpus).
        find = block.find
        rfind = block.rfind
        on_record = self._on_record
        frame_size = len(FRAME_BYTES)
        pos = 0
        size = len(block)
        needle: tuple[int, int] | None = None  # the next needle's span, reused while it lies ahead
        exhausted = False  # no needle is left in the block: the "%" and the rare needles' lines alone remain
        percent = -1  # the next "%" at or after ``pos``; ``size`` when none is left
        # Where the next line of a record that matters only until the boot is ready starts (a serving server's
        # statistics, its warm-up's lines: prefilter.UNTIL_READY_NEEDLES), looked for only while the boot is not
        # ready; before ``pos`` when not looked for since.
        until_ready = -1
        ahead = until_ready_ahead()  # where each until-ready needle lies next in the block
        while True:
            if (needle is None and not exhausted) or (needle is not None and needle[0] < pos):
                needle = next_candidate(view, block, pos)
                exhausted = needle is None
            if percent < pos:
                percent = find(b"%", pos)
                if percent < 0:
                    percent = size
            regular = True  # the line's first needle is a regular one (a traceback frame's among them)
            if needle is not None and needle[0] < percent:
                hit_start, hit_end = needle
                # Never before ``pos``: a run of bar frames may have ended inside this physical line.
                start = rfind(b"\n", 0, hit_start) + 1
                if start < pos:
                    start = pos
                if block[hit_start] in ANCHOR_BYTES:
                    # A rare needle found at its anchor (prefilter.py): its line is read as a rare needle's, unless a
                    # regular needle follows on it.
                    line_end = find(b"\n", hit_end)
                    line_match = REGULAR_RE.search(block, hit_start + 1, size if line_end < 0 else line_end)
                    if line_match is None:
                        hit_end = start
                        regular = False
                    else:
                        hit_start, hit_end = line_match.span()
            elif percent < size:
                hit_start, hit_end = percent, percent + 1
                start = rfind(b"\n", 0, hit_start) + 1
                if start < pos:
                    start = pos
            else:
                start = hit_end = size
            while rare and rare[-1] < pos:
                rare.pop()
            if until_ready < pos and self._boot.ready_seq is None:
                until_ready = next_until_ready_line(block, pos, ahead)
            if (
                pos <= until_ready < start
                and (not rare or until_ready < rare[-1])
                and self._boot.ready_seq is None
            ):
                start = hit_end = until_ready  # read as a rare needle's line is
                regular = False
            elif rare and rare[-1] < start:
                start = hit_end = rare.pop()
                regular = False  # a rare needle's line: the needle and the "%", further on, are kept for later lines
            elif needle is None and percent >= size:
                break
            self._line_start = start
            if find(b"%", start, hit_end) >= 0:  # a bar frame carries no time of its own
                self._advance_clock(self._timestamp_before(block, start))
                self._bar_tag = self._tag_alone_above(block, start)
                run_end = self._feed_bar_run(block, start)
                if run_end is not None:
                    self._bar_tag = ""
                    pos = run_end
                    continue
            end = find(b"\n", hit_end)
            if end < 0:
                end = size
            if (
                regular
                and hit_end - hit_start == frame_size  # cheaper than the comparison, on every line
                and block.startswith(FRAME_BYTES, hit_start)
                and self._frame_says_nothing(block, start, end)
            ):
                # A traceback frame no engine's table knows says nothing (most of a traceback's lines).
                pos = end + 1
                continue
            text = block[start : end if end - start <= MAX_LINE_BYTES else start + MAX_LINE_BYTES].decode(
                "utf-8", "replace"
            )
            if text[-1:] == "\r" and text.find("\r") == len(text) - 1 and not has_bar_or_escape(text):
                # A CRLF log's line: one record, read as feed_line would read its only segment.
                text = text[:-1]
            if "%" in text or "\r" in text or "\x1b" in text:
                if not self._bar_tag and "%" in text:
                    self._bar_tag = self._tag_alone_above(block, start)
                self.feed_line(text)
                self._bar_tag = ""
            elif text and not text.isspace():
                # feed_line's common case, inlined: one plain record on the line.
                on_record(parse_record(text))
            pos = end + 1
        # Lines the pre-filter skipped still move the log's clock, which stall detection needs.
        self._advance_clock(last_timestamp_before(block, size))

    def _tag_alone_above(self, block: bytes, start: int) -> str:
        """The rank of a worker's process tag that stands alone on the line above ``start``, read as a record; "" when
        that line is anything else. Ray prints an actor's tag, then the actor's tqdm frame on a line of its own, with
        no tag (`(RayWorkerWrapper pid=1273)` over `Loading safetensors checkpoint shards:   7% ...`): the frame is
        that worker's, not global rank 0's by default, which a Ray engine core's tag (`EngineCore_0`, DP0) would be."""
        end = start - 1  # the line break that ends the line above
        # A tag ends with ")", then the blank tqdm's output follows it with, a colour reset's "m" or a CR: a bar's
        # previous frame ("it/s]"), the commonest line above, is turned away by its last byte.
        if end < 1 or block[end - 1] not in _TAG_LINE_LAST_BYTES:
            return ""
        above = block.rfind(b"\n", 0, end) + 1
        # Every worker tag names its process id; looked for in place, most bar lines' line above being no tag at all
        # (a bar's previous frame, a long record).
        if block.find(b"pid=", above, end) < 0:
            return ""
        text = self.line_before()  # the line at ``start`` is the one being read (feed_block set _line_start)
        if text[-1:] != ")":
            return ""
        record = parse_record(text + " ")  # a tag is read with the blank that ends it
        if not record.rank or record.message.strip():
            return ""
        # Read as the record it is: the label comes out as every other record of that worker's does (its node
        # where two nodes share the id, a launcher's tag untagged).
        self._on_record(record)
        return self._record_label

    def _first_own_timestamp(self, block: bytes) -> str | None:
        """The first stamp near the block's start, for a boot with no time yet (its first lines may be bars and
        untimed worker lines). Once the boot's engine is known (its process tags), only from a line in that
        engine's record form or in none: a short paste with no stamp of its own, followed by another engine's
        server, would otherwise take that server's first stamp, and the clock, which moves forward only, would
        keep it for this boot."""
        found = first_timestamp_line(block)
        if found is None:
            return None
        stamp, start = found
        if self._next_server_stamp(block, start):
            return None
        own = self._boot.framework()
        engine = next((e for e in ENGINES if e.name == own), None)
        if engine is not None:
            end = block.find(b"\n", start)
            line = block[start : end if end >= 0 else len(block)].decode("utf-8", "replace")
            style = parse_record(strip_ansi(line)).style
            if style not in ("plain", own) and style not in engine.imported_loggers:
                return None
        return stamp

    @staticmethod
    def _next_server_stamp(block: bytes, start: int) -> bool:
        """Whether the stamp on the line at ``start`` is the next server's, not the untimed lines' before it: a
        server's start (its configuration) comes before it or on its line (a paste of bars, then another server's
        log). A server prints its configuration first: what comes before it is an earlier server's."""
        end = block.find(b"\n", start)
        return _SERVER_START_RE.search(block, 0, end if end >= 0 else len(block)) is not None

    def _frame_says_nothing(self, block: bytes, start: int, end: int) -> bool:
        """A traceback frame that no engine's frame table knows, and that cannot tell which engine ran (or that
        a traceback began above the excerpt) any more."""
        if FRAME_RULES_RE.search(block, start, end) is not None:
            return False
        boot = self._boot
        return (boot.failures.any() and boot.engine_evidenced()) or ENGINE_FRAME_RE.search(
            block, start, end
        ) is None

    def _messages_after(self, rank: str, pid: str, count: int = 2) -> list[str]:
        """The messages of the physical lines after the one being read, while the same process wrote them (its rank
        and pid): an error's cause written under it. Another process's line ends them."""
        block = self._block
        messages: list[str] = []
        end = block.find(b"\n", self._line_start)
        while end >= 0 and len(messages) < count:
            start = end + 1
            end = block.find(b"\n", start)
            stop = len(block) if end < 0 else end
            line = block[start : min(stop, start + MAX_LINE_BYTES)].decode("utf-8", "replace")
            record = parse_record(strip_ansi(line).rstrip("\r"))
            if record.rank != rank or record.pid != pid:
                break
            messages.append(record.message)
        return messages

    def _time_before_line(self, before: tuple[str | None, float] | None) -> tuple[str | None, float] | None:
        """The log's time just before the line being read: ``before`` (the clock before the line's record moved
        it, None when it did not), moved on by the timed lines the pre-filter passed over since the last look.

        A boot that the next server's start ends ran until its own last line, which is often one no rule reads
        (`Using model weights format ...` before a cut): its open phase is not ended at an older record's time."""
        now = before[0] if before is not None else self._clock.now
        if now is None:
            return before
        # A stamp of another form (a dated one after vLLM's year-less ones) is the next server's own: passed over.
        seen = last_timestamp_of_form(
            self._block, self._line_start, lambda raw: _same_form(raw, now), floor=self._clock_floor
        )
        if seen is None:
            return before
        stamp = _in_form_of(seen, now)
        seconds = timestamp_seconds(stamp)
        now_s = before[1] if before is not None else self._clock.now_s
        if seconds is None or seconds <= now_s:
            return before
        return stamp, seconds

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
        tag = self._bar_tag
        for item in split_line(line):
            if isinstance(item, Bar):
                if tag and not item.rank:
                    item = item._replace(rank=tag)  # a frame under its worker's tag (_tag_alone_above)
                if drawn is not None and continues(drawn, item):
                    skipped = item
                else:
                    if skipped is not None:
                        on_bar(self._boot, skipped)
                        skipped = None
                    on_bar(self._boot, item)
                drawn = item
                continue
            if skipped is not None:
                on_bar(self._boot, skipped)
                skipped = None
            drawn = None
            self._on_record(item)
            if item.rank and not item.message.strip():
                # A worker's tag alone before a carriage return, then its bar's frame (Ray prints the tag, tqdm
                # starts its frame with "\r": `(RayWorkerWrapper pid=287638) \rLoading safetensors ...`): the
                # frames that follow on the line are that worker's, as under a tag alone on the line above.
                tag = self._record_label
        if skipped is not None:
            on_bar(self._boot, skipped)

    # ----------------------------------------------------------------------------------------------- clock

    def _advance_clock(self, timestamp: str | None) -> None:
        """Move the log's clock forward only: a look-back may find an older line than a record already read."""
        if timestamp is None or timestamp == self._clock.now:
            return
        self._advance_to(self._clock.with_year(timestamp))

    def _advance_to(self, timestamp: str) -> None:
        """``_advance_clock`` for a timestamp that already has its year."""
        seconds = timestamp_seconds(timestamp)
        if seconds is None:
            return
        clock = self._clock
        if seconds > clock.now_s:
            clock.now, clock.now_s = timestamp, seconds
        boot = self._boot
        first = boot.first_ts
        if first is None or (timestamp[4:5] == "-" and first[4:5] != "-" and not boot.order):
            # A year-less stamp before the first dated one comes from a foreign logger (vLLM's, imported by an
            # older SGLang) whose clock the server's own records do not share: the span starts at a dated one. Only
            # while no step has begun: a dated stamp first seen after that is no server's first record but a
            # launcher's (Llumnix's and Ray's around vLLM's year-less records, at the log's end), and the span
            # cannot start after the steps in it.
            boot.first_ts = timestamp

    # --------------------------------------------------------------------------------------------- records

    def _on_record(self, record: Record) -> None:
        # Written out in one piece (the readings cache, the relay check and the stamp's year inline): this runs
        # once per record, about 2,000 a MB of a real log, and each call it makes costs a tenth of a microsecond.
        raw = record.timestamp
        clock = self._clock
        before: tuple[str | None, float] | None = None
        first_before: str | None = None  # the boot's first stamp before this record's moved the clock
        if raw is not None:
            # Ranks print one stamp one after another: with_year's answer is reused while nothing has changed the
            # year or the day it lends (it sets them to what they already are for the stamp it read last).
            if raw == self._stamp_raw and clock.year is self._stamp_year and clock.day is self._stamp_day:
                stamped = self._stamp
            else:
                stamped = clock.with_year(raw)
                self._stamp_raw, self._stamp = raw, stamped
                self._stamp_year, self._stamp_day = clock.year, clock.day
            if stamped != clock.now:
                before = (clock.now, clock.now_s)
                first_before = self._boot.first_ts
                self._advance_to(stamped)
            timestamp: str | None = stamped
        else:
            # Untimed lines (uvicorn's, traceback bodies) happened after the last timed one, which may be a line
            # the pre-filter passed over (a server's route list before uvicorn's `Application startup complete`).
            self._advance_clock(self._timestamp_before(self._block, self._line_start))
            timestamp = clock.now
        boot = self._boot
        rank = record.rank
        style = record.style
        pid = record.pid
        if pid:
            if style == "sglang":
                # An SGLang record behind a launcher's process tag (parse_record): the pid is the launcher's, which
                # runs every rank whose lines it prints (verl's Ray actor).
                boot.launcher_pids.add(pid)
            elif pid in boot.launcher_pids:
                if rank.startswith(PID_LABEL):
                    rank = ""  # a line of no rank's own behind that tag: untagged, as it would be without the launcher
            elif not rank and record.process and boot.concurrent_process(record.process, pid):
                rank = pid_label(pid)
            if HOST_MARK in pid and rank.startswith(PID_LABEL):
                rank = boot.host_label(rank, pid)
        if rank not in boot.ranks and len(boot.ranks) >= MAX_RANKS:
            rank = "?"
        self._record_label = rank
        message = record.message
        if timestamp != raw or rank != record.rank:
            record = new_record(
                Record, (timestamp, rank, message, style, record.level, record.relayed, pid, record.process)
            )
        if (
            pid
            and pid not in boot.named_pids
            and rank
            and rank != "?"
            and style != "sglang"
            and not rank.startswith(PID_LABEL)
        ):
            boot.named_pids[pid] = rank
        if FRAME_NEEDLE in message and message.lstrip().startswith(FRAME_NEEDLE):
            # A traceback's frame, which reads as one whatever the tables (reading._read_message): not kept among
            # the readings, where each frame's own words would push out the messages that ranks repeat.
            self._on_frame(record)
            return
        # What the message says, read with the tables its style calls for (kept for the next ranks).
        key = (style if style in ENGINE_NAMES else _PLAIN_STYLE[boot.framework()], message)
        readings = self._readings
        reading = readings.get(key)
        if reading is None:
            if len(readings) >= READINGS_KEPT:
                readings.clear()
            reading = readings[key] = read_message(message, TABLES_FOR_STYLE[key[0]])
        named = reading.named_rank
        if named is not None:
            self._on_named_rank(named)
            if not rank and named.world > 1:
                # A worker's record that lost its tag (vLLM's workers log their world before their tags are set up):
                # its rank's, not the untagged process's, under a label the report gives the rank's tag.
                label = f"{WORLD_RANK_LABEL}{named.rank}"
                if (
                    label not in boot.world_labels
                    and max(len(boot.ranks), len(boot.world_labels)) < MAX_RANKS
                ):
                    boot.world_labels.append(label)
                if label in boot.world_labels:
                    rank = label
                    record = record._replace(rank=label)
        if reading.rule is not None:
            # The rank's previous boot record again, same time and words: a relay (Ray prints a worker's line once
            # with the outer process tags and once without), not a second event.
            seen = (timestamp, message)
            last = boot.last_boot_record
            if timestamp is not None and last.get(rank) == seen:
                return
            last[rank] = seen
            boot.boot_records += 1
            if style == "plain":
                self._note_unparsed(message, reading.rule.needle)
            action = reading.action
            if isinstance(action, Configure) and restarts(
                action, boot, reading.engine.name if reading.engine is not None else ""
            ):
                self._restart(
                    record, self._time_before_line(before), first_before if before is not None else ""
                )
                boot = self._boot
            apply_reading(boot, reading, record)
        # Counted after the record's own rule ran: a record that restarts the boot belongs to the new one.
        if timestamp is not None and style in boot.styles:
            boot.styles[style] += 1
        if reading.may_fail or record.level in ("ERROR", "CRITICAL"):  # most records: skip the callbacks
            if not record.rank and TRACEBACK_START in message:
                record = self._announced(record)
            boot.failures.on_record(record, self, reading.may_fail)

    def _on_named_rank(self, named: NamedRank) -> None:
        """A record naming its global rank's group ranks: kept so the report can name that rank as its tag does."""
        boot = self._boot
        boot.stated_world = max(boot.stated_world, named.world)
        assigned = boot.assigned_ranks
        if named.groups and (named.rank in assigned or len(assigned) < MAX_RANKS):
            assigned[named.rank] = named.groups

    def _announced(self, record: Record) -> Record:
        """An untagged traceback whose line before is a rank's record announcing it (SGLang 0.3's
        `[23:17:08 TP4] Exception in run_tp_server:`, Python's traceback printed bare under it): that rank's, with
        the announcement's words before its own."""
        before = self.line_before()
        if not before.endswith(":") or "xception" not in before:
            return record
        announcing = parse_record(before)
        if not announcing.rank:
            return record
        words = f"{announcing.message.strip()} {record.message.strip()}"
        return Record(
            record.timestamp,
            announcing.rank,
            words,
            record.style,
            record.level,
            record.relayed,
            announcing.pid,
            announcing.process,
        )

    def _note_unparsed(self, message: str, needle: str) -> None:
        """A boot record on a line whose prefix was read as nothing: a time or a number before the record's words
        says a prefix was there (uvicorn's bare `INFO:     Application startup complete.` has none)."""
        at = message.find(needle)
        if at > 0 and any(char.isdigit() for char in message[:at]):
            boot = self._boot
            boot.unparsed += 1
            if len(boot.unparsed_examples) < UNPARSED_EXAMPLES:
                boot.unparsed_examples.append(message.strip()[:160])

    def _on_frame(self, record: Record) -> None:
        boot = self._boot
        message = record.message
        for name, path in MODULE_PATHS:
            if path in message:
                boot.module_frames[name] += 1
        boot.failures.on_frame(record, self)
        code = self._code_under_frame()
        if code is not None:
            boot.failures.on_frame_code(record, code, self)

    def _code_under_frame(self) -> str | None:
        """The code line under the frame being read, when the next physical line is one (indented, no frame itself):
        a plain traceback's, which no needle brings to the reader. The function it calls is the next frame's, which an
        excerpt may cut (`self.init_cuda_graphs()` under a draft worker's `__init__`, sglang#28521)."""
        block = self._block
        end = block.find(b"\n", self._line_start)
        first = block[end + 1 : end + 2]
        if end < 0 or (first != b" " and first != b"\x1b"):  # a coloured log's lines open with their codes
            return None
        stop = block.find(b"\n", end + 1)
        code = block[end + 1 : min(stop if stop >= 0 else len(block), end + 1 + MAX_LINE_BYTES)]
        text = code.decode("utf-8", "replace")
        if first == b"\x1b":
            text = strip_ansi(text)
        if text[:1] != " " or text.lstrip().startswith(FRAME_NEEDLE):
            return None
        return text.rstrip("\r")

    # ----------------------------------------------------------------------- failures.FailureContext: what a
    # failure's reading asks of the log around its record

    def where(self, record: Record) -> Where:
        return self._boot.where(record)

    def line_before(self) -> str:
        """The physical line before the one being read (a traceback's code line above a bare error)."""
        block, start = self._block, self._line_start
        if start <= 0:
            return ""
        line = block[block.rfind(b"\n", 0, start - 1) + 1 : start].decode("utf-8", "replace")
        return strip_ansi(line).strip()

    def frames(self) -> tuple[FrameRule, ...]:
        return FRAMES_READ_BY[self._boot.framework()]

    def lines_after(self, record: Record) -> list[str]:
        return self._messages_after(record.rank, record.pid)

    def error_words(self) -> tuple[FrameRule, ...]:
        return ERROR_WORDS_READ_BY[self._boot.framework()]

    # -------------------------------------------------------------------------------------------- report

    @property
    def ready(self) -> bool:
        return self._boot.ready

    def framework(self) -> str:
        return self._boot.framework()

    @property
    def boots(self) -> int:
        return self._boot.number

    def report(self, boot: int | None = None, log_ended: bool = False) -> BootReport:
        """The report of the last boot, or of boot ``boot`` (1-based; negative counts from the end).

        ``log_ended``: the whole log has been read (not a log still being followed), so an HTTP server that came up
        with nothing after it counts as up; a follower waits for the engine's own ready line instead."""
        boots = self._boot.number
        report = None
        if boot is not None:
            index = boot if boot > 0 else boots + 1 + boot
            if index != boots:
                report = self._kept_boot_report(index, log_ended)
        if report is None:
            report = build_report(self._boot, self.stall_after_s, log_ended)
        if self.newest_first:
            report = replace(report, warnings=(NEWEST_FIRST_WARNING, *report.warnings))
        return report

    def _kept_boot_report(self, index: int, log_ended: bool) -> BootReport:
        boots = self._boot.number
        kept = {finished.number: finished for finished in (*self._early_boots, *self._late_boots)}
        if not 1 <= index <= boots:
            raise LookupError(f"the log holds {boots} boot{'s' if boots > 1 else ''}")
        if index not in kept:
            raise LookupError(
                f"boot {index} of {boots} was not kept: the first {BOOTS_KEPT} and the last {BOOTS_KEPT + 1} are"
            )
        report = build_report(kept[index], self.stall_after_s, log_ended)
        warnings = tuple(w for w in report.warnings if not w.startswith("the log holds"))
        if boots > 1:
            warnings = (boots_warning(boots, report.boot), *warnings)
        return replace(report, boots=boots, warnings=warnings)


# The last bytes a line that is only a worker's process tag can end with (BootLogAnalyzer._tag_alone_above).
_TAG_LINE_LAST_BYTES = frozenset(b" )m\r")

# The records that can start a new server (a configuration that restarts a boot): a look-ahead for a stamp stops
# at them.
_SERVER_START_RE = needle_pattern(
    dict.fromkeys(
        rule.needle
        for engine in ENGINES
        for rule in engine.records
        if isinstance(rule.action, Configure) and rule.action.restart != "never"
    )
)


def _same_form(raw: str, stamped: str) -> bool:
    """Whether a stamp as a line prints it and one the clock has read come from one logger: both with a date,
    both month-day (the clock lends a year to those), or both a time alone (the clock lends a day)."""
    if raw[4:5] == "-":
        return stamped[4:5] == "-" and stamped[:4] == raw[:4]
    return raw[2:3] == stamped[2:3] or (raw[2:3] == "-" and stamped[4:5] == "-")


def _in_form_of(raw: str, stamped: str) -> str:
    """``raw`` (a line's stamp of ``stamped``'s form) with the year or the day the clock lent ``stamped``, so the
    two compare; the clock's own year may already be the next server's."""
    if stamped[4:5] == "-" and raw[4:5] != "-":
        return f"{stamped[:4]}-{raw}" if raw[2:3] == "-" else f"{stamped[:10]} {raw}"
    return raw


class _BytesRead:
    """Tells ``on_bytes`` how many of the log's own bytes each block read took: a UTF-16 log's blocks, as UTF-8, are
    about half as long as what was read for them."""

    def __init__(self, source: BinaryIO | Utf16Log, on_bytes: Callable[[int], object]) -> None:
        self._source = source
        self._on_bytes = on_bytes
        self._read = 0

    def __call__(self, block: bytes) -> None:
        source = self._source
        if isinstance(source, Utf16Log):
            self._on_bytes(source.raw_read - self._read)
            self._read = source.raw_read
        else:
            self._on_bytes(len(block))


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
        source = as_utf8(stream)  # its peek is the stream's first read, which may fail as any other
        blocks = OldestFirst(
            iter_blocks(source), on_read=None if on_bytes is None else _BytesRead(source, on_bytes)
        )
        for block in blocks:
            analyzer.feed_block(block)
        analyzer.newest_first = blocks.reversed
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
    block = splitter.feed(utf8_bytes(data)) + splitter.flush()  # one block, as iter_blocks gives a short log
    if block and runs_newest_first(block):
        block = reversed_lines(block)
        analyzer.newest_first = True
    if block:
        analyzer.feed_block(block)
    return analyzer.report(boot, log_ended=True)

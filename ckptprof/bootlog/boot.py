"""One boot of the server as the log tells it: which phases each rank began and ended, the bars, the failures,
the facts the server stated, and the evidence of which engine wrote it.

A log that a restarted server appends to holds several boots: the reader starts a fresh ``Boot`` at each restart
and keeps the finished ones as they were. The methods here are the phase bookkeeping that every kind of record
shares (open a phase on a rank, end it, say whose it is); what each record does lives in actions.py and
bar_tracks.py, and the report in boot_report.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ckptprof.bootlog.clock import LogClock
from ckptprof.bootlog.failures import FailureTracker, Where
from ckptprof.bootlog.parse import HOST_MARK, WORLD_RANK_LABEL, Record
from ckptprof.bootlog.reading import ENGINE_NAMES
from ckptprof.bootlog.state import BarTrack, PhaseTrack, RankSpan, RankState
from ckptprof.bootlog.timestamps import shift_timestamp, stamp_before
from ckptprof.bootlog.words import PhaseKey, rank_sort_key

READY_KEY: PhaseKey = ("ready", None, None)
# A bound that keeps memory flat whatever the input (a hostile log could invent endless ranks).
MAX_RANKS = 4096
# Process names (and ids under each) Boot.concurrent_process keeps: bounded, whatever the log.
PROCESS_NAMES_KEPT = 64
GRAPH_SLOT = "graph"  # the engines' tables' slot for a CUDA graph capture


def _per_engine() -> dict[str, int]:
    return dict.fromkeys(ENGINE_NAMES, 0)


@dataclass(slots=True)
class Boot:
    number: int  # 1-based, in the log
    clock: LogClock  # the log's clock: shared while this boot is read, a copy once it is finished
    first_ts: str | None = None  # the boot's first timestamp

    # Evidence of the engine, weighed in this order: records only it writes (by their rules' weights), records in
    # its prefix style, its module paths in traceback frames, its process names in line tags (and record prefixes
    # only it writes, on lines no table knows).
    evidence: dict[str, int] = field(default_factory=_per_engine)
    styles: dict[str, int] = field(default_factory=_per_engine)
    module_frames: dict[str, int] = field(default_factory=_per_engine)
    process_tags: dict[str, int] = field(default_factory=_per_engine)

    boot_records: int = 0  # records a table knows
    unparsed: int = 0  # of them, those behind a line prefix the reader could not read
    unparsed_examples: list[str] = field(default_factory=list)
    last_boot_record: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # rank -> (time, words)

    phases: dict[PhaseKey, PhaseTrack] = field(default_factory=dict)
    ranks: dict[str, RankState] = field(default_factory=dict)
    # A worker's process id -> the rank its tag named once it knew it ("(Worker_TP0 pid=374)"): before that, vLLM V1
    # tagged it "(Worker pid=374)", read as rank pid374. The report counts the two as one rank (boot_report.py).
    named_pids: dict[str, str] = field(default_factory=dict)
    # (phase, model) of each step a begin record of the step's own opened on some rank (Begin.unless_begun_anywhere).
    steps_begun: set[tuple[str, str | None]] = field(default_factory=set)
    # Whether a boot record came as Ray's summary of deduplicated lines (`[repeated 3x across cluster]`): Ray then
    # relays lines late, out of their worker's order (actions._ended_late).
    relays_seen: bool = False
    # The process ids of launchers whose tag stands before records that name their own rank (Ray's `(WorkerDict
    # pid=N)` before SGLang's `[time TP1]`): that tag's other lines are no rank's.
    launcher_pids: set[str] = field(default_factory=set)
    # A process name that names no rank ("Llumlet", "APIServer") -> the ids seen under it, the last one last; and the
    # names several processes write under at once (concurrent_process).
    process_pids: dict[str, list[str]] = field(default_factory=dict)
    concurrent_processes: set[str] = field(default_factory=set)
    # A worker's process id -> the node it was first seen on (host_label).
    pid_hosts: dict[str, str] = field(default_factory=dict)
    # A global rank -> the group ranks a record stated for it ((("DP", 0), ("PP", 0), ("TP", 1)): vLLM's `rank 1 in
    # world size 2 is assigned as ...`): the report names a rank read from an untagged record by these.
    assigned_ranks: dict[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    # The largest world size a record stated (vLLM's `world_size=1 rank=0 ...`, `rank 0 in world size 1 ...`); 0 when
    # none did.
    stated_world: int = 0
    # The ranks read from untagged records' words (WORLD_RANK_LABEL), in the order they came.
    world_labels: list[str] = field(default_factory=list)
    order: int = 0  # phases opened so far: orders them
    record_phases: int = 0  # phases opened or closed by a boot record (not by a bar alone)
    last_phase_end: str | None = None
    lead_rank: str | None = None  # global rank 0: the one that draws the bars
    untagged_bar_phases: list[PhaseKey] = field(
        default_factory=list
    )  # opened by bars before the lead was tagged
    # (phase, rank label, slot) of each phase a bar no engine's table knows opened, by its words alone, because no
    # record had opened a phase yet (bar_tracks._phase_for_bar)
    word_bar_phases: list[tuple[PhaseKey, str, str]] = field(default_factory=list)

    bars: list[BarTrack] = field(default_factory=list)
    current_bars: dict[tuple[str, PhaseKey | None], BarTrack] = field(default_factory=dict)
    # (description, rank) -> (normalised description, phase), valid while ``bar_cache_seq`` is the clock's seq
    bar_cache: dict[tuple[str, str], tuple[str, PhaseKey | None]] = field(default_factory=dict)
    bar_cache_seq: int = -1

    failures: FailureTracker = field(default_factory=FailureTracker)

    # What the server's configuration and its records state.
    speculative: bool | None = None  # None: the log did not say
    sizes: dict[str, int] = field(default_factory=dict)  # server_args' sizes (tp_size=8, ...)
    dp_attention: bool = False
    configured_by: str | None = None  # the engine whose server configuration this boot logged first
    # The model the server serves, as its configuration or its load's first record names it (a path or a Hub name).
    model_name: str | None = None
    filesystem: str | None = None
    loader: str | None = None
    model_loaders: dict[str, str] = field(
        default_factory=dict
    )  # the loader each model's load-weights bar shows
    throughput: float | None = None
    prefetch: str | None = None
    # The durations the engine states for its own steps (SGLang's `Engine startup timings (s)`, vLLM's torch.compile
    # and engine-init lines), in seconds.
    startup_timings: dict[str, float] = field(default_factory=dict)
    # step -> rank -> the seconds that rank stated for it (vLLM: each worker its own compile)
    stated_by_rank: dict[str, dict[str, float]] = field(default_factory=dict)

    ready_seq: int | None = None  # the event count when the engine said it was ready
    # It was seen serving requests (a server's throughput lines), not a script's prompts, with no line saying when it
    # came up: mark_served's first caller says which.
    served_requests: bool = False
    # Its HTTP server said it came up, then it served requests, with no ready line (mark_served): up since the former.
    up_then_served: bool = False
    # Its HTTP server came up and the engine's warm-up request was seen under way, with no ready line yet.
    warming: bool = False
    # (rank, start, time) of an HTTP server that came up before the engine said ready, and the event count then
    http_up: tuple[str, str | None, str | None] | None = None
    http_up_seq: int = -1

    @property
    def ready(self) -> bool:
        return self.ready_seq is not None

    def holds_a_start(self) -> bool:
        """Whether anything of this server's own start is in the log: its configuration, a step or a failure. A boot
        with none is the tail of a server started above the excerpt (its serving alone): not a start the log
        holds, so not counted as a boot when the next server's configuration follows it. Nor are failures of a server
        seen serving with nothing of its start (a request's traceback, batch 55's journald tail): they are its
        serving's, not its start's."""
        if self.configured_by or self.phases:
            return True
        return self.failures.any() and not self.ready

    def finish(self) -> None:
        """The server restarted: this boot's clock stops where the log was then, and what only reading needs goes."""
        self.clock = self.clock.copy()
        self.bar_cache.clear()  # up to a thousand entries, in each of the 33 boots kept

    # ------------------------------------------------------------------------------------------ the engine

    def framework(self) -> str:
        # Records that only an engine writes first, then its record prefixes, then its modules in tracebacks.
        # A loop rather than max() with a key function: this is asked on every record that may be a failure.
        for counts in (self.evidence, self.styles, self.module_frames, self.process_tags):
            best = "unknown"
            top = 0
            for name, count in counts.items():
                if count > top:  # the first engine of the most wins a tie, as max() would say
                    best, top = name, count
            if top > 0:
                return best
        return "unknown"

    def process_tags_needed(self) -> bool:
        """Nothing else has said which engine wrote the log yet: the names it gives its processes may."""
        return not self.engine_evidenced() and not any(self.process_tags.values())

    def engine_evidenced(self) -> bool:
        """Something stronger than a process tag has said which engine wrote the log: a record only an engine writes,
        a record prefix, or a module in a traceback. A tag's form may be another engine's (vLLM's platform line,
        imported by SGLang, before a launcher's traceback through SGLang's modules alone, batch 65): the traceback's
        frames are read until then."""
        # Loops, not any() over generators: asked on each traceback frame the pre-filter passes.
        for counts in (self.evidence, self.styles, self.module_frames):
            for count in counts.values():
                if count:
                    return True
        return False

    # --------------------------------------------------------------------------------------------- ranks

    def host_label(self, label: str, pid: str) -> str:
        """The label of a worker known by its process id (``label``, 'pid433') on the node ``pid`` names
        ('433@10.129.10.184'): the id's alone on the first node seen with it, the id and the node on any other (two
        nodes' workers with one id are two ranks: batch 66's Ray run of four workers on three nodes)."""
        number, _, host = pid.partition(HOST_MARK)
        first = self.pid_hosts.get(number)
        if first is None:
            if len(self.pid_hosts) < MAX_RANKS:
                self.pid_hosts[number] = host
            return label
        return label if first == host else f"{label}{HOST_MARK}{host}"

    def concurrent_process(self, name: str, pid: str) -> bool:
        """Whether the process ``pid`` tagged ``name`` (a name that names no rank) is one of several under that name at
        once, a rank of its own told by its id: four engines in Llumnix's Ray actors, each `(Llumlet pid=N)`. Known
        once an id written before comes back after another's (the tags interleave); a new id alone is a process that
        may have replaced the old (a restart), and is the same process until then. The name's first id stays the
        untagged process's throughout, as its records before that were: the others are counted beside it."""
        seen = self.process_pids.get(name)
        if seen is None:
            if len(self.process_pids) < PROCESS_NAMES_KEPT:
                self.process_pids[name] = [pid]
            return False
        if name in self.concurrent_processes:
            return pid != seen[0]
        if seen[-1] == pid:
            return False
        if pid in seen:
            self.concurrent_processes.add(name)
            return pid != seen[0]
        if len(seen) < PROCESS_NAMES_KEPT:
            seen.append(pid)
        else:
            seen[-1] = pid
        return False

    def rank_state(self, label: str) -> RankState:
        state = self.ranks.get(label)
        if state is None:
            state = self.ranks[label] = RankState()
            # Global rank 0 draws the bars: TP0 (or DP0 TP0 ...); untagged only when nothing is tagged.
            if _is_lead_label(label) and (self.lead_rank is None or (label and not self.lead_rank)):
                self.lead_rank = label
                if label and self.untagged_bar_phases:
                    self._hand_bars_to_lead(label)
        return state

    def _hand_bars_to_lead(self, label: str) -> None:
        """Phases that untagged bars opened before any rank was tagged were global rank 0's (it draws the bars):
        they move to the tagged lead rank as soon as it shows up, instead of counting as one more rank."""
        untagged = self.ranks.get("")
        for key in self.untagged_bar_phases:
            track = self.phases.get(key)
            span = track.spans.pop("", None) if track is not None else None
            if track is None or span is None:
                continue
            # Only the span moves: the lead's own records then say whose phase it was (a draft's end line
            # replaces a bar's guess of the target, as it does on a tagged rank).
            track.spans.setdefault(label, span)
            if untagged is not None:
                for slot in [slot for slot, open_key in untagged.open.items() if open_key == key]:
                    del untagged.open[slot]
        self.untagged_bar_phases.clear()

    def touch(self, rank: RankState, progress: bool = True) -> None:
        """Count an event on the rank; ``progress``: one that shows the boot moving on (see LogClock.progress)."""
        self.clock.seq += 1
        if progress:
            rank.last_event_seq = self.clock.progress = self.clock.seq

    # -------------------------------------------------------------------------------------------- phases

    def track(self, key: PhaseKey, slot: str, provisional: bool = False, begins: bool = False) -> PhaseTrack:
        """The phase ``key``, created when new; ``begins``: a record begins it (not one that ends it)."""
        track = self.phases.get(key)
        if track is None:
            if not provisional:
                self._drop_provisional(key, begins)
            self.order += 1
            track = self.phases[key] = PhaseTrack(key, order=self.order, slot=slot, provisional=provisional)
        elif not provisional:
            track.provisional = False
        return track

    def _drop_provisional(self, key: PhaseKey, begins: bool = False) -> None:
        """A phase a bar opened on a guess (target, on whichever rank drew it) gives way to the phase of that name
        a record names: its bars move over to it. A record that ends the step names the step the bars were drawn
        in (an excerpt that starts in the draft's load, its bar first); one that begins the step for another model
        begins a step of its own, after the one the bars showed (the V2 runner's target capture, drawn by its bars
        alone, then `Capturing model for speculator...`)."""
        for other in [
            track
            for track in self.phases.values()
            if track.provisional and track.name == key[0] and not (begins and _other_models(track.key, key))
        ]:
            self._retire_phase(other.key, key)

    def _retire_phase(self, old: PhaseKey, heir: PhaseKey | None) -> None:
        """Take the phase ``old`` out of the boot: no rank has it open, and its bars are ``heir``'s (no phase's when
        None)."""
        del self.phases[old]
        for rank in self.ranks.values():
            for slot in [slot for slot, open_key in rank.open.items() if open_key == old]:
                del rank.open[slot]
        for bar in self.bars:
            if bar.phase == old:
                bar.phase = heir
        self.current_bars = {
            (desc, heir if phase == old else phase): bar for (desc, phase), bar in self.current_bars.items()
        }
        self.bar_cache.clear()

    def model_for(self, rank: RankState, slot: str, phase: str, model: str | None) -> str | None:
        """Count the rank's begins of ``slot`` and say whose phase this is; "nth" follows ``_nth_model``."""
        count = rank.begun.get(slot, 0) + 1
        rank.begun[slot] = count
        if phase == "kv-cache" and count == 1 and rank.begun.get(GRAPH_SLOT) and self.framework() == "vllm":
            # vLLM 0.21 on profiles its CUDA graphs' memory before it sizes the KV cache ("CUDA graph memory
            # profiling is enabled"): a capture before the rank's KV cache step was that profile's, and the capture
            # after it is the engine's own, the target's, not a draft's second (batch 60, the V2 model runner).
            rank.begun[GRAPH_SLOT] = 0
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
        if self.speculative is False:
            return "target"
        if phase == "load-weights":
            return "target" if count == 1 and "cuda-graph" not in rank.phases_seen else "draft"
        if count == 1:
            if self.framework() == "vllm":
                # vLLM loads a drafter inside the target's load_model, before the engine sizes its KV cache and
                # captures its graphs: those are the engine's (the target's), even in an excerpt that holds only the
                # drafter's load. The drafter's own captures have lines of their own (Begin(..., "draft")).
                return "target"
            loaded: set[str | None] = set(rank.models_loaded) or {
                key[1]
                for key, track in self.phases.items()
                if key[0] == "load-weights" and not track.provisional
            }
            return "draft" if loaded == {"draft"} else "target"
        return "draft"

    def begin(
        self,
        label: str,
        slot: str,
        key: PhaseKey,
        start: str | None,
        provisional: bool = False,
        rank: RankState | None = None,
        begun_at: str | None = None,
        progress: bool = True,
        awaits: str | None = None,
    ) -> None:
        """Open ``key`` in ``slot`` on rank ``label`` (``rank``: its state, when the caller holds it already);
        ``awaits``: the end line this begin names, where it is not the slot's usual one (Begin.awaits).

        A rank does one boot phase at a time: a phase still open on it ends where this one is known to have
        begun (``begun_at``, else ``start``), so a release that logs no end line for it (no `Init torch
        distributed ends`) does not leave it running to the end of the log."""
        if key[0] == "init-distributed" and self.word_bar_phases and not provisional:
            self._drop_word_bar_phases()
        if rank is None:
            rank = self.rank_state(label)
        if not label and self.world_labels:
            # Until a tag names them, ranks read from untagged records' words may be the untagged process itself (a
            # single process, whose world is larger than the log): their step ends where its next one begins.
            for world_label in self.world_labels:
                world_rank = self.ranks.get(world_label)
                if world_rank is not None and world_rank.open:
                    self._end_previous(world_label, world_rank, key[0], begun_at or start)
        if rank.open:
            self._end_previous(label, rank, key[0], begun_at or start)
            replaced = rank.open.get(slot)
            if replaced is not None and replaced != key:
                # The same step of another model in the slot (the V2 runner's target capture, then its
                # speculator's): the first ran until the second began, as a phase of another name would.
                self._end_span(label, replaced, begun_at or start)
        track = self.track(key, slot, provisional, begins=True)
        track.spans[label] = RankSpan(start=start)
        track.begun_seq = self.clock.seq
        if awaits is not None:
            track.awaits = awaits
        rank.open[slot] = key
        rank.unfinished = None
        self.touch(rank, progress)

    def _drop_word_bar_phases(self) -> None:
        """A boot initialises torch.distributed before anything else it logs: a phase that only a bar of no engine's
        kind opened before that was another program's. A training framework loads its own models through
        transformers (`Loading checkpoint shards`), then starts the engine that serves its rollouts (verl's SGLang
        inside a Ray actor, batch 45). Its bars stay in the report, as no phase's."""
        for key, label, slot in self.word_bar_phases:
            track = self.phases.get(key)
            if track is None or not track.provisional:
                continue  # a record of this boot named the phase: it was the boot's own
            self._retire_phase(key, None)
            counted = self.ranks.get(label)
            if counted is not None and counted.begun.get(slot, 0) > 0:
                # the load the bar counted was not this rank's first: the engine's own load still is
                counted.begun[slot] -= 1
                if not counted.begun[slot] and key[1] is not None:
                    counted.models_loaded.discard(key[1])
            if key in self.untagged_bar_phases:
                self.untagged_bar_phases.remove(key)
        self.word_bar_phases.clear()

    def _end_previous(self, label: str, rank: RankState, phase: str, at: str | None) -> None:
        """End the rank's open phases of other names at ``at`` (variants of one phase, SGLang's decode and
        prefill graphs, may run at once); the end is inferred, and said so."""
        for other_slot, other_key in list(rank.open.items()):
            if other_key[0] == phase or self.phases[other_key].background:
                continue
            del rank.open[other_slot]
            self._end_span(label, other_key, at)

    def _end_span(self, label: str, key: PhaseKey, at: str | None) -> None:
        """End rank ``label``'s span of ``key`` at ``at`` when it is still open; the end is inferred."""
        track = self.phases.get(key)
        span = track.spans.get(label) if track is not None else None
        if span is not None and span.end is None and at is not None:
            span.end = at
            span.end_inferred = True

    def end(
        self,
        record: Record,
        rank: RankState,
        slot: str,
        phase: str,
        model: str | None,
        variant: str | None,
        elapsed_s: float | None,
    ) -> PhaseKey:
        """Close ``slot`` on the record's rank (``rank``: its state); when its begin was never logged, open it
        implicitly: ``phase`` of ``model`` (as ``model_for`` reads it), ``variant``. Returns the phase closed."""
        opened = rank.open.pop(slot, None)
        span = None
        key: PhaseKey
        if opened is not None:
            key = opened
            track = self.phases[key]
            track.provisional = False  # a record closed it: no longer a guess
            span = track.spans.get(record.rank)
        if span is None:
            start = self._implicit_start(record, rank, elapsed_s)
            if opened is None and rank.open and record.timestamp is not None:
                start = self._end_open_before(record, rank, phase, start, elapsed_s is not None)
            key = (phase, self.model_for(rank, slot, phase, model), variant)
            new = key not in self.phases
            guessed = not new and self.phases[key].provisional  # its span so far a bar's guess
            track = self.track(key, slot)
            if new or record.rank in track.spans:
                # The phase's first span, or the rank's second run of the step (a second capture), makes it the
                # newest; a late rank's end of a step the others had left (the eighth rank's `Init torch distributed
                # ends` after seven began loading) is no step begun later.
                track.begun_seq = self.clock.seq
            if (
                new
                and start is not None
                and start == record.timestamp
                and stamp_before(start, self.last_phase_end)
            ):
                # An end relayed late (Ray flushes a worker's deduplicated lines after later ones): the phase ended
                # before the boot's last phase did, so it ran before the phases that began after its end.
                self._place_before_later(track, start)
            elif guessed and start is not None and list(track.spans) == [record.rank]:
                # The rank's step opened by its bar alone, which came before the rank's other steps' lines (Ray
                # prints a worker's bars before its lines: the capture's bar, then the load's and the KV cache's
                # records, then the capture's end): the step took place where its end says it did, after them.
                self._place_after_earlier(track, start)
            span = RankSpan(start=start)
            track.spans[record.rank] = span
        span.end = record.timestamp
        span.elapsed_s = elapsed_s
        if record.timestamp is not None:
            rank.last_end = record.timestamp
            self.last_phase_end = record.timestamp
        self.touch(rank)
        return key

    def end_on_workers(self, record: Record, slot: str) -> bool:
        """Close ``slot`` on every other rank it is open on, at the record (logged by the engine's process for its
        workers); whether any was. The record's own rank counts the phase as begun, so a later line of the
        same step does not open it there."""
        closed = self.close_on_others(record, slot)
        if closed:
            rank = self.rank_state(record.rank)
            rank.begun[slot] = rank.begun.get(slot, 0) + 1
            if record.timestamp is not None:
                rank.last_end = self.last_phase_end = record.timestamp
            self.touch(rank)
        return closed

    def close_on_others(self, record: Record, slot: str) -> bool:
        """Close ``slot`` at the record on every rank but the record's own where it is open; whether any was."""
        closed = False
        at = record.timestamp
        for label, other in self.ranks.items():
            key = other.open.get(slot) if label != record.rank else None
            if key is None:
                continue
            del other.open[slot]
            span = self.phases[key].spans.get(label)
            if span is not None and span.end is None:
                span.end = at
            if at is not None:
                other.last_end = at
            closed = True
        return closed

    def _implicit_start(self, record: Record, rank: RankState, elapsed_s: float | None) -> str | None:
        """Where a phase whose begin was never logged started: its stated duration before its end, else where the
        rank's (or the boot's) last phase ended, but never after its own end (a line relayed late ends a phase
        that was over before the last one was: its start is not in the log)."""
        stamp = record.timestamp
        if stamp is not None and elapsed_s is not None:
            return shift_timestamp(stamp, -elapsed_s)
        start = rank.last_end or self.last_phase_end or stamp
        if stamp_before(stamp, start):
            return stamp
        return start

    def _end_open_before(
        self, record: Record, rank: RankState, phase: str, start: str | None, stated: bool
    ) -> str | None:
        """The start of a step the rank ends without having logged its begin, while a step of another name is open
        on it (tpu-inference logs no `Loading weights took`, only the KV cache's `GPU KV cache size` after the load):
        the rank does one step at a time, so the open step ran until this one began. That is ``start`` where it is
        stated (the step's stated duration before its end); the rank's last end is no start here, the open step having
        begun since, so the log says only this end, the step's first record. The open step's end is inferred there."""
        open_starts = [
            span.start
            for key in rank.open.values()
            if key[0] != phase and not self.phases[key].background
            for span in (self.phases[key].spans.get(record.rank),)
            if span is not None and span.end is None
        ]
        if not open_starts:
            return start
        begun_at = start if stated else record.timestamp
        if begun_at is None or any(stamp_before(begun_at, begun) for begun in open_starts):
            # Before the open step began (a stated start earlier than it, an end relayed late): the log does not say
            # when that one ended.
            return start
        self._end_previous(record.rank, rank, phase, begun_at)
        return begun_at

    def _place_after_earlier(self, track: PhaseTrack, start: str) -> None:
        """Order ``track`` after the phases now ordered after it when each of them began before ``start``, its
        new start."""
        after = [
            other for other in self.phases.values() if other.order > track.order and other.name != "ready"
        ]
        if not after or not all(
            other.spans and all(stamp_before(span.start, start) for span in other.spans.values())
            for other in after
        ):
            return
        place = max(other.order for other in after)
        for other in after:
            other.order -= 1
        track.order = place

    def _place_before_later(self, track: PhaseTrack, end: str) -> None:
        """Order ``track`` (new) before every phase that began after ``end``, its own end."""
        later = [
            other
            for other in self.phases.values()
            if other is not track
            and other.name != "ready"
            and any(stamp_before(end, span.start) for span in other.spans.values())
        ]
        if not later:
            return
        place = min(other.order for other in later)
        for other in self.phases.values():
            if other is not track and other.order >= place:
                other.order += 1
        track.order = place
        track.begun_seq = min(other.begun_seq for other in later)

    def mark_ready(self, record: Record) -> None:
        if self.ready_seq is not None and not self.served_requests:
            return
        # A ready line after requests were seen served (a client's request answered during SGLang's warm-up, before
        # its ready line) still says when the server came up; it was up from the first request on.
        self.served_requests = False
        start = self.last_phase_end or record.timestamp
        self.track(READY_KEY, "ready").spans[record.rank] = RankSpan(start=start, end=record.timestamp)
        self.touch(self.rank_state(record.rank))
        if self.ready_seq is None:
            self.ready_seq = self.clock.seq

    def mark_served(self, requests: bool = False) -> None:
        """An offline engine served a script's prompts (vLLM's `Processed prompts` bar), or a server ``requests`` (its
        throughput lines, with no ready line before them): it is up, but no line says when it came up, so the boot has
        no ready step whose end would be invented."""
        if self.ready_seq is None:
            if requests and self.http_up is not None:
                # Its HTTP server said it came up (vLLM's `Starting vLLM server on ...` and its routes), then it served:
                # it was up from then, where the ready line (uvicorn's, on stderr) is not in the log.
                rank, start, at = self.http_up
                self.track(READY_KEY, "ready").spans[rank] = RankSpan(start=start, end=at)
                self.up_then_served = True
            else:
                self.served_requests = requests
            self.clock.seq += 1
            self.ready_seq = self.clock.progress = self.clock.seq

    # ------------------------------------------------------------------------------------- where it stands

    def current_key(self) -> PhaseKey | None:
        """The newest phase of the boot (ready aside); once it has ended everywhere, a phase still running in the
        background (Begin.in_background), which the boot then waits for."""
        tracks = [track for track in self.phases.values() if track.name != "ready"]
        if not tracks:
            return None
        newest = max(tracks, key=lambda track: track.newness)
        if not newest.running():
            waited = [track for track in tracks if track.background and track.running()]
            if waited:
                return max(waited, key=lambda track: track.newness).key
        return newest.key

    def phase_still_open(self, key: PhaseKey | None) -> bool:
        if key is None:
            return True
        return self.phases[key].running()

    def where(self, record: Record) -> Where:
        """The phase open on the record's rank (else the boot's newest), for a failure logged there."""
        rank = self.ranks.get(record.rank)
        open_keys = list(rank.open.values()) if rank else []
        clock = self.clock
        if open_keys:
            newest = max(open_keys, key=lambda key: self.phases[key].newness)
            return Where(newest, False, clock.now, clock.seq, self.ready)
        if rank is not None and rank.unfinished is not None:
            # Its records had ended the phase, but not the engine's step (End.step_goes_on): still in it.
            return Where(rank.unfinished, False, clock.now, clock.seq, self.ready)
        phase = self.current_key()
        after = phase is not None and not self.phase_still_open(phase)
        return Where(phase, after, clock.now, clock.seq, self.ready)


def _is_lead_label(label: str) -> bool:
    # Not a rank read from an untagged record's words (the report names it): the tag of the rank that draws the bars.
    return all(number == 0 for number in rank_sort_key(label)[0]) and not label.startswith(WORLD_RANK_LABEL)


def _other_models(guessed: PhaseKey, named: PhaseKey) -> bool:
    """Whether a phase a bar opened on a guess and the phase a record names are of two models."""
    return guessed[1] is not None and named[1] is not None and guessed[1] != named[1]

"""What a boot record does to its boot: the action of the engine rule it matched
(ckptprof/engines/log_rules.py says what each can do), carried out.

Begin and End open and close phases on the record's rank, Configure reads the server's sizes and speculative
decoding (and restarts the boot: the reader's to do, before calling here), Ready marks the boot up, Capture keeps
a stated fact, Fail records the server's own word that the boot failed, Evidence only counts for its engine.
"""

from __future__ import annotations

import re

from ckptprof.bootlog.boot import Boot
from ckptprof.bootlog.parse import Record
from ckptprof.bootlog.reading import SIZE_KEYS, Reading
from ckptprof.bootlog.state import PhaseKey, PhaseTrack, RankState
from ckptprof.bootlog.timestamps import stamp_before
from ckptprof.engines import sglang_log
from ckptprof.engines.log_rules import Action, Begin, Capture, Configure, End, Evidence, Fail, Ready

_UNITS_PER_GIB = {"GiB": 1.0, "GB": 1e9 / 2**30, "MiB": 1 / 1024, "MB": 1e6 / 2**30}
_SPECULATIVE_RE = re.compile(r"speculative_(?:algorithm|config)=(None\b|'[^']*'|\"[^\"]*\"|\{|\w+)")
_DIGITS_RE = re.compile(r"\d{1,6}\b", re.ASCII)
# The served model as a configuration names it (vLLM's `non-default args: {'model': 'X'}` and its engine's `config:
# model='X'`, SGLang's `ServerArgs(model_path='X'`, a JSON dump's `"model": "X"`) or as vLLM's load begins (`Starting to
# load model X...`). Never a draft's (`speculative_draft_model_path=`, `'draft_model': `): a word character or a dot
# before "model" rules those out, and the first match of a line is the served model's, which comes first in each.
_MODEL_NAME_RE = re.compile(
    r"(?<![\w.])model(?:_path)?(?:='([^'\n]{1,300})'|': '([^'\n]{1,300})'|\": \"([^\"\n]{1,300})\")"
    r"|Starting to load model (\S{1,300}?)\.\.\."
)


def model_named(message: str) -> str | None:
    """The served model a configuration or a load's first record names, if it names one."""
    match = _MODEL_NAME_RE.search(message)
    if match is None:
        return None
    return next((group for group in match.groups() if group), None)


# One `name=seconds` of SGLang's startup timings, or a group of them (`cuda_graph={prefill=0.00, decode=1.22}`).
_TIMING_RE = re.compile(r"(\w{1,40})=(?:\{([^{}]{0,2000})\}|(\d{1,9}(?:\.\d{1,6})?))", re.ASCII)


def restarts(action: Action | None, boot: Boot, engine: str = "") -> bool:
    """Whether this record (a rule of ``engine``'s) is a new server's configuration: the boot so far was an
    earlier start.

    The boot so far made progress when it opened a phase, when a process crashed in it (a Python traceback, or an
    error whose own words name the step it failed in: SGLang's `Capture cuda graph failed`), or when it served (an
    excerpt that opens in a server's serving, cut above its steps): a log of a server that died before any phase
    record (a paste of its traceback alone, a crash in the first second) is a boot of its own, and the next server's
    configuration starts another one, not more of it. A bare death word is not enough: a launcher may print its
    failure before the server's own configuration line. A configuration of one engine after another
    engine's is another server's, whatever came between: one server is configured by one engine."""
    if not isinstance(action, Configure):
        return False
    if boot.configured_by and engine and engine != boot.configured_by:
        return True
    if not (boot.phases or boot.failures.traceback_seen or boot.failures.named_a_step() or boot.ready):
        return False
    return action.restart == "after-progress" or (action.restart == "after-ready" and boot.ready)


def apply_reading(boot: Boot, reading: Reading, record: Record) -> None:
    """Carry out the action of the rule ``reading`` matched, then count the rule's weight as evidence."""
    engine, rule = reading.engine, reading.rule
    action: Action | None = reading.action  # annotated: mypyc cannot infer it
    assert engine is not None and rule is not None
    if record.relayed:
        boot.relays_seen = True
    if isinstance(action, Begin):
        if boot.model_name is None and action.phase == "load-weights":
            boot.model_name = model_named(record.message)
        _begin(boot, action, record)
    elif isinstance(action, End):
        _end(boot, action, reading, record)
    elif isinstance(action, Configure):
        _configure(boot, record.message)
        boot.configured_by = boot.configured_by or engine.name
    elif isinstance(action, Ready):
        _ready(boot, action, engine.name, record)
    elif isinstance(action, Capture):
        _capture(boot, action, record)
    elif isinstance(action, Fail):
        failure = boot.failures.add(record, "death", record.message.strip(), boot.where(record))
        failure.phase, failure.step = None, action.step
    elif not isinstance(action, Evidence):  # pragma: no cover - the tables hold only the types above
        raise TypeError(f"unknown action {action!r}")
    # Counted after the action: a configuration line that restarts the boot is evidence for the new one.
    boot.evidence[engine.name] += rule.weight


def _begin(boot: Boot, action: Begin, record: Record) -> None:
    rank = boot.rank_state(record.rank)
    slot = action.slot
    if action.in_background and slot in rank.open:
        # The load carries on behind the next steps: those begin from here, and do not end it.
        boot.phases[rank.open[slot]].background = True
        if record.timestamp is not None:
            rank.last_end = record.timestamp
        return
    if action.unless_open and slot in rank.open:
        return
    if action.unless_going_on and _goes_on(boot, rank.unfinished, slot):
        return
    if action.unless_begun_anywhere:
        if (action.phase, action.model) in boot.steps_begun:
            return
    else:
        boot.steps_begun.add((action.phase, action.model))
    if record.relayed and stamp_before(record.timestamp, rank.last_end):
        # Ray flushes its deduplicated copies late, each with its own stamp: a begin stamped before the rank's last
        # end came before that end (vLLM 0.5's `Starting to load model` after the same worker's `Loading model
        # weights took`), and opens no second phase.
        return
    if record.relayed and _relays_the_open_step(boot, rank, slot, record):
        return
    key = (action.phase, boot.model_for(rank, slot, action.phase, action.model), action.variant)
    if action.again_variant is not None and rank.begun[slot] > 1 and boot.speculative is not False:
        key = (action.phase, key[1], action.again_variant)
    start = (rank.last_end or record.timestamp) if action.from_last_end else record.timestamp
    boot.record_phases += 1
    boot.begin(record.rank, slot, key, start, rank=rank, begun_at=record.timestamp, awaits=action.awaits)
    track = boot.phases[key]
    _count_record(track, action.one_rank_per_node)
    if action.in_background:
        track.background = True


def _relays_the_open_step(boot: Boot, rank: RankState, slot: str, record: Record) -> bool:
    """Whether a relayed begin is the rank's open step of ``slot`` arriving late: Ray flushes a deduplicated line
    after the worker's later ones, so vLLM 0.10's `Starting to load model` (23:27:29) can follow the same worker's
    `Loading model from scratch` (23:27:30). A begin stamped no later than the open span's start is that step, not a
    second load (which, with nothing said of speculation, would read as a draft's). Its earlier stamp is where the
    step began on that rank."""
    key = rank.open.get(slot)
    span = boot.phases[key].spans.get(record.rank) if key is not None else None
    if span is None or span.start is None or record.timestamp is None:
        return False
    if stamp_before(span.start, record.timestamp):
        return False
    if stamp_before(record.timestamp, span.start):
        span.start = record.timestamp
    return True


def _goes_on(boot: Boot, unfinished: PhaseKey | None, slot: str) -> bool:
    """Whether the rank's step of ``slot`` goes on after its phase's end record (End.step_goes_on)."""
    return unfinished is not None and boot.phases[unfinished].slot == slot


def _count_record(track: PhaseTrack, one_rank_per_node: bool) -> None:
    if one_rank_per_node:
        track.one_rank_records += 1
    else:
        track.every_rank_records += 1


def _end(boot: Boot, action: End, reading: Reading, record: Record) -> None:
    rank = boot.rank_state(record.rank)
    rank.unfinished = None
    begun = rank.begun.get(action.slot, 0)
    if begun > 0 and (action.only_first or action.only_if_open_or_new) and action.slot not in rank.open:
        return
    if (
        boot.relays_seen
        and begun > 0
        and action.slot not in rank.open
        and stamp_before(record.timestamp, rank.last_end)
        and _ended_late(boot, action, reading, record, rank)
    ):
        return
    if action.only_if_open or action.by_one_for_all:
        # Never opens the step: it ends where it is open (on every rank, for a line one rank logs for all).
        others = action.by_one_for_all and boot.close_on_others(record, action.slot)
        if action.slot not in rank.open:
            boot.record_phases += others
            return
    boot.record_phases += 1
    if action.for_every_rank and action.slot not in rank.open and boot.end_on_workers(record, action.slot):
        # The workers' phase, ended for them by the engine's process: not one more rank of it.
        return
    ended = boot.end(
        record, rank, action.slot, action.phase, reading.model, action.variant, reading.elapsed_s
    )
    track = boot.phases[ended]
    _count_record(track, action.one_rank_per_node)
    if record.relayed:
        track.folded_ends += record.relayed
    if action.step_goes_on:
        rank.unfinished = ended


def _ended_late(boot: Boot, action: End, reading: Reading, record: Record, rank: RankState) -> bool:
    """Whether the record is an end of the step the rank ended last, stamped inside that step's span: Ray relayed it
    late (a worker's `Loading weights took` at 23:47:57 after its `Model loading took` at 23:48:00), so it is no
    second run of the step. Read in the order the worker wrote them, this record ended the step and the later one
    did not: the rank's span ends here, with this record's stated seconds."""
    for track in boot.phases.values():
        span = track.spans.get(record.rank)
        if span is None or track.slot != action.slot or track.name != action.phase:
            continue
        if span.end is None or span.end != rank.last_end or stamp_before(record.timestamp, span.start):
            continue
        span.end = record.timestamp
        if reading.elapsed_s is not None:
            span.elapsed_s = reading.elapsed_s
        rank.last_end = record.timestamp
        return True
    return False


def _ready(boot: Boot, action: Ready, engine: str, record: Record) -> None:
    if action.warming:
        if boot.http_up is not None and boot.ready_seq is None and boot.framework() == engine:
            # The HTTP server's coming up is no longer the last thing that happened: not ready until the engine says.
            boot.clock.seq += 1
            boot.warming = True
    elif action.served:
        boot.mark_served(requests=action.requests)
    elif action.until_more:
        # The HTTP server is up, the engine may have more to say: up only if nothing happens after this.
        if boot.framework() == engine and boot.ready_seq is None and boot.http_up is None:
            boot.http_up = (record.rank, boot.last_phase_end or record.timestamp, record.timestamp)
            boot.http_up_seq = boot.clock.seq
    elif not action.when_leading or boot.framework() == engine:
        boot.mark_ready(record)


def _configure(boot: Boot, message: str) -> None:
    """The server's configuration: its sizes, whether it runs speculative decoding, DP attention."""
    if boot.model_name is None:
        boot.model_name = model_named(message)
    for key in SIZE_KEYS:
        if key not in boot.sizes and (size := int_arg(message, key)) is not None:
            boot.sizes[key] = size
    at = message.find("speculative_")  # a server_args line is kilobytes long: find before matching
    speculative = _SPECULATIVE_RE.search(message, at) if at >= 0 else None
    if speculative is not None:
        boot.speculative = speculative.group(1) != "None"
    if sglang_log.DP_ATTENTION in message:
        boot.dp_attention = True


def _capture(boot: Boot, action: Capture, record: Record) -> None:
    value = action.value
    match = action.pattern.search(record.message) if action.pattern is not None else None
    if match is not None:
        value = match.group(1)
    if value is None:
        return
    if action.field == "filesystem":
        boot.filesystem = value.rstrip(".")
    elif action.field == "prefetch":
        boot.prefetch = value
    elif action.field == "startup_timings" and action.step is not None:
        step, seconds = action.step, float(value)
        stated = boot.stated_by_rank.setdefault(step, {})
        kept = stated.get(record.rank, 0.0)
        stated[record.rank] = kept + seconds if action.adds else max(kept, seconds)
        boot.startup_timings[step] = round(max(stated.values()), 6)
        if action.also is not None and match is not None and match.lastindex == 2:
            boot.startup_timings[action.also] = float(match.group(2))
    elif action.field == "startup_timings":
        boot.startup_timings = startup_timings(value)
    elif action.field == "throughput_GiBps":
        unit = match.group(2) if match is not None and match.lastindex == 2 else "GiB"
        boot.throughput = round(float(value) * _UNITS_PER_GIB.get(unit or "GiB", 1.0), 4)
    else:
        boot.loader = value


def startup_timings(text: str) -> dict[str, float]:
    """SGLang's `load_weight=14.90, ..., cuda_graph={prefill=0.00, decode=1.22}, ...` as seconds by step, in its
    order; a group's steps under the group's name (``cuda_graph.decode``)."""
    timings: dict[str, float] = {}
    for name, group, seconds in _TIMING_RE.findall(text):
        if seconds:
            timings[name] = float(seconds)
            continue
        for inner, _, inner_seconds in _TIMING_RE.findall(group):
            if inner_seconds:
                timings[f"{name}.{inner}"] = float(inner_seconds)
    return timings


def int_arg(message: str, key: str) -> int | None:
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

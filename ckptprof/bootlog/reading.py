"""What a record's message says by itself, whatever the boot's state: which engine's rule it matches, what that
rule does with it, the model and the duration it names, and whether it may be a failure.

Pure: the same message always reads the same, so the reader keeps the readings of the last few messages (ranks
print the same message one after another). The engines' tables are the data it reads with: ckptprof/engines/
sglang_log.py and vllm_log.py, one row per line a release writes (log_rules.py there says what a row can do).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import NamedTuple

from ckptprof.bootlog.digit_blind import (
    DIGITS_TO_ZERO,
    digit_word_parts,
    digit_words_pattern,
    pattern_is_digit_blind,
    words_are_digit_free,
)
from ckptprof.bootlog.failures import FAILURE_GATE_WORDS, FRAME_NEEDLE
from ckptprof.bootlog.parse import needle_pattern
from ckptprof.engines import sglang_log, vllm_log
from ckptprof.engines.log_rules import Action, Begin, End, EngineLog, FrameRule, Model, Rule

# Every engine whose logs the reader knows: a new engine is one more entry (its table in ckptprof/engines/).
ENGINES: tuple[EngineLog, ...] = (sglang_log.LOG, vllm_log.LOG)
ENGINE_NAMES: tuple[str, ...] = tuple(engine.name for engine in ENGINES)

# ASCII-only digits with bounded repeats: float() must stay cheap and finite on hostile input.
_ELAPSED_RE = re.compile(
    r"(?:elapsed=|Time elapsed: |took |finished in |and )(\d{1,9}(?:\.\d{1,6})?) ?(?:s\b|secs?\b|seconds)",
    re.ASCII,
)


# What a record that names its own rank says of it ("rank 1 in world size 2 is assigned as DP rank 0, PP rank 0, PCP
# rank 0, TP rank 1, EP rank 1"): the global rank, the world's size, and the group ranks it states.
_GROUP_RANK_RE = re.compile(r"\b([A-Z]{2,3}) rank (\d{1,6})\b", re.ASCII)


class NamedRank(NamedTuple):
    rank: int
    world: int
    groups: tuple[tuple[str, int], ...]  # ("TP", 1), ("PP", 0), ...: empty where the record states none


class Reading(NamedTuple):
    frame: bool  # a traceback's "File ..." line
    engine: EngineLog | None
    rule: Rule | None
    action: Action | None  # the rule's, with the variant the message names
    model: Model  # an End's model, "draft" when the message names a draft architecture
    elapsed_s: float | None  # the time an End's message reports
    may_fail: bool  # one of the failure checks' words is in it (the level is the caller's to add)
    named_rank: NamedRank | None = None  # the global rank the record names as its own (Rule.pattern's groups)


def read_message(message: str, engines: tuple[EngineLog, ...]) -> Reading:
    """The message read with ``engines``' tables, the first engine's first: the first rule that matches wins.

    Read once per shape (digit_blind.py): a message that differs from one read before only in its numbers
    (`Load weight end. ... avail mem=89.06 GB` on each rank) reads as that one did, but for what its numbers say."""
    shapes = _shapes_for(engines)
    kept = shapes.words
    if kept is None:
        return _read_message(message, engines)
    for part in shapes.digit_word_parts:
        # Where a word with a digit could stand (its longest part without one first: cheaper than the pattern).
        if (
            part in message
            and shapes.digit_words is not None
            and shapes.digit_words.search(message) is not None
        ):
            return _read_message(message, engines)
    # In bytes: their translate is a table lookup per byte, str's a dictionary's (2 us a message of the real corpus).
    shape = message.encode("utf-8", "surrogatepass").translate(DIGITS_TO_ZERO)
    reading = kept.get(shape)
    if reading is None:
        reading = _read_message(message, engines)
        rule = reading.rule
        # A rule whose pattern reads groups (a rank, a variant) reads them from the message's own digits: not kept.
        if rule is None or rule.pattern is None or not rule.pattern.groupindex:
            if len(kept) >= SHAPES_KEPT:
                kept.clear()
            kept[shape] = reading
        return reading
    if isinstance(reading.action, End):
        return reading._replace(elapsed_s=stated_seconds(message))  # the duration is the message's own number
    return reading


# Shapes kept per table, cleared when full: enough for what ranks and a serving loop repeat, too few to carry over
# from one copy of the real corpus to the next in the benchmark's file, where a gain would come from the file's
# repetition and not from the log (16 MiB: 4,319 full reads in the first copy, 4,429 in the second; 4,096 kept would
# read 3,279 and 253).
SHAPES_KEPT = 128


class _Shapes(NamedTuple):
    engines: tuple[EngineLog, ...]  # kept so that the id the entry is filed under stays this tuple's
    # shape -> reading; None where some pattern of the tables depends on digits' values (never read by shape)
    words: dict[bytes, Reading] | None
    # the tables' words that hold a digit (digit_blind.digit_words_pattern), and the longest run without a digit of each
    digit_words: re.Pattern[str] | None
    digit_word_parts: tuple[str, ...]


_SHAPES: dict[int, _Shapes] = {}


def _shapes_for(engines: tuple[EngineLog, ...]) -> _Shapes:
    entry = _SHAPES.get(id(engines))
    if entry is None or entry.engines is not engines:
        needles = [rule.needle for engine in engines for rule in engine.records]
        patterns = [rule.pattern for engine in engines for rule in engine.records if rule.pattern is not None]
        patterns += [engine.draft_pattern for engine in engines if engine.draft_pattern is not None]
        blind = all(pattern_is_digit_blind(pattern) for pattern in patterns)
        entry = _SHAPES[id(engines)] = _Shapes(
            engines, {} if blind else None, digit_words_pattern(needles), digit_word_parts(needles)
        )
    return entry


def _read_message(message: str, engines: tuple[EngineLog, ...]) -> Reading:
    if FRAME_NEEDLE in message and message.lstrip().startswith(FRAME_NEEDLE):
        # A frame is read as one (BootLogAnalyzer._on_frame), never through the failure gate: not asked.
        return Reading(True, None, None, None, None, None, False)
    may_fail = may_fail_words(message)
    for engine in engines:
        rule = _first_rule(engine, message)
        if rule is None:
            continue
        action = rule.action
        named_rank = None
        if rule.pattern is not None and isinstance(action, (Begin, End)):
            match = rule.pattern.search(
                message
            )  # _first_rule matched it: the variant and the rank read its groups
            action = _with_variant(action, match)
            if "rank" in rule.pattern.groupindex:
                named_rank = _named_rank(match, message)
        model: Model = None
        elapsed_s = None
        if isinstance(action, End):
            model = action.model
            if engine.draft_pattern is not None and action.phase == "load-weights":
                model = "draft" if engine.draft_pattern.search(message) else model
            elapsed_s = stated_seconds(message)
        return Reading(False, engine, rule, action, model, elapsed_s, may_fail, named_rank)
    return Reading(False, None, None, None, None, None, may_fail)


def _named_rank(match: re.Match[str] | None, message: str) -> NamedRank | None:
    """The global rank a record names as its own (its rule's match), and the group ranks it states after it."""
    if match is None or match.group("rank") is None:
        return None
    world = match.groupdict().get("world")
    groups = tuple((kind, int(number)) for kind, number in _GROUP_RANK_RE.findall(message, match.end()))
    return NamedRank(int(match.group("rank")), int(world) if world else 0, groups)


class _WordGate:
    """Whether one of some words is in a message: those that start with a capital by one trie pattern (they rarely
    start a position), the others by ``in``. A pattern whose words start with small letters tries a branch at most
    positions of a message; split this way the failure gate took a quarter less time on the real corpus's messages,
    and an engine's needles a third of what trying its rules in order cost."""

    __slots__ = ("capitals", "small")

    def __init__(self, words: Iterable[str]) -> None:
        unique = dict.fromkeys(words)
        capitals = [word for word in unique if not word[0].islower()]
        self.capitals = re.compile(needle_pattern(capitals).pattern.decode() if capitals else r"(?!)")
        self.small = tuple(word for word in unique if word[0].islower())

    def passes(self, message: str) -> bool:
        if self.capitals.search(message) is not None:
            return True
        for word in self.small:  # noqa: SIM110 - any() would build a generator for each message
            if word in message:
                return True
        return False


_FAILURE_GATE = _WordGate(FAILURE_GATE_WORDS)
# A message's shape (digit_blind.py) is read for a failure as the message is only if no word of the gate, nor a
# frame's needle, holds a digit.
if not words_are_digit_free([*FAILURE_GATE_WORDS, FRAME_NEEDLE]):  # pragma: no cover - see above
    raise ValueError("a failure gate word holds a digit: messages can no longer be read by their shape")


def may_fail_words(message: str) -> bool:
    """Whether one of failures.FAILURE_GATE_WORDS is in ``message`` (FAILURE_GATE_RE would find it)."""
    return _FAILURE_GATE.passes(message)


class _NeedleGate(_WordGate):
    """Whether some rule's needle of one engine is in a message, asked before the rules are tried in order: most
    messages read hold none (a traceback's lines, a failure's words)."""

    __slots__ = ("engine",)

    def __init__(self, engine: EngineLog) -> None:
        super().__init__(rule.needle for rule in engine.records)
        self.engine = engine


_GATES: dict[int, _NeedleGate] = {id(engine): _NeedleGate(engine) for engine in ENGINES}


def _first_rule(engine: EngineLog, message: str) -> Rule | None:
    gate = _GATES.get(id(engine))
    if gate is None or gate.engine is not engine:  # an engine built elsewhere (a test's): kept while it lives
        gate = _GATES[id(engine)] = _NeedleGate(engine)
    if not gate.passes(message):
        return None
    for rule in engine.records:
        if rule.needle in message and (rule.pattern is None or rule.pattern.search(message) is not None):
            return rule
    return None


def _with_variant(action: Begin | End, match: re.Match[str] | None) -> Begin | End:
    """A patterned rule's action for this record: its variant (and so its slot) read from the rule's match."""
    variant = match.groupdict().get("variant") if match is not None else None
    if not variant:
        return action
    variant = variant.lower()
    return replace(action, slot=f"{action.slot}-{variant}", variant=variant)


def stated_seconds(message: str) -> float | None:
    """The duration an end record states ("took 5.38 seconds", "elapsed=20.02 s"), if it states one."""
    match = _ELAPSED_RE.search(message)
    return float(match.group(1)) if match else None


# The tables a record is read with, by its style: a record in one engine's prefix style is read by that engine's
# table only; an unprefixed line ("plain <leader>") by the table of whichever engine leads the evidence so far,
# then the others'.
_BY_STYLE = {engine.name: (engine,) for engine in ENGINES}
_LED_BY = {
    leader: tuple(sorted(ENGINES, key=lambda engine: engine.name != leader))
    for leader in (*_BY_STYLE, "unknown")
}
TABLES_FOR_STYLE: dict[str, tuple[EngineLog, ...]] = {
    **_BY_STYLE,
    **{f"plain {leader}": engines for leader, engines in _LED_BY.items()},
}

# (engine, module path) pairs: a traceback frame in one is evidence of the engine.
MODULE_PATHS: tuple[tuple[str, str], ...] = tuple(
    (engine.name, path) for engine in ENGINES for path in engine.module_paths
)
# The frame tables a traceback is read with once the framework is known (every engine's while it is not).
FRAMES_READ_BY: dict[str, tuple[FrameRule, ...]] = {
    name: tuple(
        frame for engine in ENGINES if engine.name == name or name == "unknown" for frame in engine.frames
    )
    for name in (*ENGINE_NAMES, "unknown")
}
# The error words (EngineLog.error_words) an error line is read with, as the frame tables are chosen.
ERROR_WORDS_READ_BY: dict[str, tuple[FrameRule, ...]] = {
    name: tuple(
        words
        for engine in ENGINES
        if engine.name == name or name == "unknown"
        for words in engine.error_words
    )
    for name in (*ENGINE_NAMES, "unknown")
}
# server_args keys read as sizes: every engine's, and the number of nodes.
SIZE_KEYS: list[str] = sorted(
    {key for engine in ENGINES for keys in engine.size_keys.values() for key in keys} | {"nnodes"}
)

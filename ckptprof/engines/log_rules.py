"""The vocabulary of the engines' boot-log tables: what a log record means to the boot-log reader.

Each engine's log module (sglang_log.py, vllm_log.py) lists ``Rule(needle, action)`` pairs; the reader
(ckptprof/bootlog) finds the first rule whose needle the record's message contains and carries out its action.
Actions are plain data, so a new release's line is one more row in one table and never new code. Like the rest
of engines/, this imports nothing else from ckptprof.

Models: ``"nth"`` is the n-th rule, target for a rank's first model of this kind and draft for the next ones
when the server runs speculative decoding; ``"target"`` and ``"draft"`` are fixed; None for phases that belong to
no model (torch.distributed, ready).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

Model: TypeAlias = Literal["nth", "target", "draft"] | None


@dataclass(frozen=True)
class Begin:
    """A phase begins on the record's rank."""

    slot: str  # which begin/end pair: the end that closes it names the same slot
    phase: str
    model: Model
    variant: str | None = None
    # The record says the phase has already begun: it began when the rank's previous phase ended.
    from_last_end: bool = False
    # Begin only when the slot is not already open on the rank (a phase reported by several lines).
    unless_open: bool = False
    # Nor when the rank's step of the slot goes on after its phase's end record (End.step_goes_on): a line logged later
    # in the same step (vLLM's drafter sharing the target's embedding after its `Loading weights took`).
    unless_going_on: bool = False
    # Only where no rank of the boot has logged a begin record of this model's phase that is the step's own (one without
    # this flag): a line logged inside a step by every rank, whose begin record only one rank logs (vLLM's drafter
    # sharing the target's embedding on each worker, where rank 0 alone logs `Loading drafter model...`). It says the
    # step is under way where its begin lies above a cut, and counts no rank that logged none of the step's own
    # records where they are in the log.
    unless_begun_anywhere: bool = False
    # The phase open in the slot goes on in the background from here, beside the phases that begin after it, until its
    # own end record (SGLang 0.5.23's --startup-weight-load-mode=overlap: the checkpoint is read while the KV pool is
    # built and the CUDA graphs are captured, and `Load weight end. Committed real weights after CUDA graph capture`
    # ends the load). Opens the phase when it is not open (an excerpt that starts here).
    in_background: bool = False
    # The line that ends the phase this begins, as the report names it while it is awaited, where it is not the slot's
    # usual one (EngineLog.end_markers): a release that renamed the pair (SGLang 0.5.21's `Init parallel begin/ends`).
    awaits: str | None = None
    # A rank's second begin of the slot, in a server that may run a draft, is this variant's phase, not the first one
    # begun again: SGLang before 0.5.21 logs `Init torch distributed begin/ends` once more for the draft's model runner
    # (a step of its own, after the target's graphs), which would otherwise overwrite the target's step on each rank.
    again_variant: str | None = None
    # Some releases log it from one rank per node only (vLLM's info_once from 0.11.1; the engine's own process, once
    # for all its workers): a phase only such records showed says nothing of the ranks that did not log it.
    one_rank_per_node: bool = False


@dataclass(frozen=True)
class End:
    """A phase ends on the record's rank; when its begin was never logged it is opened implicitly."""

    slot: str
    phase: str
    model: Model
    variant: str | None = None
    # Only when the slot is open or the rank never began one (a second, coarser line closing the same phase).
    only_if_open_or_new: bool = False
    # Only a rank's first phase of this slot, or one a begin record opened (a line that every later engine step
    # prints again).
    only_first: bool = False
    # Only when the slot is open on the rank, never opened implicitly: the end of a step whose begin some releases
    # log at DEBUG only (vLLM 0.11's world init), where opening it would invent the step's start.
    only_if_open: bool = False
    # Logged by one rank for all after a collective step (vLLM's info_once, whose scope is the node's first rank): the
    # step ends on every rank it is open on, the logging rank's own as well.
    by_one_for_all: bool = False
    # Logged once, by the engine's own process, for all its workers: the phase ends on every rank it is open on.
    for_every_rank: bool = False
    # The phase's work is done but the engine's step goes on until the rank's next phase record (vLLM V1's weights
    # are read at `Loading weights took`; its load_model returns at `Model loading took`): a crash between the two
    # is in this phase.
    step_goes_on: bool = False
    # As Begin.one_rank_per_node.
    one_rank_per_node: bool = False


@dataclass(frozen=True)
class Configure:
    """The server's configuration: sizes, speculative decoding, and a restart when boot progress came before."""

    restart: Literal["after-progress", "after-ready", "never"] = "after-progress"


@dataclass(frozen=True)
class Ready:
    """The server is serving. ``when_leading``: only when this engine leads the evidence (a shared uvicorn line).
    ``until_more``: the HTTP server is up but the engine has more to say (SGLang's warm-up): ready only when nothing
    else happens after it, and a failure after it still fails the boot."""

    when_leading: bool = False
    until_more: bool = False
    # An offline engine serving a script's prompts (vLLM's `LLM(...)`): up, but no line says when it came up, so no
    # ready step is reported (its end would be invented).
    served: bool = False
    # ...served as a server serves, to requests (its throughput lines), not as a script's `LLM(...)` does.
    requests: bool = False
    # A line a busy server writes for hours: read only while the boot is not ready yet, and left out of the pre-filter's
    # search (bootlog/prefilter.UNTIL_READY_NEEDLES).
    until_ready: bool = False
    # Not ready yet: the engine's own warm-up request is under way after its HTTP server came up (SGLang asks for the
    # model's information, then generates a few tokens, and says ready only once they came back).
    warming: bool = False


@dataclass(frozen=True)
class Capture:
    """A fact worth reporting, read from the record with ``pattern`` (group 1): ``field`` names it."""

    field: Literal["filesystem", "throughput_GiBps", "loader", "prefetch", "startup_timings"]
    pattern: re.Pattern[str] | None = None
    value: str | None = None  # a fixed value (a loader's name), when the line itself is the fact
    # For "startup_timings": the step whose seconds the line states (vLLM states one step a line), kept under this
    # name; None for SGLang's one line of every step. ``adds``: each line states one more part of the step on its
    # rank (vLLM's "torch.compile took", one line per compile), not the step's total so far. Ranks state their own:
    # the slowest rank's is kept.
    step: str | None = None
    adds: bool = False
    # The step that the pattern's second group states, where it matched one (vLLM's init line's "(compilation: N s)").
    also: str | None = None


@dataclass(frozen=True)
class Fail:
    """The server says the boot failed, in its own words; ``step`` is what it was doing."""

    step: str


@dataclass(frozen=True)
class Evidence:
    """Only says which engine wrote the log."""


Action: TypeAlias = Begin | End | Configure | Ready | Capture | Fail | Evidence


@dataclass(frozen=True)
class Rule:
    needle: str
    action: Action
    # How strongly the line says which engine wrote the log.
    weight: int = 1
    # For a line whose words vary (SGLang 0.5.x's "Capture target decode CUDA graph begin", "... verify NPU graph
    # ..."): the rule applies only when this matches too, and a ``variant`` group names the phase's variant
    # (the slot becomes "<slot>-<variant>", so each variant has its own begin/end pair). ``rank`` and ``world`` groups
    # say the record names its own global rank in a world of that size (vLLM's `world_size=2 rank=1 ...`): an untagged
    # record of a world of several ranks is that rank's, not the untagged process's (reading.NamedRank).
    pattern: re.Pattern[str] | None = None


@dataclass(frozen=True)
class FrameRule:
    """A traceback frame (``File "...", line N, in func``) that tells what the crashed process was doing.

    ``needle`` is searched in the frame line (path and function name). ``phase`` is the boot phase that frame
    belongs to (None: it only says which model); ``model`` the model (None: it does not say); ``step`` words
    for the report when they say more than the phase's name.
    """

    needle: str
    phase: str | None
    model: Literal["target", "draft"] | None
    step: str | None  # words finer than the phase's own ("memory profiling"), or None
    # The needle names a whole function: it does not match where a longer name goes on from it. Most needles are
    # meant as prefixes too (`in load_model` also finds `load_model_with_memory_saver`, the same step).
    whole_name: bool = False

    @property
    def names_a_path(self) -> bool:
        """Whether the needle is a module's path (`model_loader/`, `cuda_graph_runner.py`), not a function's name: a
        module's helpers can be called from another step's function (a fork's `model_loader/tiered_moe_kv.py` sizing
        the KV cache under `_initialize_kv_caches`), so such a frame does not overrule a function's."""
        return self.needle.endswith(("/", ".py"))


@dataclass(frozen=True)
class EngineLog:
    """What one engine writes in its boot logs: its records, the end lines a user would grep for, its traceback
    frames, the sizes its configuration states, and the paths and process names that give it away."""

    name: str
    title: str
    records: tuple[Rule, ...]
    # slot -> the line a user would grep for when the phase does not end
    end_markers: dict[str, str]
    frames: tuple[FrameRule, ...] = ()
    # Words of an error the engine raises itself that say which step failed (SGLang's graph runners: `Capture cuda
    # graph failed: ...`), read from the error line like a frame's words when no frame of its traceback named a
    # phase: a pasted tail may hold the error alone.
    error_words: tuple[FrameRule, ...] = ()
    # server_args keys that give the world size
    size_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # A load record that names a draft architecture belongs to the draft, whatever the n-th rule says.
    draft_pattern: re.Pattern[str] | None = None
    # Where the engine's own modules live: a traceback frame in one of them is evidence of the engine (weighed
    # after its records and prefixes, which a paste of a traceback alone does not hold).
    module_paths: tuple[str, ...] = ()
    # The names the engine gives its processes in line tags ("(Worker_TP0 pid=1) "): evidence too, weighed last.
    process_tag: re.Pattern[bytes] | None = None
    # The prefix of its own records where no other engine's prefix looks the same (SGLang's "[date time TP1] "),
    # weighed last beside the process names: a log whose messages no table knows is still the engine's. It starts
    # with the line break before the line and is searched in the block with one put before its first line: a
    # literal first byte lets the regex engine jump from line to line ((?m)^ tries every position, 3 times slower).
    record_prefix: re.Pattern[bytes] | None = None
    # Other engines whose loggers write inside this engine's processes, in their own form (SGLang before 0.4
    # imported vLLM's modules, and vLLM's logger printed its year-less records among SGLang's): a line in one of
    # their forms may be this engine's boot's; a line in any other engine's form is another server's.
    imported_loggers: tuple[str, ...] = ()
    # The steps a draft runs in its own worker, whose traceback frames then name it (SGLang's EAGLEWorker builds the
    # draft's model runner, pool and graphs; vLLM's drafter loads in spec_decode/ but shares the target's KV cache and
    # graph capture): a whole traceback of one of these steps with no draft frame is the target's.
    draft_framed_steps: tuple[str, ...] = ()

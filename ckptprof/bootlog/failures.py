"""What a failing server writes: Python tracebacks and their error lines, the words of a dying process, and the
gate that lets the rest of the log past in one C-level scan. Pure functions on text, and each boot's FailureTracker (boot.py holds one per boot)."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ckptprof.bootlog.parse import Record
from ckptprof.bootlog.words import PhaseKey
from ckptprof.engines.log_rules import FrameRule

# The first failures are usually the cause and the last ones the verdict: both ends are kept, this many in all.
MAX_FAILURES_KEPT = 256

# Lines that say something failed, besides the engines' own records.
FAILURE_NEEDLES: tuple[str, ...] = (
    "Traceback",
    "Error",
    "Exception",
    # The other class names an error line may end in (EXCEPTION_LINE_RE): `KeyboardInterrupt: terminated` closes the
    # traceback of an API server that vLLM stopped (batch 42), `SystemExit: 1` a process that exited.
    "Interrupt",
    "Exit",
    "Failure",
    "is dead",
    "sigquit",
    "failed",  # "unexpectedly failed", "initialization failed", "failed to start": is_death tells them apart
    "Killed",
    "Fatal Python error",
    "CUDA error",
    "Failed: Cuda error",
    "rocBLAS error",
    "Memory access fault by GPU",
    "ERROR ",
    "CRITICAL ",
    "During handling of the above exception",
    "The above exception was the direct cause",
)
FRAME_NEEDLE = 'File "'
# IPython's rendering of a frame (a notebook's error output, batch 51): `File /path/x.py:308, in Worker.f(self, n)`,
# coloured in a terminal or a notebook (`File \x1b[0;32m/path...`). parse.parse_record writes it as Python would.
IPYTHON_FRAME_NEEDLES = ("File /", "File \x1b[")
# A traceback's first line, without its last words: a paste copied from a screenshot by OCR reads them as "cal1
# last" (sglang#21670), and nothing but Python's header starts so.
TRACEBACK_START = "Traceback (most recent "
# Frames of Python's own helper processes, whatever the engine: a traceback through one is that helper's (the
# resource tracker that cleans shared memory complains at interpreter exit), not the server's failure.
HELPER_FRAMES: tuple[str, ...] = ("multiprocessing/resource_tracker.py",)

# A raised exception's line: a class named ...Error, ...Exception (and the bare ``Exception`` of ``raise
# Exception(...)``, SGLang's "Capture cuda graph failed"), ...Exit, ...Interrupt or ...Failure, then its message.
EXCEPTION_LINE_RE = re.compile(
    r"(?:\[rank\d{1,6}\]: ?)?(?:(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure)|Exception)"
    r"(?::\s.*|:?\s*$)",
    re.ASCII,
)
# An error line whose class ends in none of those words, named with its module as Python prints it
# (`torch._dynamo.exc.Unsupported: Operator does not support running with fake tensors`): read as the error line only
# while a traceback on that rank awaits one, where nothing else is a dotted name and a colon.
QUALIFIED_EXCEPTION_LINE_RE = re.compile(
    r"(?:\[rank\d{1,6}\]: ?)?(?:[A-Za-z_]\w*\.)+[A-Z]\w*(?::\s.*|:?\s*$)", re.ASCII
)
# SGLang's processes log their fatal exception as `Scheduler hit an exception: Traceback ...` (so do its data-parallel
# controller, tokenizer and detokenizer managers), then send their parent SIGQUIT: the process is done, whatever other
# ranks log after it. vLLM's `WorkerProc hit an exception.` (its traceback on the lines after) is a failed call the
# worker survives.
EXITED_WORDS = " hit an exception: " + TRACEBACK_START
# Python's words above a traceback it printed and ignored (3.8-3.12 "Exception ignored in: <...>", 3.13 "Exception
# ignored while ..."): sys.unraisablehook's, for an exception raised where nothing could catch it.
IGNORED_WORDS = "Exception ignored "
# asyncio's word on a task or future whose exception no one awaited, logged when it is collected: "Task exception was
# never retrieved", then "future: <Task finished ... exception=...>" above the traceback. No one was stopped by it (a
# V0 client's output loops, after their engine had died: batch 24's Kubernetes pod).
UNRETRIEVED_FUTURE = "future: <"
# SGLang's retry() prints the traceback of a try that failed, then says it will try again (srt/utils/common.py:
# "retry() failed once (0th try, maximum 2 retries). Will delay 0.92s and retry. Error: ..."): the process went on.
RETRIED_WORDS = "retry() failed once"
_TRIES_KEPT = 8
# Each word is found with str.find (C speed on kilobyte-long server_args lines); those that could sit inside a
# longer name ("custom_sigquit_handler", "OOMKilled") must then stand alone: "word" bounds exclude letters, digits
# and "_" on either side, "space" bounds anything but whitespace. Checking the neighbours of each hit by hand is
# what keeps this cheap: a regex searched from the first hit (server_args holds "custom_sigquit_handler") walked
# the rest of a 10 kB line character by character.
DEATH_WORDS: dict[str, str | None] = {
    "is dead": "word",
    "sigquit": "word",
    "unexpectedly failed": None,
    "initialization failed": None,
    "failed to start": None,
    "Killed": "space",  # the shell's word for a SIGKILL
    # Python's last words as a signal kills it (faulthandler, Py_FatalError): "Fatal Python error: Segmentation fault"
    # (ROCm/ROCm#5656: a Ray worker, after its native stack).
    "Fatal Python error": None,
}
# FlashAttention's CHECK_CUDA prints the first and exits the process; rocBLAS prints the second when it finds no
# kernel library for the GPU's architecture, then aborts (tensile_host.cpp: rocblas_abort()). The CUDACHECK macro
# of NCCL's examples, which vLLM's custom all-reduce kernels use too (csrc/custom_all_reduce.cuh), prints "Failed: Cuda
# error <file>:<line> '<reason>'" and exits (SGLang 0.3 through vLLM's kernels on GPUs without peer access,
# sglang#1509); some copies spell it "CUDA".
# ROCm's runtime (HSA) prints the third when a kernel touches memory it may not, then aborts the process ("Memory
# access fault by GPU node-4 (Agent handle: 0x...) on address 0x.... Reason: Unknown.", batch 62: eight MI300X ranks
# in torch.compile's autotuning during graph capture, no Python traceback after it). It prints "HW Exception by GPU
# node-1 (Agent handle: 0x...) reason :GPU Hang" when the device stops answering, then aborts too ("Aborted (core
# dumped)", ROCm/ROCm#5590: vLLM on a gfx1151 APU after its torch.compile).
PROCESS_EXITS = (
    "CUDA error (",
    "rocBLAS error: Cannot read",
    "Memory access fault by GPU ",
    "HW Exception by GPU node-",
    "Failed: Cuda error ",
    "Failed: CUDA error ",
)
# flashinfer's FLASHINFER_CUDA_CALL prints a failed CUDA call so ("CUDA Error: no kernel image is available for
# execution on the device (209) .../handler.cuh: line 170 at function ...") and returns the error to its Python
# binding, which raises it: the process's failure, whose exception an excerpt may cut.
NATIVE_ERRORS = ("CUDA Error: ",)
# The C++ runtime's last words when an exception leaves a thread uncaught (libstdc++'s verbose terminate handler):
# "terminate called after throwing an instance of 'c10::Error'", then "  what():  NPU out of memory. ..." on the next
# line, then the abort (Python's "Fatal Python error: Aborted"). The process dies of the exception the what() line
# names: torch's c10 errors, a watchdog's std::runtime_error (batch 60: an Ascend node out of memory in graph capture).
TERMINATE_WORDS = "terminate called after throwing an instance of "
_WHAT = "what():"
ABORTED = "Fatal Python error: Aborted"
CHAINED_WORDS = (
    "above exception"  # "During handling of the above exception", "The above exception was the direct cause"
)
HANDLING_WORDS = "During handling"
# A code line's first call: `self.worker.load_model()`, `out = self.model_runner.forward(`, `return func(*a)`.
_CALL_RE = re.compile(
    r"\s+(?:return |await |[\w.]+(?:, ?[\w.]+)* = )?(?:[\w]+\.)*([A-Za-z_]\w{0,80})\(", re.ASCII
)
_RAISE = "raise "  # a traceback's code line that raises: "raise" alone re-raises and names nothing
# pydantic's error line names only the class that failed validation ("1 validation error for SpeculativeConfig"); the
# lines under it say why, each error as its location (a field's name; none for a model's own validator) and then its
# message indented by two spaces ("  Value error, Invalid repository ID ... [type=value_error, input_value=...]").
_VALIDATION_HEAD_RE = re.compile(r"\d{1,6} validation errors? for \S{1,200}$", re.ASCII)
_VALIDATION_TYPE = " [type="


# Every word that one of _check_failure's branches needs; a record with none of them is not a failure.
FAILURE_GATE_WORDS: tuple[str, ...] = (
    "Traceback",
    "Error",
    "Exception",
    "Exit",
    "Interrupt",
    "Failure",
    "is dead",
    "sigquit",
    "failed",
    "Killed",
    "Fatal Python error",
    "CUDA error",
    "Failed: Cuda error",
    "rocBLAS error",
    "Memory access fault by GPU",
    "above exception",
)
# The gate's definition; the reader asks it as reading.may_fail_words does, which finds the same.
FAILURE_GATE_RE = re.compile("|".join(re.escape(word) for word in FAILURE_GATE_WORDS))
# A record the gate did not pass (one let through by its ERROR level alone: a logged traceback's code lines) holds no
# death: each of is_death's words holds a gate word, so FailureTracker.on_record need not look for them.
if not all(  # pragma: no cover - a death word added without its gate word
    any(word in death for word in FAILURE_GATE_WORDS) for death in (*DEATH_WORDS, *PROCESS_EXITS)
):
    raise ValueError("every death word must hold one of FAILURE_GATE_WORDS")


def is_death(message: str) -> bool:
    if message.startswith(PROCESS_EXITS):
        return True
    for word, bounds in DEATH_WORDS.items():
        at = message.find(word)
        while at >= 0:
            if bounds is None or _stands_alone(message, at, at + len(word), bounds):
                return True
            at = message.find(word, at + 1)
    return False


def _stands_alone(text: str, start: int, end: int, bounds: str) -> bool:
    """Whether ``text[start:end]`` has no neighbour that would make it part of a longer word."""
    for neighbour in (text[start - 1 : start] if start else "", text[end : end + 1]):
        if not neighbour:
            continue
        if bounds == "space" and not neighbour.isspace():
            return False
        if bounds == "word" and (neighbour.isalnum() or neighbour == "_"):
            return False
    return True


@dataclass
class Failure:
    rank: str
    timestamp: str | None
    error: str
    kind: str  # "traceback", "exception", "death" or "error-record"
    seq: int
    phase: PhaseKey | None
    after_ready: bool
    # What the traceback's frames say the process was doing (innermost frame that one of the tables knows).
    frame_phase: str | None = None
    frame_model: str | None = None
    # ``frame_phase`` was named by a function's frame (`in _initialize_kv_caches`), which a deeper frame named only by
    # its module's path does not overrule (FrameRule.names_a_path).
    frame_phase_by_call: bool = False
    step: str | None = None
    error_final: bool = False  # a chained traceback's later errors do not replace its root cause
    after: bool = False  # ``phase`` had ended everywhere when it failed
    helper: bool = (
        False  # a frame says it was one of Python's helper processes (HELPER_FRAMES), not the server
    )
    # Python said it ignored the exception (`Exception ignored in: ...` above the traceback, sys.unraisablehook's
    # output): the process went on, or was already on its way out (a signal handler's SystemExit in a finalizer).
    ignored: bool = False
    # The innermost ``raise ...`` code line of the traceback: says what failed when the log ends before its error
    # line (`raise ValueError("No available memory for the cache blocks. "`).
    raised: str | None = None
    # multiprocessing named the process above the traceback (`Process ApiServer_0:`): its target raised, and it exited.
    exited: bool = False
    # The process said it would try again after it (SGLang's retry()): no crash.
    retried: bool = False
    # Its `Traceback (most recent call last):` line is in the log, so all its frames are: a draft's step would show a
    # draft's frame (the speculative worker's), so a step named without one is the target's.
    whole: bool = False

    @property
    def after_phase(self) -> bool:
        """Nothing was running where it failed: ``phase``, the newest, had ended everywhere, and no frame of its
        traceback names another (its report then says "after ..." rather than a phase)."""
        return self.after and self.frame_phase is None and self.phase is not None


class Where(NamedTuple):
    """Where the boot stood when a failure was logged."""

    phase: PhaseKey | None  # the phase open on the failing rank (or the boot's newest)
    after: bool  # that phase had ended on every rank: the failure came after it
    timestamp: str | None
    seq: int  # the analyzer's event counter
    ready: bool


# multiprocessing's line before the traceback of a process whose target raised (`Process SpawnProcess-1:`).
_PROCESS_LINE_RE = re.compile(r"\bProcess [\w.-]{1,80}:$", re.ASCII)
_METHOD_RE = re.compile(r"\bmethod '?([A-Za-z_]\w{0,80})'?", re.ASCII)


class FailureContext(Protocol):
    """What a failure's reading may ask of the log around a record, each only when it needs it (which engine leads the
    evidence costs a microsecond, on thousands of records; the lines around one are read from the block)."""

    def where(self, record: Record) -> Where:
        """Where the boot stood when ``record`` was logged."""
        ...

    def line_before(self) -> str:
        """The physical line above the record's (it names a process, says "ignored", or is a bare error's code)."""
        ...

    def frames(self) -> Iterable[FrameRule]:
        """The frame table a method's or a call's name is read with."""
        ...

    def lines_after(self, record: Record) -> list[str]:
        """The messages the same process logged on the next lines (a pydantic error's cause is written under it)."""
        ...

    def error_words(self) -> Iterable[FrameRule]:
        """The engine's words for a failed step (EngineLog.error_words)."""
        ...


def _terminate_error(message: str, after: list[str]) -> str:
    """An uncaught C++ exception's error: its class, and the what() line under it where the log has it
    (`c10::Error: NPU out of memory. Tried to allocate 4.00 GiB ...`)."""
    thrown = message[message.find(TERMINATE_WORDS) + len(TERMINATE_WORDS) :].strip().strip("'")
    for line in after[:1]:
        at = line.find(_WHAT)
        if at >= 0 and not line[:at].strip():
            return f"{thrown}: {line[at + len(_WHAT) :].strip()}"
    return message.strip()


def validation_cause(error: str, after: Callable[[], list[str]]) -> str:
    """A pydantic ValidationError's line with its first error's cause from the lines ``after`` it (the same
    process's next messages): `... 1 validation error for SpeculativeConfig: Value error, Invalid repository ID ...`.
    Any other error as it is."""
    if _VALIDATION_HEAD_RE.search(error) is None:
        return error
    location = ""
    for line in after()[:2]:
        if line.startswith("  ") and line.strip():
            cause = line.strip()
            cut = cause.find(_VALIDATION_TYPE)
            cause = cause[:cut] if cut > 0 else cause
            return f"{error}: {location}{cause}"
        if not line.strip() or line[:1].isspace() or location:
            break
        location = f"{line.strip()}: "
    return error


# The rules each text holds, per frame table (one of reading.py's tuples, kept with its answers so that its id stays
# its own): ranks log the same traceback one after another, and a table is tens of rules long. Few are kept, and
# cleared when full: enough for one traceback's frames as the ranks repeat them, too few to carry over from one copy
# of the real corpus to the next in the benchmark's file (16 MiB: 1,833 texts read in the first copy, 1,792 in the
# second; 4,096 kept would read 1,342 and 1).
_HITS_KEPT = 64
_hits_by_table: dict[int, tuple[tuple[FrameRule, ...], dict[str, tuple[FrameRule, ...]]]] = {}


def _names_more(text: str, needle: str) -> bool:
    """Whether every ``needle`` in ``text`` goes on into a longer name (FrameRule.whole_name: vLLM's `in init_device`
    is not SGLang's `in init_device_graphs`)."""
    at = text.find(needle)
    while at >= 0:
        after = text[at + len(needle) : at + len(needle) + 1]
        if not (after.isalnum() or after == "_"):
            return False
        at = text.find(needle, at + 1)
    return True


def _frame_hits(text: str, frames: Iterable[FrameRule]) -> Iterable[FrameRule]:
    """The rules of ``frames`` whose needle ``text`` holds, in order, up to the one after which _read_frame reads no
    further (pure: it depends on the text and the table alone)."""
    if type(frames) is not tuple:
        return frames
    kept = _hits_by_table.get(id(frames))
    if kept is None or kept[0] is not frames:
        kept = _hits_by_table[id(frames)] = (frames, {})
    answers = kept[1]
    hits = answers.get(text)
    if hits is None:
        found: list[FrameRule] = []
        phase_read = model_read = False
        for frame in frames:
            if frame.needle not in text or (frame.whole_name and _names_more(text, frame.needle)):
                continue
            found.append(frame)
            phase_read = phase_read or frame.phase is not None
            model_read = model_read or frame.model is not None
            if (phase_read and model_read) or (frame.phase is None and frame.model is None):
                break
        if len(answers) >= _HITS_KEPT:
            answers.clear()
        hits = answers[text] = tuple(found)
    return hits


def _read_call(failure: Failure, code: str, context: FailureContext) -> None:
    """A traceback's code line, read as the frame of the function its first call names (that call's frame is the
    next one, which an excerpt may cut), while ``failure`` still awaits its error."""
    call = _CALL_RE.match(code)
    if call is not None and not failure.error_final:
        _read_frame(failure, f"in {call.group(1)}", context.frames())


def _read_frame(failure: Failure, text: str, frames: Iterable[FrameRule]) -> None:
    """What the frame rules that ``text`` holds say the failing process was doing: the phase of the first that
    names one, the model of the first that names one. One frame can say both in two rules' words (SGLang's
    `speculative/eagle_draft_cuda_graph_runner.py`: a capture, of the draft), and the first rule's silence on the
    model is not a word against the second's."""
    phase_read = model_read = False
    for frame in _frame_hits(text, frames):
        if frame.needle not in text or (frame.whole_name and _names_more(text, frame.needle)):
            continue
        if frame.phase is not None and not phase_read:
            phase_read = True
            by_path = frame.names_a_path
            if not (by_path and failure.frame_phase_by_call):
                failure.frame_phase = frame.phase
                failure.step = frame.step or failure.step
                failure.frame_phase_by_call = not by_path
        if frame.model is not None and not model_read:
            model_read = True
            failure.frame_model = frame.model
            if not phase_read:  # a model rule's step ("draft worker init") only where no phase was read
                failure.step = failure.step or frame.step
        if (phase_read and model_read) or (frame.phase is None and frame.model is None):
            return


def _read_error_words(failure: Failure, error: str, words: Callable[[], Iterable[FrameRule]]) -> None:
    """The step an error's own words name (EngineLog.error_words), where no frame of its traceback named one: a
    frame says where the process was, and is kept over the words."""
    if failure.frame_phase is None:
        _read_frame(failure, error, words())


def _traceback_header(message: str, process: re.Match[str] | None) -> str:
    """A traceback's start as its error until its error line comes, with the process multiprocessing named on the line
    above it (`Process EngineCore_DP0:`): a log cut before the error line still says which process died."""
    header = message.strip()
    return f"{process.group()} {header}" if process is not None else header


class FailureTracker:
    """The failures of one boot: tracebacks per rank with their frames and error lines (a chained traceback's
    root cause kept), bare error records, the words of a dying process. Memory is bounded."""

    def __init__(self) -> None:
        self._first: list[Failure] = []
        self._recent: deque[Failure] = deque(maxlen=MAX_FAILURES_KEPT // 2)
        self._awaiting: dict[str, Failure] = {}  # rank -> traceback whose error line has not come yet
        self._closed: dict[str, Failure] = {}  # rank -> its last traceback with an error line
        self._chained: dict[str, Failure] = {}  # rank -> the traceback the next one on that rank continues
        self._last_traceback: Failure | None = None
        self._methods: dict[str, str] = {}  # rank -> "in <method>" it named failing, until its traceback
        # rank -> its uncaught C++ exception, until the abort it causes
        self._terminated: dict[str, Failure] = {}
        # rank -> its tracebacks since its last retry() (a try's chain can be several, not linked where a paste
        # hides their error lines); the last few only
        self._tries: dict[str, deque[Failure]] = {}
        # A Python traceback was logged (its start, or frames of one begun above the excerpt): a process crashed.
        self.traceback_seen = False

    def all(self) -> list[Failure]:
        return [*self._first, *self._recent]

    def newest(self) -> Failure | None:
        """The failure added last."""
        if self._recent:
            return self._recent[-1]
        return self._first[-1] if self._first else None

    def any(self) -> bool:
        return bool(self._first)

    def named_a_step(self) -> bool:
        """Whether a failure named the step it happened in (a frame's or its error's own words): the boot had got
        that far, whatever its records showed."""
        return any(failure.frame_phase is not None for failure in self.all())

    def add(self, record: Record, kind: str, error: str, where: Where) -> Failure:
        failure = Failure(
            record.rank,
            record.timestamp or where.timestamp,
            error[:500],
            kind,
            where.seq,
            where.phase,
            where.ready,
            after=where.after,
        )
        if len(self._first) < MAX_FAILURES_KEPT // 2:
            self._first.append(failure)
        else:
            self._recent.append(failure)
        if kind == "traceback":
            self.traceback_seen = True
            tries = self._tries.get(record.rank)
            if tries is None:
                tries = self._tries[record.rank] = deque(maxlen=_TRIES_KEPT)
            tries.append(failure)
        return failure

    def on_frame(self, record: Record, context: FailureContext) -> None:
        """A traceback frame: what the failing process was doing, innermost frame last."""
        failure = self._awaiting.get(record.rank) or (None if record.rank else self._last_traceback)
        if failure is None:
            # The log starts inside a traceback (an excerpt): its frames still tell what failed.
            failure = self.add(
                record, "traceback", "a traceback whose start is not in the log", context.where(record)
            )
            self._awaiting[record.rank] = failure
            self._last_traceback = failure
        message = record.message
        if "multiprocessing" in message and any(frame in message for frame in HELPER_FRAMES):
            failure.helper = True
        _read_frame(failure, message, context.frames())

    def on_frame_code(self, record: Record, code: str, context: FailureContext) -> None:
        """The code line under a frame of a plain traceback (``record``): the function it calls is the next frame's,
        read as that frame, as a logger's code lines are (on_record), while the traceback still awaits its error."""
        awaiting = self._awaiting.get(record.rank) or (None if record.rank else self._last_traceback)
        if awaiting is not None:
            _read_call(awaiting, code, context)

    def on_record(
        self,
        record: Record,
        context: FailureContext,
        gate_passed: bool = True,
    ) -> None:
        """Any other record that FAILURE_GATE_RE or its ERROR level let through (the caller asks first, once): a traceback's
        start or error line, a death, an ERROR record. ``context``: what the log around the record says, asked for only
        when needed. ``gate_passed``: whether FAILURE_GATE_WORDS let the record through (False: its level alone did),
        so that a death's words need not be looked for."""
        message = record.message
        method = _METHOD_RE.search(message) if "method " in message else None
        if method is not None:
            # A worker names the method it was running when it failed ("Error executing method 'load_model'",
            # "while processing method load_model"): the traceback it logs next is that method's, and the name
            # reads like the frame of the same function (whose line may lie above the excerpt).
            self._methods[record.rank] = f"in {method.group(1)}"
        # A code line (indented): no error line's pattern can match it, which both need a name at the start.
        indented = message[:1].isspace()
        if RETRIED_WORDS in message:
            self._retried(record.rank)
        elif TRACEBACK_START in message:
            failure = self._chained.pop(record.rank, None)
            if failure is None:
                before = (
                    context.line_before()
                )  # the physical line above, read once: it names a process or says "ignored"
                process = _PROCESS_LINE_RE.search(before)
                failure = self.add(
                    record, "traceback", _traceback_header(message, process), context.where(record)
                )
                failure.ignored = IGNORED_WORDS in before or before.startswith(UNRETRIEVED_FUTURE)
                failure.exited = process is not None or EXITED_WORDS in message
                failure.whole = True
            self._awaiting[record.rank] = failure
            self._last_traceback = failure
            called = self._methods.pop(record.rank, None)
            if called is not None:
                _read_frame(failure, called, context.frames())
        elif not indented and (
            EXCEPTION_LINE_RE.match(message)
            or (self._awaits(record.rank) and QUALIFIED_EXCEPTION_LINE_RE.match(message))
        ):
            self._on_exception_line(record, context)
        elif TERMINATE_WORDS in message:
            error = _terminate_error(message, context.lines_after(record))
            self._terminated[record.rank] = self.add(record, "death", error, context.where(record))
        elif gate_passed and is_death(message):
            terminated = self._terminated.pop(record.rank, None)
            if terminated is not None and message.startswith(ABORTED) and self.newest() is terminated:
                return  # the abort that the uncaught exception above it caused: that exception is the error
            self.add(record, "death", message.strip(), context.where(record))
        elif message.startswith(NATIVE_ERRORS):
            self.add(record, "exception", message.strip(), context.where(record))
        elif indented and message.lstrip().startswith(_RAISE):
            # A code line of a traceback under way (it passed the gate by its class's name): the innermost is kept.
            awaiting = self._awaiting.get(record.rank) or (None if record.rank else self._last_traceback)
            if awaiting is not None and not awaiting.error_final:
                awaiting.raised = message.strip()[:500]
        elif indented and record.rank in self._awaiting:
            # A code line of a traceback a logger prints line by line (vLLM's, at ERROR): the function it calls is the
            # next frame's. Read as that frame, it says what the process was doing when the excerpt cuts the
            # traceback below it (`self.worker.load_model()`, then the caret line; a Hugging Face thread, batch 25).
            _read_call(self._awaiting[record.rank], message, context)
        elif CHAINED_WORDS in message:
            # Python prints the root cause first: the traceback that follows continues this one.
            closed = self._closed.get(record.rank)
            if closed is not None:
                self._chained[record.rank] = closed
                if HANDLING_WORDS in message:
                    # Not a cause but a second failure while the first was being handled (a lookup's KeyError,
                    # then the error that says what was wrong): the one that ended the process is the later one.
                    closed.error_final = False
        elif (
            record.level in ("ERROR", "CRITICAL") and record.rank not in self._awaiting and message[:1] != " "
        ):
            # vLLM logs its fatal errors at this level; a message cut off by a paste still says one happened.
            self.add(
                record, "error-record", message.strip() or f"an {record.level} record", context.where(record)
            )

    def traceback_of(self, rank: str) -> Failure | None:
        """The rank's newest traceback, ended by its error line or still awaiting it."""
        return self._awaiting.get(rank) or self._closed.get(rank)

    def _retried(self, rank: str) -> None:
        """The rank's tracebacks since its last retry were a try that the process retried: no crash, and no boot of its
        own (a docs build whose Hugging Face downloads timed out twice before the server's configuration, batch 27)."""
        self._awaiting.pop(rank, None)
        tries = self._tries.pop(rank, None)
        if not tries:
            return
        for failure in tries:
            failure.retried = True
        self.traceback_seen = any(kept.kind == "traceback" and not kept.retried for kept in self.all())

    def _awaits(self, rank: str) -> bool:
        """Whether a traceback awaits its error line on ``rank`` (an untagged line closes the newest open one)."""
        return rank in self._awaiting or (not rank and bool(self._awaiting))

    def _on_exception_line(self, record: Record, context: FailureContext) -> None:
        error = validation_cause(record.message.strip(), lambda: context.lines_after(record))[:500]
        awaiting = self._awaiting.pop(record.rank, None)
        if awaiting is None and not record.rank and self._awaiting:
            # An untagged error line closes the newest open traceback (torch prints its bodies bare).
            awaiting = self._awaiting.pop(next(reversed(self._awaiting)))
        if awaiting is None:
            _read_error_words(
                self.add(record, "exception", error, context.where(record)), error, context.error_words
            )
            return
        if not awaiting.error_final:
            _read_error_words(awaiting, error, context.error_words)
            if ":" not in error:
                # A bare error (`AssertionError`) says nothing else: the code line above it does.
                code = context.line_before()
                if code and not code.startswith(("File ", "^", "~")) and len(code) < 300:
                    error = f"{error} at `{code}`"
            awaiting.error = error
            awaiting.error_final = True
        self._closed[record.rank] = awaiting

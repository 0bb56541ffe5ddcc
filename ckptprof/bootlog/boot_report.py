"""A boot's report: its state, phases, bars, the failure that ended it and the warnings, built from a ``Boot``.

Reads the boot and changes nothing, so it can run at any point of the log (``--follow`` reports as it reads) and
on a finished boot kept from earlier in the log. The sentences come from summary.py and words.py.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TypeAlias

from ckptprof.bootlog.boot import MAX_RANKS, READY_KEY, Boot
from ckptprof.bootlog.failures import TRACEBACK_START, Failure
from ckptprof.bootlog.parse import PID_LABEL, WORLD_RANK_LABEL, pid_label
from ckptprof.bootlog.reading import ENGINES
from ckptprof.bootlog.report import BootReport, FailureReport
from ckptprof.bootlog.state import BarTrack, PhaseTrack, RankSpan
from ckptprof.bootlog.summary import (
    SummaryContext,
    build_summary,
    engine_core_labels,
    failure_warnings,
    missing_rank_warnings,
    phase_report,
    progress_report,
    stall_warnings,
    with_model,
)
from ckptprof.bootlog.timestamps import timestamp_seconds
from ckptprof.bootlog.words import PhaseKey, boots_warning, done_words, rank_sort_key

MAX_WARNINGS = 40
# Above this share of its boot records not understood, a report says so (a few such records are pasting noise).
UNPARSED_WARN_SHARE = 0.05
_PLAIN_LABEL_RE = re.compile(r"([A-Za-z]+)(\d+)", re.ASCII)


def build_report(boot: Boot, stall_after_s: float, log_ended: bool) -> BootReport:
    """The boot's report as of its clock.

    ``log_ended``: the whole log has been read (not a log still being followed), so an HTTP server that came up
    with nothing after it counts as up; a follower waits for the engine's own ready line instead."""
    framework = boot.framework()
    now = boot.clock.now
    now_s = timestamp_seconds(now) if now else None
    tracks = _tracks(boot)
    expected = _expected_ranks(boot)
    fatal = _fatal(boot)
    failure = _failure_report(boot, fatal) if fatal else None
    current = boot.current_key()
    up = _http_server_up(boot, log_ended, fatal)
    if up is not None:
        tracks.append(_up_track(boot, up))
    state = _state(boot, fatal, up, current)
    until_s = _phases_end_by(boot, up, now_s)
    context = SummaryContext(
        framework=framework,
        current=next((track for track in tracks if track.key == current), None) if current else None,
        tracks=tracks,
        expected=expected,
        now_s=now_s,
        first_ts=boot.first_ts,
        speculative=boot.speculative,
        stalls=_stalled_bars(boot, now_s, stall_after_s),
        latest_bars={bar.phase: bar for bar in boot.bars},
        served_requests=boot.served_requests,
        up_then_served=boot.up_then_served,
        warming=boot.warming,
    )
    return BootReport(
        framework=framework,
        state=state,
        phases=tuple(phase_report(track, until_s) for track in tracks),
        progress=tuple(progress_report(bar) for bar in boot.bars),
        warnings=_warnings(boot, expected, context),
        summary=with_model(build_summary(state, context, failure), boot.model_name),
        first_timestamp=boot.first_ts,
        last_timestamp=now,
        error=_fatal_error(boot, fatal)[0] if fatal else None,
        filesystem=boot.filesystem,
        boots=boot.number,
        boot=boot.number,
        loader=boot.loader,
        loaders=dict(boot.model_loaders),
        throughput_GiBps=boot.throughput,
        prefetch=boot.prefetch,
        startup_timings=dict(boot.startup_timings),
        failure=failure,
        unparsed_records=boot.unparsed,
        model_name=boot.model_name,
    )


# (rank, start, time) of an HTTP server that came up before the engine said it was ready
HttpUp: TypeAlias = tuple[str, str | None, str | None]


def _http_server_up(boot: Boot, log_ended: bool, fatal: Failure | None) -> HttpUp | None:
    """The HTTP server that came up with nothing after it in a log read to its end: the server is up (its
    engine's ready line is past the log)."""
    if log_ended and fatal is None and not boot.ready and boot.clock.seq == boot.http_up_seq:
        return boot.http_up
    return None


def _up_track(boot: Boot, up: HttpUp) -> PhaseTrack:
    """The ready phase of a server whose HTTP server came up (``_http_server_up``)."""
    rank, start, at = up
    return PhaseTrack(READY_KEY, boot.order + 1, "ready", {rank: RankSpan(start=start, end=at)})


def _phases_end_by(boot: Boot, up: HttpUp | None, now_s: float | None) -> float | None:
    """Until when a phase whose end was never logged ran: when the boot came up, else the log's last time."""
    if up is not None:
        at = up[2]
        return timestamp_seconds(at) if at else now_s
    ready = boot.phases.get(READY_KEY)
    ready_at = next((span.end for span in ready.spans.values()), None) if ready else None
    return timestamp_seconds(ready_at) if ready_at else now_s


def _tracks(boot: Boot) -> list[PhaseTrack]:
    """The boot's phases in the order they began, each with the ranks it counts (``_ranks_counted``) and each worker
    named by its rank where its tag came to name one (``_one_label_a_process``)."""
    aliases = _rank_aliases(boot)
    return sorted(
        (_one_label_a_process(_ranks_counted(boot, track), aliases) for track in boot.phases.values()),
        key=lambda track: track.order,
    )


def _rank_aliases(boot: Boot) -> dict[str, str]:
    """The labels the report gives ranks read under another: each worker first tagged by its process id alone -> the
    rank its tag came to name; each rank read from an untagged record's words -> its tag (``_world_rank_aliases``)."""
    aliases = {pid_label(pid): label for pid, label in boot.named_pids.items()}
    aliases.update(_world_rank_aliases(boot))
    return aliases


def _world_rank_aliases(boot: Boot) -> dict[str, str]:
    """Each rank read from an untagged record that names it (WORLD_RANK_LABEL: vLLM's `world_size=2 rank=1`) -> the
    label the workers' tags give that rank: `rank1` where they name global ranks (`VllmWorker rank=1`); the tag whose
    group ranks are those a record stated for it (`... is assigned as DP rank 0, PP rank 0, TP rank 1`), or that those
    group ranks would make in the tags' form; TP<n> where the workers are tagged by TP rank alone and the world is
    the TP size. Where nothing says, the untagged process, as the record's line said."""
    if not boot.world_labels:
        return {}
    labels = [
        label
        for label in boot.ranks
        if label and label != "?" and not label.startswith((WORLD_RANK_LABEL, PID_LABEL))
    ]
    workers = set(labels) - engine_core_labels(labels)
    parsed = {label: _PLAIN_LABEL_RE.findall(label) for label in workers}
    forms = {tuple(kind for kind, _ in parts) for parts in parsed.values()}
    only_form = forms.pop() if len(forms) == 1 else None
    tp_world = _declared_world(boot) == _size(boot, "tp")
    aliases = {}
    for label in boot.world_labels:
        rank = int(label[len(WORLD_RANK_LABEL) :])
        groups = dict(boot.assigned_ranks.get(rank, ()))
        named = ""
        if f"rank{rank}" in workers:
            named = f"rank{rank}"
        elif groups:
            matching = [
                worker
                for worker, parts in parsed.items()
                if parts and all(groups.get(kind) == int(number) for kind, number in parts)
            ]
            if len(matching) == 1:
                named = matching[0]
            elif not matching and only_form and all(kind in groups for kind in only_form):
                named = " ".join(f"{kind}{groups[kind]}" for kind in only_form)
        elif only_form == ("TP",) and tp_world:
            named = f"TP{rank}"
        aliases[label] = named
    if not workers and sum(1 for named in aliases.values() if not named) > 1:
        # No process is tagged, and more than one rank named itself in untagged records: processes that share the
        # untagged form (an offline engine per rank under torchrun), each its own rank, not one untagged process.
        return {label: named for label, named in aliases.items() if named}
    return aliases


def _one_label_a_process(track: PhaseTrack, aliases: dict[str, str]) -> PhaseTrack:
    """The phase with each span of a process id whose tag later named its rank (vLLM V1's "(Worker pid=374)", then
    "(Worker_TP0 pid=374)") under that rank: one process, one rank. A rank that logged the phase under both keeps
    the span of its named tag."""
    if not aliases or not any(label in aliases for label in track.spans):
        return track
    spans: dict[str, RankSpan] = {}
    for label, span in track.spans.items():
        named = aliases.get(label)
        if named is None:
            spans.setdefault(label, span)
        elif named not in track.spans:
            spans[named] = span
    return replace(track, spans=spans)


def _ranks_counted(boot: Boot, track: PhaseTrack) -> PhaseTrack:
    """The phase as its ranks' own records tell it. An untagged bar opened it for global rank 0 before any rank was
    tagged, and the ranks that logged it are tagged by their rank numbers (TP4, rank1), so rank 0 would have been
    tagged too, but its records never came (they lie above an excerpt): the ranks counted are those whose records
    the log holds, not one more for the bar, and the bar alone does not keep the phase open after their ends.
    Workers tagged by process id instead (vLLM V0's `VllmWorkerProcess pid=N`) leave rank 0 untagged: the driver,
    whose bar the untagged span is, stays one of the ranks."""
    spans = track.spans
    if "" not in spans or len(spans) < 2 or track.key not in boot.untagged_bar_phases:
        return track
    tagged = {label: span for label, span in spans.items() if label}
    if any(label.startswith(PID_LABEL) for label in tagged):
        return track
    return replace(track, spans=tagged)


def _state(boot: Boot, fatal: Failure | None, up: HttpUp | None, current: PhaseKey | None) -> str:
    """One of phases.STATES: failed, ready, the newest phase's name, or starting."""
    if fatal is not None:
        return "failed"
    if boot.ready or up is not None:
        return "ready"
    if current is not None:
        return current[0]
    return "starting"


def _is_fatal(boot: Boot, failure: Failure) -> bool:
    if failure.helper:
        return False  # Python's resource tracker at exit, not the server
    if failure.ignored:
        return False  # Python printed it and went on
    if failure.retried:
        return False  # the process tried again
    if boot.ready_seq is not None and failure.seq < boot.ready_seq:
        return False  # the server came up after it
    if failure.after_ready:
        # A request failed, or the server died after it came up: the boot reached ready, and the warning says what
        # happened after (the corpus's readers read a scheduler's abort after ready so).
        return False
    if failure.kind == "death":
        return True
    if failure.kind == "error-record":
        return boot.clock.progress <= failure.seq  # nothing moved on anywhere after it
    if failure.exited:
        # The process whose target raised is gone, whatever other processes of its label log after it (vLLM's API
        # servers time out while the engine goes on loading, and the launcher tears all down when it is done).
        return True
    # A traceback the rank survived (it went on to log boot progress) was only a warning.
    if failure.rank in boot.ranks and failure.rank:
        later = boot.ranks[failure.rank].last_event_seq
    else:
        later = boot.clock.progress
    return later <= failure.seq


def _fatal(boot: Boot) -> Failure | None:
    """The failure that ended the boot: the first fatal one, with the richest traceback among its rank's."""
    fatal = [failure for failure in boot.failures.all() if _is_fatal(boot, failure)]
    if not fatal:
        return None
    # The most telling first: a traceback whose frames say what was running, then a Python error, then a
    # bare ERROR record.
    with_frames = [failure for failure in fatal if failure.frame_phase or failure.frame_model or failure.step]
    errors = [failure for failure in fatal if failure.kind != "error-record"]
    # A rank's own failure says more than an untagged one (a launcher's summary, a line whose tag a paste lost).
    errors.sort(key=lambda failure: not failure.rank)
    chosen = (with_frames or errors or fatal)[0]
    if chosen.kind == "traceback" and chosen.error.startswith(CHILD_FAILED):
        chosen = _child_traceback(boot, chosen) or chosen
    if chosen.kind == "death" and chosen.step is None and TRACEBACK_START not in chosen.error:
        # An announcement that its logger printed the traceback under (vLLM's `EngineCore failed to start.` from
        # logger.exception, then the traceback): the traceback's error line says what failed. Not one that names the
        # step that failed, its traceback on its own line (SGLang's `Initialization failed. warmup error: Traceback`).
        return _traceback_announced(boot, chosen) or chosen
    return chosen


# An error that says only that a child process failed. vLLM's model registry inspects an architecture in a subprocess,
# and when that fails raises `RuntimeError: Error raised in subprocess:` from it, the child's own traceback in its
# message (vllm-ascend#2889, #3029; omniinfer's registry alike): the child's traceback says why. The error's own words
# are kept where a library wraps the same failure in an error of its own (Inductor's `InductorError: CalledProcessError`
# for a compiler that failed: what failed is the compilation).
CHILD_FAILED = "subprocess.CalledProcessError"


def _child_traceback(boot: Boot, parent: Failure) -> Failure | None:
    """The first traceback that ``parent``'s process logged after it at the same point of the boot and that ends with
    its error line: the failed child's, which the parent printed with its own."""
    return next((failure for failure in _after(boot, parent) if _closes_at(failure, parent)), None)


def _after(boot: Boot, failure: Failure) -> list[Failure]:
    """The boot's failures logged after ``failure``, in order."""
    failures = boot.failures.all()
    at = next((index for index, kept in enumerate(failures) if kept is failure), None)
    return [] if at is None else failures[at + 1 :]


def _closes_at(traceback: Failure, other: Failure) -> bool:
    """Whether ``traceback`` is one that ``other``'s rank logged at the same point of the boot, ended by its error
    line."""
    return (
        traceback.kind == "traceback"
        and traceback.rank == other.rank
        and traceback.seq == other.seq
        and traceback.error_final
    )


def _traceback_announced(boot: Boot, announcement: Failure) -> Failure | None:
    """The traceback logged right under ``announcement`` by its rank, at the same point of the boot, when it ends with
    its error line (the reverse of ``_announcement``)."""
    later = _after(boot, announcement)
    return later[0] if later and _closes_at(later[0], announcement) else None


def _failure_report(boot: Boot, fatal: Failure) -> FailureReport:
    recorded = fatal.phase
    step = fatal.step
    error, cut = _fatal_error(boot, fatal)
    if cut:
        error += cut
    if fatal.after_phase and recorded is not None:  # (recorded is fatal.phase: the check narrows its type)
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
        and (
            not _drafts(boot)
            or (fatal.whole and fatal.frame_phase == name and name in _draft_framed_steps(boot))
        )
    ):
        # The phase came from the frames alone: with nothing anywhere in the log speaking of a draft (no
        # speculative config, no draft phase, no draft frame), the model loaded or sized is the target. So it is
        # where the whole traceback is in the log and no frame of it is a draft's (a draft's step runs in the
        # speculative worker: SGLang's EAGLEWorker, vLLM's spec_decode), whatever the server runs beside it.
        model = "target"
    return FailureReport(fatal.rank, name, model, step, error, fatal.timestamp)


def _draft_framed_steps(boot: Boot) -> tuple[str, ...]:
    """The steps the boot's engine runs a draft's in its own worker (EngineLog.draft_framed_steps)."""
    framework = boot.framework()
    return next((engine.draft_framed_steps for engine in ENGINES if engine.name == framework), ())


def _fatal_error(boot: Boot, fatal: Failure) -> tuple[str, str]:
    """The failure's error, and what to say after it when the log ends before the traceback's error line."""
    if fatal.kind != "traceback" or fatal.error_final:
        return fatal.error, ""
    announced = _announcement(boot, fatal)
    if announced is not None:
        return announced.error, " (the log ends before its traceback's error line)"
    if fatal.raised is not None:
        return f"`{fatal.raised}`", " (the log ends before its error line: the statement that raised it)"
    return fatal.error, " (the log ends before its error line)"


def _announcement(boot: Boot, traceback: Failure) -> Failure | None:
    """The error record the traceback's rank logged just before it, with nothing else happening in between (vLLM's
    `WorkerProc hit an exception`, `Error executing method ...`, and the deaths its ``logger.exception`` logs with
    the traceback, `WorkerProc failed to start.`): what the failure was, when the log is cut before the traceback's
    own error line."""
    announced = None
    for failure in boot.failures.all():
        if failure is traceback:
            return announced
        if (
            failure.kind in ("error-record", "death")
            and failure.rank == traceback.rank
            and failure.seq == traceback.seq
        ):
            announced = failure
        else:
            announced = None
    return None


def _drafts(boot: Boot) -> bool:
    """Whether the log gives any sign of a draft model: its config says so, or a phase or frame was a draft's."""
    if boot.speculative is not None:
        return boot.speculative
    if any(key[1] == "draft" for key in boot.phases):
        return True
    return any(failure.frame_model == "draft" for failure in boot.failures.all())


def _expected_ranks(boot: Boot) -> list[str]:
    """The ranks that should log each phase: those seen (a worker under the rank its tag came to name), plus those
    server_args says exist."""
    aliases = _rank_aliases(boot)
    seen = {
        aliases.get(rank, rank)
        for track in boot.phases.values()
        if track.name != "ready"
        for rank in track.spans
    }
    tagged = {rank for rank in seen if rank and rank != "?"} - engine_core_labels(seen)
    expected = set(tagged) if tagged else seen
    world = _declared_world(boot)
    plain = [_PLAIN_LABEL_RE.fullmatch(rank) for rank in tagged]
    prefixes = {match.group(1) for match in plain if match is not None}
    # Name the missing ranks only when the labels are simple (TPn / rankn) and the log covers one node. A process id
    # (pid22543: V0's and Ray's workers) numbers no rank: pid0 to pid7 are no workers of a TP8 server.
    single_node = boot.sizes.get("nnodes", 1) == 1
    numbered = prefixes != {PID_LABEL}
    if world and world <= MAX_RANKS and len(prefixes) == 1 and all(plain) and single_node and numbered:
        prefix = prefixes.pop()
        expected |= {f"{prefix}{index}" for index in range(world)}
    return sorted(expected, key=rank_sort_key)


def _declared_world(boot: Boot) -> int | None:
    tp = _size(boot, "tp")
    if tp is None:
        return None
    pp = _size(boot, "pp") or 1
    dp = _size(boot, "dp") or 1
    # A world the ranks themselves stated smaller than the arguments' tensor and pipeline sizes: fewer processes do
    # that work (tpu-inference turns --tensor-parallel-size 8 into one process that drives eight chips,
    # `world_size=1`). Data parallel engines each state their own world, or one adjusted to hold them all.
    model_world = min(tp * pp, boot.stated_world) if boot.stated_world else tp * pp
    return model_world * (1 if boot.dp_attention else dp)


def _size(boot: Boot, kind: str) -> int | None:
    for engine in ENGINES:
        for key in engine.size_keys.get(kind, ()):
            if key in boot.sizes:
                return boot.sizes[key]
    return None


def _stalled_bars(boot: Boot, now_s: float | None, stall_after_s: float) -> list[tuple[BarTrack, float]]:
    if now_s is None:
        return []
    latest: dict[tuple[str, PhaseKey | None], BarTrack] = {}
    for bar in boot.bars:
        latest[(bar.desc, bar.phase)] = bar
    stalls = []
    for bar in latest.values():
        moved_s = timestamp_seconds(bar.moved_at) if bar.moved_at else None
        if bar.done >= bar.total or moved_s is None or not boot.phase_still_open(bar.phase):
            continue
        if now_s - moved_s >= stall_after_s:
            stalls.append((bar, now_s - moved_s))
    return stalls


# Item 1 of issue #33: "unknown" says what was looked for. A paste of loader bars alone is the common case: SGLang
# and vLLM draw `Loading safetensors checkpoint shards` and `Multi-thread loading shards` with one bar format.
UNKNOWN_ENGINE_WARNING = (
    "the log does not say which engine wrote it: no line in it is SGLang's or vLLM's alone (looked for their record "
    "prefixes and process names, boot records such as `Load weight begin` or `Starting to load model`, their "
    "config dumps and their module paths in tracebacks); what it shows is read from lines both print alike"
)


def _warnings(boot: Boot, expected: list[str], context: SummaryContext) -> tuple[str, ...]:
    warnings = [
        *failure_warnings(boot.failures.all(), lambda failure: _is_fatal(boot, failure)),
        *stall_warnings(context.stalls, boot.clock.now),
    ]
    if boot.number > 1:
        warnings.insert(0, boots_warning(boot.number, boot.number))
    if boot.unparsed and boot.unparsed > UNPARSED_WARN_SHARE * boot.boot_records:
        shown = "; ".join(f"`{example}`" for example in boot.unparsed_examples)
        warnings.insert(
            0,
            f"part of the log was not understood: {boot.unparsed} of {boot.boot_records} boot records sit "
            f"behind a line prefix the reader does not know, so phases, ranks and times may be missing "
            f"(e.g. {shown})",
        )
    tracks = _tracks(boot)
    warnings += missing_rank_warnings(tracks, expected, boot.framework(), boot.ready)
    if (tracks or boot.bars) and boot.framework() == "unknown":
        warnings.append(UNKNOWN_ENGINE_WARNING)
    if len(warnings) > MAX_WARNINGS:
        extra = len(warnings) - MAX_WARNINGS
        warnings = [*warnings[:MAX_WARNINGS], f"... and {extra} more warnings"]
    return tuple(warnings)

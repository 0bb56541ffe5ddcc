"""The report's sentences and tables from a boot's records: phase times, the state's one-line summary,
and what has not happened yet. Reads the state (state.py); changes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ckptprof.bootlog.failures import Failure
from ckptprof.bootlog.reading import ENGINES
from ckptprof.bootlog.report import FailureReport, PhaseReport, ProgressReport
from ckptprof.bootlog.state import BarTrack, PhaseTrack, RankSpan
from ckptprof.bootlog.timestamps import timestamp_seconds
from ckptprof.bootlog.words import (
    PhaseKey,
    doing_words,
    done_words,
    failed_sentence,
    format_duration,
    format_ranks,
    next_step_note,
    phase_label,
    rank_sort_key,
    stall_warning,
)


@dataclass(frozen=True)
class SummaryContext:
    framework: str
    current: PhaseTrack | None
    tracks: list[PhaseTrack]
    expected: list[str]
    now_s: float | None
    first_ts: str | None
    speculative: bool | None
    stalls: list[tuple[BarTrack, float]]
    latest_bars: dict[PhaseKey | None, BarTrack]
    served_requests: bool = False  # Boot.served_requests
    up_then_served: bool = False  # Boot.up_then_served
    warming: bool = False  # Boot.warming


# A process tagged by its data-parallel rank alone: vLLM's engine core ("EngineCore_DP0", "EngineCore_0").
_DP_ONLY_RE = re.compile(r"DP\d{1,6}", re.ASCII)


def engine_core_labels(labels: Iterable[str]) -> set[str]:
    """The labels that are engine cores rather than ranks: a process tagged by its DP rank alone, where worker
    processes are tagged too. With TP > 1 vLLM's engine core ("(EngineCore_DP0 pid=..)") schedules and sizes the KV
    cache while its workers ("(Worker_TP0 pid=..)", "(VllmWorker rank=0 ..)") load the weights; with TP 1 each engine
    core runs its model itself, and is the rank (four DP engines, four ranks)."""
    tagged = {label for label in labels if label and label != "?"}
    cores = {label for label in tagged if _DP_ONLY_RE.fullmatch(label)}
    return cores if tagged - cores else set()


def is_single_process(track: PhaseTrack, expected: list[str]) -> bool:
    """A record logged by a process that is no rank (vLLM's engine core: untagged, or tagged by its DP rank alone
    beside tagged workers) in a log whose ranks are tagged."""
    return any(expected) and all(
        rank == "" or (rank not in expected and _DP_ONLY_RE.fullmatch(rank) is not None)
        for rank in track.spans
    )


def end_marker(track: PhaseTrack, framework: str) -> str:
    """The log line that would close ``track``, as the user would grep for it: each engine's, when the log has not
    said which engine wrote it (a paste of loader bars, which both print alike)."""
    if track.awaits is not None:
        return track.awaits
    engine = next((engine for engine in ENGINES if engine.name == framework), None)
    if engine is not None:
        return engine.end_markers.get(track.slot, "its end")
    markers = [
        (engine.title, engine.end_markers[track.slot])
        for engine in ENGINES
        if track.slot in engine.end_markers
    ]
    if not markers:
        return "its end"
    return " or ".join(f"{marker} ({label})" for label, marker in markers)


def seconds_between(start: str | None, end: str | None) -> float | None:
    if start and end and (start[4:5] == "-") != (end[4:5] == "-") and "-" in (start[2:3], end[2:3]):
        # One dated stamp, one year-less ('2025-07-16 12:30:41' and '07-16 12:30:26'): the log's clock lends the
        # year where it knew it, and where it did not the two are of one log, so of one year. Read apart, the
        # year-less one would fall in an arbitrary year, decades off.
        if start[4:5] == "-":
            end = f"{start[:5]}{end}"
        else:
            start = f"{end[:5]}{start}"
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
        return seconds_between(span.start, span.end)
    start_s = timestamp_seconds(span.start) if span.start else None
    return now_s - start_s if now_s is not None and start_s is not None else None


def phase_report(track: PhaseTrack, now_s: float | None) -> PhaseReport:
    spans = list(track.spans.values())
    start = _earliest(span.start for span in spans)
    # Ranks whose end lines Ray folded into another worker's show no end: the phase ended where the shown ends say.
    shown = [span for span in spans if span.end is not None] if track.ends_folded() else spans
    finished = all(span.end is not None for span in shown)
    end = _latest(span.end for span in shown) if finished else None
    seconds, stated = _phase_seconds(shown, start, end, now_s, finished)
    slowest = None
    if len(track.spans) > 1:
        ranks = {rank: span for rank, span in track.spans.items() if span in shown}
        durations = {rank: _rank_seconds(span, now_s) for rank, span in ranks.items()}
        timed = {rank: value for rank, value in durations.items() if value is not None}
        # Ranks that all took the same time have no slowest one worth naming.
        if timed and max(timed.values()) > min(timed.values()):
            slowest = max(timed, key=lambda rank: timed[rank])
    name, model, variant = track.key
    return PhaseReport(name, model, variant, start, end, seconds, len(spans), slowest, stated)


def _phase_seconds(
    spans: list[RankSpan], start: str | None, end: str | None, now_s: float | None, finished: bool
) -> tuple[float | None, bool]:
    """The phase's duration, and whether the log stated it: a duration every rank's end line states wins over
    the timestamps (a load's line may come after a download its own figure leaves out)."""
    if not finished:
        start_s = timestamp_seconds(start) if start else None
        return (round(now_s - start_s, 2) if now_s is not None and start_s is not None else None), False
    elapsed = [span.elapsed_s for span in spans if span.elapsed_s is not None]
    if elapsed and len(elapsed) == len(spans):
        return round(max(elapsed), 2), True
    wall = seconds_between(start, end)
    return (round(wall, 2) if wall is not None else None), False


def progress_report(bar: BarTrack) -> ProgressReport:
    last = bar.last
    return ProgressReport(bar.desc, bar.model, last.done, last.total, last.rate, last.elapsed_s, last.eta_s)


def stall_warnings(stalls: list[tuple[BarTrack, float]], now: str | None) -> list[str]:
    return [
        stall_warning(bar.desc, bar.model, bar.done, bar.total, bar.moved_at, now, stuck_s)
        for bar, stuck_s in stalls
    ]


def build_summary(state: str, context: SummaryContext, failure: FailureReport | None) -> str:
    if failure is not None:
        phase = (failure.phase, failure.model, None) if failure.phase else None
        return failed_sentence(phase, failure.step, failure.rank, failure.error)
    if state == "ready":
        return _ready_summary(context)
    if context.current is None:
        if context.framework == "unknown":
            return (
                "no SGLang or vLLM boot records found (looked for their record prefixes, boot records such as "
                "`Load weight begin` or `Starting to load model`, their config dumps and their module paths in "
                "tracebacks)"
            )
        return "starting: no rank has begun a boot phase yet"
    return _phase_summary(context.current, context)


def with_model(summary: str, model_name: str | None) -> str:
    """The summary with the served model named at its end, where the log names one: which server it is. In brackets,
    apart from the sentence, whose last clause may be about another step ("draft CUDA graph capture has not
    started")."""
    return f"{summary} [model {model_name}]" if model_name else summary


def _ready_summary(context: SummaryContext) -> str:
    ready = next((track for track in context.tracks if track.name == "ready"), None)
    ready_at = _latest(span.end for span in ready.spans.values()) if ready else None
    total = seconds_between(context.first_ts, ready_at)
    # No ready step: an offline engine serving a script's prompts, or a server seen serving requests (its throughput
    # lines) whose ready line the log does not hold: neither says when it came up.
    text = (
        "ready: its HTTP server came up"
        if ready and context.up_then_served
        else "ready: the server reported ready"
        if ready
        else "ready: the engine is serving requests (no line in the log says when it came up)"
        if context.served_requests
        else "ready: the engine is serving prompts (an offline run)"
    )
    if total is not None:
        text += f" {format_duration(total)} after the first log record"
    if ready and context.up_then_served:
        text += ", then served requests (its ready line is not in the log)"
    # A phase whose end was never logged ended, at the latest, when the server said it was ready: the phase table
    # times it so, and the longest phase named here must agree with it (not run on to the log's last line).
    ready_s = timestamp_seconds(ready_at) if ready_at else None
    until_s = ready_s if ready_s is not None else context.now_s
    boot = [phase_report(track, until_s) for track in context.tracks if track.name != "ready"]
    timed = [phase for phase in boot if phase.seconds is not None]
    if timed:
        longest = max(timed, key=lambda phase: phase.seconds or 0.0)
        key = (longest.name, longest.model, longest.variant)
        text += f"; longest phase: {phase_label(key)} {format_duration(longest.seconds or 0.0)}"
    return text


def _phase_summary(track: PhaseTrack, context: SummaryContext) -> str:
    expected = context.expected if not is_single_process(track, context.expected) else list(track.spans)
    if track.silent_ranks_expected():
        # The others do not log it (one_rank_per_node): it is awaited on the ranks that began it.
        expected = [rank for rank in expected if rank in track.spans]
    expected = expected or list(track.spans)
    ended = [rank for rank in expected if rank in track.spans and track.spans[rank].end is not None]
    graph_models = [other.key[1] for other in context.tracks if other.name == "cuda-graph"]
    note = next_step_note(track.name, track.key[1], graph_models, context.speculative)
    behind = _in_the_background(track, context)
    if len(ended) == len(expected):
        report = phase_report(track, context.now_s)
        took = f" in {format_duration(report.seconds)}" if report.seconds is not None else ""
        text = f"{done_words(track.key)} on {len(ended)} of {len(expected)} ranks{took}"
        if context.warming and not behind:
            # After the last step: the HTTP server came up and the engine's warm-up request is what runs now.
            return f"{text}; the HTTP server is up and the engine's warm-up request is under way (no ready line yet)"
        text += "; nothing newer logged yet" + behind
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
    text = f"{doing_words(track.key)}{' in the background' if track.background else ''}: {', '.join(details)}"
    stuck = next((stuck_s for stalled, stuck_s in context.stalls if stalled.phase == track.key), None)
    if stuck is not None:
        text += f"; the bar has not moved for {format_duration(stuck)}"
    text += behind
    return f"{text} - {note}" if note else text


def _in_the_background(track: PhaseTrack, context: SummaryContext) -> str:
    """What still runs in the background beside ``track`` (Begin.in_background: SGLang's weights read while its
    graphs are captured), as a clause of the summary: the boot is not past it until its end line."""
    running = [
        other for other in context.tracks if other is not track and other.background and other.running()
    ]
    return "".join(
        f"; {doing_words(other.key)} in the background: {end_marker(other, context.framework)} not yet logged"
        for other in running
    )


def _failure_step_words(failure: Failure) -> str:
    """ " during <step>" (or " after <step>") as the failure's report places it: the step the traceback's frames name
    where they name one (the records may not have reached it: a memory profile after a load whose end line never
    came), else the step its records had reached."""
    recorded = failure.phase
    if failure.after_phase:
        return f" after {phase_label(recorded)}"
    framed, model = failure.frame_phase, failure.frame_model
    if framed is not None and (
        recorded is None or recorded[0] != framed or (model is not None and model != recorded[1])
    ):
        return f" during {phase_label((framed, model, None))}"
    return f" during {phase_label(recorded)}" if recorded else ""


def failure_warnings(failures: list[Failure], is_fatal: Callable[[Failure], bool]) -> list[str]:
    """One warning per distinct error, naming every rank that logged it."""
    grouped: dict[str, list[Failure]] = {}
    for failure in failures:
        grouped.setdefault(failure.error, []).append(failure)
    warnings = []
    for error, same in grouped.items():
        first = same[0]
        ranks = format_ranks(sorted({failure.rank for failure in same}, key=rank_sort_key))
        # As the failure's own line says it: a phase that had ended everywhere was not running (a crash right
        # after `Loading model weights took`, in the same second).
        where = _failure_step_words(first)
        when = f" at {first.timestamp}" if first.timestamp else ""
        if any(is_fatal(failure) for failure in same):
            warnings.append(f"failed: {ranks}{when}{where}: {error}")
        else:
            if first.helper:
                verdict = "by Python's resource tracker, not the server"
            elif first.ignored:
                verdict = "ignored by Python"
            elif first.retried:
                verdict = "retried"
            else:
                verdict = "after the server was ready" if first.after_ready else "the boot went on"
            warnings.append(f"error logged by {ranks}{when}{where} ({verdict}): {error}")
    return warnings


def missing_rank_warnings(
    tracks: list[PhaseTrack], expected: list[str], framework: str, ready: bool = False
) -> list[str]:
    """Ranks that logged nothing, and finished phases that some rank never logged or never ended (a phase that runs
    in the background is still running until the boot is ready: the summary says so)."""
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
        if track.order == latest_order or is_single_process(track, expected):
            continue  # the current phase is described by the summary, not warned about
        # Records logged by one rank per node say nothing of the ranks that did not log them.
        absent = (
            []
            if track.silent_ranks_expected()
            else [rank for rank in expected if rank not in track.spans and rank not in silent]
        )
        if len(absent) <= track.folded_ends:
            # Ray folded as many copies of its end line or more (`[repeated 6x across cluster]`): the ranks that
            # show none may have logged it in them.
            absent = []
        unfinished = [rank for rank, span in track.spans.items() if span.end is None or span.end_inferred]
        if track.background and not ready:
            unfinished = [rank for rank in unfinished if track.spans[rank].end is not None]
        label = phase_label(track.key)
        if absent:
            warnings.append(
                f"{label}: not logged by {format_ranks(absent)} "
                f"({sum(rank in track.spans for rank in expected)} of {len(expected)} ranks)"
            )
        if unfinished and track.ends_folded():
            marker = end_marker(track, framework)
            folded = [rank for rank in unfinished if track.spans[rank].end is None]
            warnings.append(
                f"{label}: {marker} of {format_ranks(sorted(folded, key=rank_sort_key))} not in the log: Ray folded "
                f"{track.folded_ends} workers' copies of it into others' lines (`[repeated Nx across cluster]`)"
            )
            unfinished = [rank for rank in unfinished if rank not in folded]
        if unfinished:
            marker = end_marker(track, framework)
            warnings.append(
                f"{label}: {marker} never logged by {format_ranks(sorted(unfinished, key=rank_sort_key))} "
                "although the boot moved on"
            )
    return warnings

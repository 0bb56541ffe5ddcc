"""Each stage of `ckptprof run` and its time, for the summary: spawning the ranks and the probe can be most of a
run, and a user who sees only the load's wall cannot tell (issue #34 item 3)."""

from __future__ import annotations

from collections.abc import Sequence

from ckptprof.session import Session

# Every stage that begins once the predictions are being checked is a part of that check (its replays).
ABSORBING = "check"


def stage_times(
    starts: Sequence[tuple[str, float]], sessions: Sequence[Session], now: float
) -> list[tuple[str, float]]:
    """(stage, seconds) in the order the stages first ran, each stage's intervals summed; a replay of spawned
    ranks is split into spawn (from the replay's start until its ranks began loading), load (until the last rank
    finished) and the rest (gathering, stopping the ranks)."""
    totals: dict[str, float] = {}
    absorbed = False
    for i, (name, start) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else now
        absorbed = absorbed or name == ABSORBING
        name = ABSORBING if absorbed and name != "report" else name
        parts = _replay_parts(start, end, sessions) if name == "replay" else None
        for part, seconds in parts or [(name, end - start)]:
            totals[part] = totals.get(part, 0.0) + max(0.0, seconds)
    return [(name, round(seconds, 3)) for name, seconds in totals.items()]


def _replay_parts(start: float, end: float, sessions: Sequence[Session]) -> list[tuple[str, float]] | None:
    """The replay between ``start`` and ``end`` split, from the session whose spawned ranks began loading then;
    None when there is none (a torchrun launch: its ranks' clocks are not this process's)."""
    for session in sessions:
        if session.config.launcher != "spawn":
            continue
        began = [r.started_monotonic for r in session.ranks if r.started_monotonic is not None]
        if not began or not start <= min(began) <= end:
            continue
        first = min(began)
        finished = max(
            (r.started_monotonic + r.wall_s for r in session.ranks if r.started_monotonic is not None),
            default=first,
        )
        spawn, load = first - start, min(finished, end) - first
        return [("spawn", spawn), ("load", load), ("replay other", end - start - spawn - load)]
    return None


def stages_line(times: Sequence[tuple[str, float]], probe_reused: bool = False) -> str:
    """'time: 9.2 s in all: setup 1.1 s, probe 3.1 s (34% of the run), spawn 3.5 s, ...'; a part under 0.05 s
    that is not a stage of its own (the replay's rest) is left out."""
    total = sum(seconds for _, seconds in times)
    parts = []
    for name, seconds in times:
        if name == "replay other" and seconds < 0.05:
            continue
        share = f" ({seconds / total:.0%} of the run)" if name == "probe" and total > 0 else ""
        if name == "probe" and probe_reused:
            share = " (reused: measured by an earlier run)"
        parts.append(f"{name} {seconds:.1f} s{share}")
    return f"time: {total:.1f} s in all: {', '.join(parts)}"

"""Each stage of a run and its time, the probe's share among them, and the replay split into spawning the ranks
and the load itself (issue #34 item 3: "the terminal shows neither")."""

from __future__ import annotations

from ckptprof.cli.stages import stage_times, stages_line
from ckptprof.session import RankResult, Session
from ckptprof.stage_hooks import StageClock


def _clock(times: list[float]) -> StageClock:
    ticks = iter(times)
    return StageClock(now=lambda: next(ticks))


def _session(started: float, walls: list[float], launcher: str = "spawn") -> Session:
    ranks = [
        RankResult(rank=i, device="cpu", wall_s=w, started_monotonic=started) for i, w in enumerate(walls)
    ]
    return Session(config={"launcher": launcher}, ranks=ranks)


def test_every_stage_is_timed_from_the_command_start_and_the_replay_is_split() -> None:
    # GIVEN a run that started at 100, set up for 1 s, probed for 3 s, prepared the cache, replayed (ranks ready
    # 8 s after the replay began, loading for 1.5 s), checked predictions (replays inside count as the check),
    # then began its report at 120
    clock = _clock([100.0, 101.0, 104.0, 104.5, 114.0, 115.0, 116.0, 120.0])
    clock.restart()
    for name in ("probe", "cache", "replay", "check", "probe", "replay"):
        clock.begin(name)
    # WHEN the times are read as the report begins
    times = stage_times(clock.intervals(), [_session(started=112.5, walls=[1.0, 1.5])], clock.now())
    # THEN each stage has its time, in the order they ran, and they add up to the whole
    assert times == [
        ("setup", 1.0),
        ("probe", 3.0),
        ("cache", 0.5),
        ("spawn", 8.0),
        ("load", 1.5),
        ("replay other", 0.0),
        ("check", 6.0),
    ]
    line = stages_line(times)
    assert line.startswith("time: 20.0 s in all: setup 1.0 s, probe 3.0 s (15% of the run), ")
    assert "replay other" not in line  # nothing to show
    assert "probe 3.0 s (15%" in line and "spawn 8.0 s" in line and "load 1.5 s" in line


def test_a_reused_probe_says_so_instead_of_a_share() -> None:
    line = stages_line([("setup", 1.0), ("probe", 0.0), ("replay", 2.0)], probe_reused=True)
    assert "probe 0.0 s (reused: measured by an earlier run)" in line


def test_without_spawned_ranks_the_replay_stays_whole() -> None:
    clock = _clock([0.0, 0.5, 2.0, 2.5])
    clock.restart()
    clock.begin("probe")
    clock.begin("replay")
    times = stage_times(
        clock.intervals(), [_session(started=2.1, walls=[0.1], launcher="torchrun")], clock.now()
    )
    assert times == [("setup", 0.5), ("probe", 1.5), ("replay", 0.5)]


def test_a_clock_never_restarted_holds_nothing() -> None:
    clock = _clock([1.0, 2.0])
    clock.begin("probe")
    assert clock.intervals() == []

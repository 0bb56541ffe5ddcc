"""watch.against_run on hand-made sessions: a run's decomposed-pass process matched by pid, its faithful pass's later
process (same title, new pid) paired with the faithful figures, a shortfall named, the shards' last filling taken
after a cold run's drop."""

from __future__ import annotations

from typing import Any

from ckptprof.watch.against_run import _last_fill, compare, table

COLUMNS = [
    "t_s",
    "read_bytes",
    "syscr",
    "major_faults",
    "user_s",
    "system_s",
    "rss_bytes",
    "threads",
    "state",
]


def track(pid: int, tp: int, first_seen: float, reads: list[tuple[float, int]]) -> dict[str, Any]:
    return {
        "label": f"TP{tp}",
        "pid": pid,
        "tp_rank": tp,
        "first_seen_s": first_seen,
        "at_last_sight": {"read_bytes": reads[-1][1], "major_faults": 0},
        "samples": [[t, b, 0, 0, 0.0, 0.0, 0, 1, "cpu"] for t, b in reads],
        "state_shares": {},
    }


def run_rank(rank: int, pid: int, storage: int, faithful_storage: int) -> dict[str, Any]:
    return {
        "rank": rank,
        "pid": pid,
        "wall_s": 1.0,
        "models": [
            {
                "shards": [{"bytes": 100, "storage_bytes": storage}],
                "faithful_wall_s": 0.9,
                "faithful_storage_bytes": faithful_storage,
            }
        ],
    }


def test_each_pass_of_each_rank_is_paired_and_a_shortfall_is_named() -> None:
    watch = {
        "sample_columns": COLUMNS,
        "interval_s": 0.5,
        "ranks": [
            track(11, 0, 1.0, [(1.0, 0), (1.5, 0), (2.0, 60), (2.5, 100), (3.0, 100)]),
            track(21, 0, 5.0, [(5.0, 0), (5.5, 100)]),  # the faithful pass's process: same title, later
            track(12, 1, 1.0, [(1.0, 0), (1.5, 100)]),
            track(22, 1, 5.0, [(5.0, 0)]),  # ended before its reads were sampled
        ],
        "models": [
            {
                "shards": [
                    {
                        "bytes": 100,
                        "resident_at_end": 100,
                        "points": [[0.0, 100], [0.8, 0], [2.0, 50], [2.5, 100]],
                    }
                ]
            }
        ],
        "totals": {"checkpoint_bytes": 100},
    }
    run = {"config": {"cache": "cold"}, "ranks": [run_rank(0, 11, 100, 100), run_rank(1, 12, 100, 100)]}
    c = compare(watch, run)
    r0, r1 = c["ranks"]
    assert (r0["watch"]["pids"], r0["watch"]["matched_by"], r0["watch"]["read_bytes"]) == ([11], "pid", 100)
    assert (r0["watch"]["reading_from_s"], r0["watch"]["reading_to_s"]) == (1.5, 2.5)
    assert (r0["watch_faithful"]["pids"], r0["watch_faithful"]["read_bytes"]) == ([21], 100)
    assert (r1["watch_faithful"]["pids"], r1["watch_faithful"]["read_bytes"]) == ([22], 0)
    assert c["unmatched_watch_ranks"] == []
    # the shards' last filling: after the drop at 0.8 s, from 2.0 s to full at 2.5 s (full at 0.0 does not count)
    assert (c["residency_from_s"], c["residency_full_s"]) == (2.0, 2.5)
    text = table(c)
    assert "watch saw less than the run counted (rank 1 faithful: 100 B)" in text
    assert "rank 0" not in text.split("watch saw less")[1].split("\n")[0]


def test_a_shard_the_kernel_reclaims_after_its_load_keeps_that_load_s_filling() -> None:
    # GIVEN a cold run's shard: full at watch's start, dropped, filled by the load, filled again by the faithful
    # pass after a second drop, then taken back whole by a kernel that reclaims idle page cache (DAMON's pageout)
    points = [[0.0, 100], [0.8, 0], [2.0, 40], [2.5, 100], [3.0, 0], [3.4, 70], [3.6, 100], [5.0, 0]]
    # WHEN the filling is asked for, THEN it is the last one (the reclaim at 5.0 s is not a filling)
    assert _last_fill({"bytes": 100, "points": points}) == (3.4, 3.6)
    # AND a reclaim partway still ends before the filling it follows
    assert _last_fill({"bytes": 100, "points": [[0.0, 0], [1.0, 30], [1.5, 100], [4.0, 60]]}) == (1.0, 1.5)
    # AND a shard full throughout, or never full, has no filling
    assert _last_fill({"bytes": 100, "points": [[0.0, 100]]}) is None
    assert _last_fill({"bytes": 100, "points": [[0.0, 0], [1.0, 99], [2.0, 0]]}) is None

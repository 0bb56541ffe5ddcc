"""watch and a rank that reads and exits inside one sample interval (#35): its /proc/PID/io is gone once its parent
reaps it, but the kernel adds its counters to the parent's, and watch recovers them from there.

The end-to-end tests run real processes: a launcher whose 'rank' children (titled ``ckptprof:TP<n>`` in their comm,
as ckptprof run's ranks are) read a file cold and exit at once, watched at an interval longer than their reading.
The split and the parent's ledger are also tested on their own, on made-up counters and a made-up /proc."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ckptprof.checkpoint import fs
from ckptprof.watch.counters import ParentReader, ProcCounters
from ckptprof.watch.reaped import (
    SPLIT_ALONE,
    SPLIT_EVEN,
    SPLIT_RATE,
    Ender,
    ParentWatch,
    split_recovered,
)
from ckptprof.watch.record import WatchRecord
from ckptprof.watch.watcher import Watcher, start

MiB = 1 << 20
# A child: takes a rank's title, waits (so watch finds it and looks once before it reads), reads its file cold
# (its pages dropped first) and exits at once; the launcher reaps it straight away.
CHILD = r"""
import os, sys, time
with open("/proc/self/comm", "w") as fh:
    fh.write("ckptprof:TP" + sys.argv[1])
time.sleep(float(sys.argv[3]))
fd = os.open(sys.argv[2], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
while os.read(fd, 1 << 20):
    pass
os._exit(0)
"""
# The launcher: starts one child per file, reaps each (at once, or after REAP_AFTER_S: meanwhile a zombie), reads
# a file of its own cold when given one, then lingers so that watch samples after the reaps.
LAUNCHER = r"""
import os, subprocess, sys, time
files, own, pause, reap_after, linger = sys.argv[2].split(","), sys.argv[3], sys.argv[4], float(sys.argv[5]), 3.0
kids = [subprocess.Popen([sys.executable, "-c", sys.argv[1], str(i), f, pause]) for i, f in enumerate(files)]
if reap_after:
    def zombie(pid):
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    while not all(zombie(k.pid) for k in kids):
        time.sleep(0.01)
    time.sleep(reap_after)
for k in kids:
    k.wait()
if own != "-":
    fd = os.open(own, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    while os.read(fd, 1 << 20):
        pass
time.sleep(linger)
"""


def _file(folder: Path, name: str, size: int) -> Path:
    path = folder / name
    with open(path, "wb") as fh:
        fh.write(os.urandom(size))
        fh.flush()
        os.fsync(fh.fileno())
    if not fs.drop_cache([path]).ok:
        pytest.skip(f"{folder}: its pages cannot be dropped, so nothing is read from storage")
    return path


def _watch(
    files: list[Path],
    interval_s: float,
    own: Path | None = None,
    pause_s: float = 0.5,
    reap_after_s: float = 0,
) -> WatchRecord:
    command = [
        sys.executable,
        "-c",
        LAUNCHER,
        CHILD,
        ",".join(map(str, files)),
        str(own or "-"),
        str(pause_s),
    ]
    watcher = Watcher(start([*command, str(reap_after_s)]), interval_s=interval_s, timeout_s=60)
    return watcher.run()


def _by_title(record: WatchRecord) -> dict[str, dict[str, Any]]:
    ranks = record.to_dict()["ranks"]
    return {r["title"]: r for r in ranks}


def test_a_rank_that_reads_and_exits_inside_one_interval_is_credited_from_its_parent(tmp_path: Path) -> None:
    # GIVEN a rank that reads 16 MiB cold and exits within one 3 s interval (seen once before it reads)
    data = _file(tmp_path, "shard", 16 * MiB)
    # WHEN watch follows its launcher
    record = _watch([data], interval_s=3.0)
    # THEN the rank's reads after watch's last look are recovered from its parent, which reaped it
    rank = _by_title(record)["ckptprof:TP0"]
    assert rank["end_seen"] == "reaped"
    assert (
        rank["at_last_sight"]["read_bytes"] < 8 * MiB
    )  # seen before it read (0 B is what watch used to say)
    recovered = rank["recovered_from_parent"]
    assert recovered is not None, record.notes
    assert recovered["parent_pid"] == record.pid and recovered["split"] == SPLIT_ALONE
    seen = rank["while_watched"]["read_bytes"] + recovered["read_bytes"]
    assert 16 * MiB <= seen <= 17 * MiB
    # AND the totals count it, saying how much came from the parent; a note says so in words
    totals = record.to_dict()["totals"]
    assert totals["storage_bytes_recovered_from_parents"] == recovered["read_bytes"]
    assert totals["storage_bytes_while_watched"] == seen
    assert any("recovered from its parent" in n and f"pid {record.pid}" in n for n in record.notes)


def test_ranks_that_end_together_share_the_parents_growth_less_its_own_reads(tmp_path: Path) -> None:
    # GIVEN two ranks that read 6 and 10 MiB cold and end inside one interval, and a launcher that reads 8 MiB cold
    # itself once it has reaped them
    a, b, own = _file(tmp_path, "a", 6 * MiB), _file(tmp_path, "b", 10 * MiB), _file(tmp_path, "own", 8 * MiB)
    # WHEN watch follows it (each child waits 1.5 s before reading: the second is found at the sample after the
    # first, before either reads)
    record = _watch([a, b], interval_s=1.0, own=own, pause_s=1.5)
    ranks = _by_title(record)
    assert set(ranks) == {"ckptprof:TP0", "ckptprof:TP1"}, record.notes
    # THEN together they are credited what they read, not the launcher's own 8 MiB
    total = 0
    for r in ranks.values():
        recovered = r["recovered_from_parent"]
        total += r["while_watched"]["read_bytes"] + (0 if recovered is None else recovered["read_bytes"])
    assert 16 * MiB <= total <= 17 * MiB, [r["recovered_from_parent"] for r in ranks.values()]
    # AND where both ended in one interval, the split says how it was made and with whom
    both = [r["recovered_from_parent"] for r in ranks.values() if r["recovered_from_parent"]]
    if len(both) == 2 and both[0]["interval_s"] == both[1]["interval_s"]:
        assert {x["split"] for x in both} <= {SPLIT_RATE, SPLIT_EVEN}
        assert sorted(x["ended_with"][0] for x in both) == sorted(r["pid"] for r in ranks.values())


def test_a_zombie_rank_is_read_whole_before_its_reap_and_nothing_is_credited_twice(tmp_path: Path) -> None:
    # GIVEN a rank that reads 8 MiB cold and exits, and a launcher that reaps it only 2 s later
    data = _file(tmp_path, "shard", 8 * MiB)
    # WHEN watch samples it every 0.5 s
    record = _watch([data], interval_s=0.5, reap_after_s=2.0)
    rank = _by_title(record)["ckptprof:TP0"]
    # THEN its final counters were read from the zombie, and its reap added nothing on top
    assert rank["end_seen"] == "zombie"
    assert 8 * MiB <= rank["while_watched"]["read_bytes"] <= 9 * MiB
    assert rank["recovered_from_parent"] is None
    assert record.to_dict()["totals"]["storage_bytes_recovered_from_parents"] == 0


# -- the split, on its own ---------------------------------------------------------------------------------------


def test_one_ended_child_gets_the_growth_beyond_what_was_seen_of_it() -> None:
    got = split_recovered(20 * MiB + 4096, 30, [Ender(7, 4096, 10, 4096, 2, final=False)])
    assert got == {7: (20 * MiB, 20, SPLIT_ALONE)}


def test_several_are_split_by_their_last_read_rate_and_add_up_to_the_pool_exactly() -> None:
    enders = [Ender(1, 1000, 5, 300, 1, False), Ender(2, 2000, 5, 100, 0, False)]
    got = split_recovered(3000 + 1001, 10 + 7, enders)
    assert got[1][0] + got[2][0] == 1001 and got[1][0] > 3 * got[2][0] - 3
    assert got[1][1] + got[2][1] == 7
    assert got[1][2] == got[2][2] == SPLIT_RATE


def test_several_never_seen_reading_are_split_evenly() -> None:
    got = split_recovered(10, 0, [Ender(1, 0, 0, 0, 0, False), Ender(2, 0, 0, 0, 0, False)])
    assert got == {1: (5, 0, SPLIT_EVEN), 2: (5, 0, SPLIT_EVEN)}


def test_a_child_idle_at_its_last_look_is_not_handed_nothing() -> None:
    # child 2 read nothing over its last interval: it may still have read everything after it
    got = split_recovered(1000 + 10, 0, [Ender(1, 1000, 2, 300, 2, False), Ender(2, 0, 2, 0, 0, False)])
    assert got == {1: (5, 0, SPLIT_EVEN), 2: (5, 0, SPLIT_EVEN)}


def test_a_child_seen_only_once_has_no_rate_and_the_split_is_even() -> None:
    # child 1 read 300 over its last interval, child 2 was seen once: its rate is unknown, not 0
    got = split_recovered(
        1000 + 11, 4 + 4, [Ender(1, 1000, 2, 300, 2, False), Ender(2, 0, 2, None, None, False)]
    )
    assert got == {1: (6, 2, SPLIT_EVEN), 2: (5, 2, SPLIT_EVEN)}


def test_nothing_is_invented_when_the_parents_growth_is_no_more_than_was_seen() -> None:
    # the parent's unexplained growth is less than what watch had already seen of the child
    assert split_recovered(100, 1, [Ender(1, 500, 3, 0, 0, False)]) == {1: (0, 0, SPLIT_ALONE)}


def test_a_child_seen_final_takes_its_known_count_out_and_no_share() -> None:
    # a zombie seen at 8 MiB and a reaped child seen at 0 end together: the reaped one gets only the rest
    enders = [Ender(1, 8 * MiB, 9, 0, 0, final=True), Ender(2, 0, 3, 0, 0, final=False)]
    assert split_recovered(12 * MiB, 20, enders) == {2: (4 * MiB, 8, SPLIT_ALONE)}


# -- the parent's ledger, on a made-up /proc -------------------------------------------------------------------------


def _proc(root: Path, whole: int, threads: dict[int, int], children: dict[int, str] | None = None) -> None:
    def io(path: Path, n: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "io").write_text(f"rchar: {n}\nsyscr: {n // 100}\nread_bytes: {n}\n")

    io(root / "9", whole)
    for old in (root / "9" / "task").glob("*") if (root / "9" / "task").exists() else []:
        if int(old.name) not in threads:
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
    for tid, n in threads.items():
        io(root / "9" / "task" / str(tid), n)
        (root / "9" / "task" / str(tid) / "children").write_text((children or {}).get(tid, ""))


def test_the_parents_own_threads_reads_are_explained_even_after_a_thread_ends(tmp_path: Path) -> None:
    reader = ParentReader(9, proc_root=tmp_path)
    _proc(tmp_path, 1000, {9: 600, 10: 400}, {9: "21 22"})
    first = reader.read(0.0)
    assert first is not None and first.unexplained_read_bytes == 0 and first.children == {21, 22}
    # thread 10 reads 100 more and ends (its count moves into the whole's dead-thread part), a child reaped adds 5000
    _proc(tmp_path, 1000 + 100 + 5000, {9: 600})
    second = reader.read(1.0)
    assert second is not None
    # the ended thread's last seen 400 stays explained; its 100 after the last look cannot be told from the child's
    assert second.unexplained_read_bytes - first.unexplained_read_bytes == 5100
    # a new thread that reuses id 10 starts from 0: the old one's count is not lost
    _proc(tmp_path, 1000 + 100 + 5000 + 50, {9: 600, 10: 50})
    third = reader.read(2.0)
    assert third is not None and third.unexplained_read_bytes == second.unexplained_read_bytes
    # thread 9's id now names a new thread (its count went down): the old one's 600 stays explained
    _proc(tmp_path, 1000 + 100 + 5000 + 50 + 20, {9: 20, 10: 50})
    fourth = reader.read(3.0)
    assert fourth is not None and fourth.unexplained_read_bytes == second.unexplained_read_bytes


# A launcher that runs one rank for longer than watch takes to settle (REDISCOVER_S), then, once it has ended, a
# second one that lives a second: as ckptprof run --faithful spawns its faithful pass's ranks after the first pass's.
SEQUENTIAL = r"""
import subprocess, sys, time
TITLED = "import sys, time; open('/proc/self/comm', 'w').write(sys.argv[1]); time.sleep(float(sys.argv[2]))"
for title, life in (("ckptprof:TP0", "6.5"), ("ckptprof:TP1", "1.0")):
    subprocess.Popen([sys.executable, "-c", TITLED, title, life]).wait()
time.sleep(2.0)
"""


def test_ranks_started_after_every_earlier_rank_ended_are_found_though_watch_had_settled() -> None:
    # GIVEN a first rank that outlives watch's settling (5 s without a new rank) and a short second one after it
    record = Watcher(start([sys.executable, "-c", SEQUENTIAL]), interval_s=0.5, timeout_s=60).run()
    # THEN both are found (the second used to start and end inside the settled 5 s between two looks)
    assert [r.rank.role.title for r in record.ranks] == ["ckptprof:TP0", "ckptprof:TP1"], record.notes
    assert all(r.gone_s is not None for r in record.ranks)


# -- a window's enders, on a made-up /proc: the parent (pid 9, one thread) and its rank children 21 and 22 ------------


def _child(root: Path, pid: int, state: str | None) -> None:
    """Child ``pid`` running ("R"), a zombie ("Z"), or reaped (None: its /proc entry gone)."""
    folder = root / str(pid)
    if state is None:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
        return
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stat").write_text(f"{pid} (ckptprof:TP) {state} 9 " + "0 " * 40)


def _counters(read_bytes: int, exited: bool = False) -> ProcCounters:
    return ProcCounters(0.0, read_bytes, read_bytes // 100, read_bytes, 0, 0.0, 0.0, 0, 1, exited=exited)


def _two_ranks(root: Path) -> ParentWatch:
    _proc(root, 1000, {9: 1000}, {9: "21 22"})
    for pid in (21, 22):
        _child(root, pid, "R")
    watch = ParentWatch(9, proc_root=root)
    watch.before(0.0)
    watch.add_rank(21, _counters(0))
    watch.add_rank(22, _counters(0))
    return watch


def test_a_zombie_reaped_after_its_check_is_not_handed_to_a_sibling(tmp_path: Path) -> None:
    # GIVEN two ranks: 21 is seen a zombie at its final 8 MiB, 22 is seen reading at 1 MiB
    watch = _two_ranks(tmp_path)
    watch.before(1.0)
    _child(tmp_path, 21, "Z")
    watch.rank_seen(21, _counters(8 * MiB, exited=True))
    watch.rank_seen(22, _counters(1 * MiB))
    assert watch.after(1.1, 0.0) == {}
    # WHEN at the next sample 21 is still a zombie at the parent's look, then the parent reaps both (22 had read
    # 4 MiB in all) before watch reads the parent again, 22 being found gone
    watch.before(2.0)
    _child(tmp_path, 21, None)
    _child(tmp_path, 22, None)
    _proc(tmp_path, 1000 + 8 * MiB + 4 * MiB, {9: 1000})
    watch.rank_gone(22)
    recovered = watch.after(2.1, 0.0)
    # THEN 22 is credited its own last 3 MiB, not the zombie's 8 MiB as well (it was given 11 MiB)
    assert list(recovered) == [22]
    assert recovered[22].read_bytes == 3 * MiB
    assert recovered[22].ended_with == (21,)
    # AND nothing is left over for a later window
    watch.before(3.0)
    assert watch.after(3.1, 0.0) == {}


def test_a_rank_read_alive_then_reaped_before_the_closing_read_ends_in_that_window(tmp_path: Path) -> None:
    # GIVEN two ranks seen reading, 21 at 2 MiB and 22 at 5 MiB
    watch = _two_ranks(tmp_path)
    watch.before(1.0)
    watch.rank_seen(21, _counters(2 * MiB))
    watch.rank_seen(22, _counters(5 * MiB))
    assert watch.after(1.1, 0.0) == {}
    # WHEN at the next sample 21 is found gone (it read 3 MiB in all), 22 is read alive at 6 MiB and then ends and is
    # reaped at 6 MiB before watch reads the parent again
    watch.before(2.0)
    _child(tmp_path, 21, None)
    watch.rank_gone(21)
    watch.rank_seen(22, _counters(6 * MiB))
    _child(tmp_path, 22, None)
    _proc(tmp_path, 1000 + 3 * MiB + 6 * MiB, {9: 1000})
    recovered = watch.after(2.1, 0.0)
    # THEN the two ended in one window and share the 1 MiB read after watch's last looks (by their last read rates:
    # watch cannot tell that 22 read nothing more); 21 is not handed 22's whole 6 MiB on top (it was given 7 MiB)
    assert sum(r.read_bytes for r in recovered.values()) == 1 * MiB, recovered
    assert {r.split for r in recovered.values()} == {SPLIT_RATE}
    assert recovered[21].ended_with == (22,)
    # AND 22's reap is not counted again at the next sample, when the watcher finds it gone
    watch.before(3.0)
    watch.rank_gone(22)
    assert watch.after(3.1, 0.0) == {}


def test_a_rank_still_there_after_the_closing_read_is_left_for_its_own_window(tmp_path: Path) -> None:
    # GIVEN two ranks seen reading
    watch = _two_ranks(tmp_path)
    watch.before(1.0)
    watch.rank_seen(21, _counters(2 * MiB))
    watch.rank_seen(22, _counters(5 * MiB))
    watch.after(1.1, 0.0)
    # WHEN 21 ends (3 MiB in all) while 22 goes on
    watch.before(2.0)
    _child(tmp_path, 21, None)
    watch.rank_gone(21)
    watch.rank_seen(22, _counters(6 * MiB))
    _proc(tmp_path, 1000 + 3 * MiB, {9: 1000})
    first = watch.after(2.1, 0.0)
    # THEN 21 alone is credited, and 22, reaped later at 9 MiB, gets its own 3 MiB then
    assert first[21].read_bytes == 1 * MiB and first[21].split == SPLIT_ALONE
    watch.before(3.0)
    _child(tmp_path, 22, None)
    _proc(tmp_path, 1000 + 3 * MiB + 9 * MiB, {9: 1000})
    watch.rank_gone(22)
    second = watch.after(3.1, 0.0)
    assert second[22].read_bytes == 3 * MiB and second[22].split == SPLIT_ALONE

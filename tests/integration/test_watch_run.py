"""``ckptprof watch -- ckptprof run CKPT --tp 2 --cache cold --faithful``: watch finds the run's own rank processes by their title
(``ckptprof:TP0``, loader/ranks.py), reads the checkpoint off run's command line, and its per-rank storage bytes
match the run's own per-rank count; ``python -m ckptprof.watch.against_run`` puts the two sessions side by side.
Warm where this file system's pages cannot be dropped (then the bytes from storage are not held, only the rest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.synth import synthesize
from ckptprof.watch.against_run import compare, table
from ckptprof.watch.session_file import was_full

REPO = Path(__file__).resolve().parents[2]


def droppable(folder: Path) -> bool:
    probe = folder / "drop-probe"
    probe.write_bytes(os.urandom(1 << 20))
    try:
        return fs.drop_cache([probe]).ok
    finally:
        probe.unlink()


def test_watch_follows_a_ckptprof_run_and_agrees_with_its_session(tmp_path: Path) -> None:
    # GIVEN a small checkpoint on a file system whose pages can (or cannot) be dropped
    ckpt = tmp_path / "ckpt"
    synthesize(ckpt, preset="eagle3-draft", shards=4, size=24_000_000, seed=3)
    cold = droppable(tmp_path)
    # WHEN ckptprof run loads it at TP2 under ckptprof watch
    run_dir, watch_dir = tmp_path / "run", tmp_path / "watch"
    # Each rank lingers a second after each shard it reports (the tests' CKPTPROF_FAULT_DELAY_S): a 12 MB rank
    # loads and exits within one 0.1 s interval otherwise, and its /proc/PID/io is gone before watch reads it
    # again (watch saw 0 B of a rank's 16.8 MB in 1 of 4 runs on the busy 2-core VM).
    env = {**os.environ, "PYTHONPATH": str(REPO), "CKPTPROF_FAULT_DELAY_S": "1"}
    command = [sys.executable, "-m", "ckptprof", "watch", "-o", str(watch_dir), "--interval", "0.1", "--"]
    command += [sys.executable, "-m", "ckptprof", "run", str(ckpt), "--tp", "2", "--devices", "cpu"]
    command += ["--cache", "cold" if cold else "warm", "--faithful", "--no-probe", "-q", "-o", str(run_dir)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    watch = json.loads((watch_dir / "session.json").read_text())
    run = json.loads((run_dir / "session.json").read_text())

    # THEN watch found the run's two ranks, as ckptprof's, and the very processes the run reports; then the two
    # the faithful pass spawned after them (found though every rank of the first pass had ended)
    assert watch["target"]["engine"] == "ckptprof"
    assert sorted((r["label"], r["engine"], r["title"]) for r in watch["ranks"]) == [
        ("TP0", "ckptprof", "ckptprof:TP0"),
        ("TP0", "ckptprof", "ckptprof:TP0"),
        ("TP1", "ckptprof", "ckptprof:TP1"),
        ("TP1", "ckptprof", "ckptprof:TP1"),
    ]
    run_pids = {r["pid"] for r in run["ranks"]}
    assert len(run_pids & {r["pid"] for r in watch["ranks"]}) == 2
    # AND the checkpoint came off run's command line, every shard resident at the end
    assert [(m["role"], m["path"], m["from"]) for m in watch["models"]] == [
        ("target", str(ckpt), "run TARGET")
    ]
    assert all(was_full(s) for s in watch["models"][0]["shards"])
    # AND no finding calls the ranks' normal end (before the run writes its report) an early death
    assert not [n for n in watch["notes"] if "while the server went on" in n]

    c = compare(watch, run)
    assert [row["watch"]["matched_by"] for row in c["ranks"]] == ["pid", "pid"]
    assert all(row["watch_faithful"]["pids"][0] not in run_pids for row in c["ranks"])
    assert c["unmatched_watch_ranks"] == []
    assert c["shards_full_while_watched"] == c["shards"] == 4
    if cold:
        # AND cold, each rank's bytes from storage in the decomposed pass as watch saw them are what its process
        # had read before the load (imports, which a host that reclaims idle page cache reads again) plus the
        # run's own count for that rank (a page is charged to the rank that faulted it first), together the
        # checkpoint once at least (the faithful pass's processes may end between two samples: their last reads
        # can go unseen)
        ckpt_bytes = c["checkpoint_bytes"]
        for row in c["ranks"]:
            seen, own = row["watch"]["read_bytes"], row["run"]["storage_bytes"]
            before = row["run"]["read_bytes_before_load"]
            assert before is not None
            assert abs(seen - before - own) <= 0.05 * ckpt_bytes + (1 << 20), (row["rank"], seen, before, own)
            assert row["watch"]["reading_s"] is not None
        assert c["watch_read_bytes"] >= 0.9 * ckpt_bytes
        assert c["residency_full_s"] is not None, [s["points"] for s in watch["models"][0]["shards"]]
    # AND the module's command writes the table, exit 0 with every rank matched
    out = tmp_path / "table.txt"
    main = [sys.executable, "-m", "ckptprof.watch.against_run", str(watch_dir / "session.json")]
    main += [str(run_dir / "session.json"), "-o", str(out)]
    shown = subprocess.run(main, env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert out.read_text() == shown.stdout == table(c)
    assert "shards whole in page cache while watched: 4/4" in shown.stdout
    # AND ckptprof compare holds the two folders side by side with the same table, in either order
    for pair in ((watch_dir, run_dir), (run_dir, watch_dir)):
        cmp = [sys.executable, "-m", "ckptprof", "compare", *map(str, pair)]
        held = subprocess.run(cmp, env=env, capture_output=True, text=True, timeout=60)
        assert held.returncode == 0, held.stderr
        assert held.stdout.startswith(table(c))

"""A cold run's page-cache drop spoils a warm run on the same files (#31 item 9): the warm run says that the cache
changed under it, and a cold run looks for other runs in progress on its files before it drops them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main
from ckptprof.session import Session


@pytest.fixture
def disk_ckpt() -> Iterator[Path]:
    """A 64 MB checkpoint on the machine's disk (/var/tmp), where a drop evicts it (on tmpfs it could not)."""
    base = Path(
        tempfile.mkdtemp(
            prefix="ckptprof-spoiled-", dir="/var/tmp" if os.access("/var/tmp", os.W_OK) else None
        )
    )
    synthesize(base / "ckpt", preset="eagle3-draft", shards=8, size=64_000_000, seed=3)
    yield base / "ckpt"
    shutil.rmtree(base, ignore_errors=True)


def test_a_warm_run_whose_pages_are_dropped_under_it_says_so(disk_ckpt: Path, tmp_path: Path) -> None:
    # GIVEN a warm run held at the start of its replay (after warming: every byte resident)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "CKPTPROF_FAULT_MARK_DIR": str(marks), "CKPTPROF_FAULT_HOLD_STAGE": "replay",
           "CKPTPROF_FAULT_HOLD_S": "3"}  # fmt: skip
    out = tmp_path / "warm"
    cmd = [sys.executable, "-m", "ckptprof", "run", str(disk_ckpt), "--devices", "cpu", "--cache", "warm",
           "--no-probe", "--strategy", "sglang", "-q", "-o", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not (marks / "stage-replay").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    # WHEN another run drops the checkpoint's pages meanwhile (what --cache cold does first)
    dropped = fs.drop_cache(sorted(disk_ckpt.glob("*.safetensors")))
    if not dropped.ok:
        pytest.skip(f"the page cache cannot be dropped here: {dropped.note}")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    session = Session.load(out / "session.json")
    # THEN the warm run says that the cache changed under it, how much was missing, and its cache note does not
    # still claim a warm load
    notes = " ".join(session.notes)
    assert "page cache changed under this run" in notes, session.notes
    (model,) = session.models
    assert "changed under this run" in (model.cache_note or ""), model.cache_note


HOLDER = """
import sys, time
from ckptprof import inprogress
with inprogress.registered("run", [sys.argv[1]], "warm"):
    print("registered", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_cold_run_warns_when_a_warm_run_on_the_same_files_is_in_progress(
    disk_ckpt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a warm run in progress on the checkpoint (registered as ckptprof runs register), which does not end
    cache = tmp_path / "cache"
    monkeypatch.setenv("CKPTPROF_CACHE", str(cache))
    monkeypatch.setenv("CKPTPROF_COLD_WAIT_S", "1")
    env = {**os.environ}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(disk_ckpt), "60"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "registered"
        # WHEN a cold run starts on the same files
        code = main(["run", str(disk_ckpt), "--devices", "cpu", "--cache", "cold", "--no-probe", "--strategy",
                     "sglang", "-q", "-o", str(tmp_path / "cold")])  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert code == 0
    session = Session.load(tmp_path / "cold" / "session.json")
    # THEN it waited (1 s here), then dropped anyway and says whose warm figures it spoiled
    (note,) = [n for n in session.notes if "in progress" in n and "drop" in n]
    assert f"pid {holder.pid}" in note and "warm" in note, note

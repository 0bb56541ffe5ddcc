"""Where `ckptprof run` writes: checked before any work, never over another run's session, and a write that
fails at the end still leaves the summary and one line (issue: every run tells the truth or fails first)."""

from __future__ import annotations

import datetime as dt
import errno
import json
from pathlib import Path

import pytest

from ckptprof.cli.main import main
from ckptprof.cli.outputs import LOCK_NAME, claim_run_dir
from ckptprof.errors import UsageError
from ckptprof.session import Session


def test_an_existing_session_is_never_overwritten(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "session.json").write_text('{"earlier": true}\n')
    assert main(["run", str(small_draft), "--no-probe", "-q", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already holds a session" in err and str(out / "session.json") in err
    assert json.loads((out / "session.json").read_text()) == {"earlier": True}


def test_runs_started_in_the_same_second_get_their_own_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    now = dt.datetime(2026, 11, 30, 12, 0, 0)
    first, second = claim_run_dir(None, now), claim_run_dir(None, now)
    assert first != second
    assert (first.name, second.name) == ("20261130-120000", "20261130-120000-2")


def test_a_directory_another_run_is_writing_to_is_refused(tmp_path: Path) -> None:
    claim_run_dir(str(tmp_path / "shared"))
    assert (tmp_path / "shared" / LOCK_NAME).exists()
    with pytest.raises(UsageError, match="another ckptprof run is writing there"):
        claim_run_dir(str(tmp_path / "shared"))


@pytest.mark.parametrize(
    ("flag", "where", "problem"),
    [
        ("-o", "a-file", "exists and is not a directory"),
        ("-o", "a-file/run", "cannot create the run directory"),
        ("--json", "a-file/s.json", "a-file is not a folder"),
        ("--json", ".", "is a directory, not a file"),
        ("--html", "a-file/r.html", "a-file is not a folder"),
        ("--trace", "a-file/sub/t.json", "cannot create the folder a-file/sub"),
    ],
)
def test_an_output_that_cannot_be_written_fails_before_any_work(
    small_draft: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flag: str,
    where: str,
    problem: str,
) -> None:
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.chdir(tmp_path)
    started = []
    import ckptprof.run.stages

    monkeypatch.setattr(ckptprof.run.stages, "run_stages", lambda *a, **k: started.append(1))
    argv = ["run", str(small_draft), "--no-probe", "-q", flag, where]
    if flag != "-o":
        argv += ["-o", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert problem in err and len(err.strip().splitlines()) == 1, err
    assert not started  # refused before the replay


def test_a_write_that_fails_at_the_end_still_prints_the_summary(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(self: Session, path: str | Path) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Session, "save", disk_full)
    assert main(["run", str(small_draft), "--no-probe", "-q", "-o", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert "verdict:" in captured.out
    assert "session.json: could not be written (No space left on device)" in captured.err


def test_a_cache_folder_that_cannot_hold_the_built_in_checkpoint_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a cache location under a file (what a read-only or full cache folder also gives: the create fails)
    (tmp_path / "a-file").write_text("not a folder\n")
    monkeypatch.setenv("CKPTPROF_CACHE", str(tmp_path / "a-file" / "cache"))
    # WHEN the default run needs to generate the built-in checkpoint there
    code = main(["run", "--no-probe", "-q", "--synth-size", "16MB", "-o", str(tmp_path / "out")])
    # THEN one line names the folder and what to do, exit 2, no traceback and no session
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot write the built-in checkpoint there" in err and "CKPTPROF_CACHE" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err

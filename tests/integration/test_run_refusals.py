"""A refused `ckptprof run` leaves nothing behind and says why in one line (issue #34 item 5); a rank count the
machine cannot hold is refused before a rank is spawned (issue #32 item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.cli.main import main
from ckptprof.errors import UsageError


@pytest.mark.parametrize("with_out", [True, False], ids=["-o DIR", "default run directory"])
def test_a_refused_run_leaves_no_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, with_out: bool
) -> None:
    # GIVEN a checkpoint directory with no weights in it (refused once the run looks at it)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    argv = ["run", "empty", "--no-probe", "-q"] + (["-o", "out"] if with_out else [])
    # WHEN the run is asked for
    code = main(argv)
    # THEN one line says why, and neither the run directory nor the runs folder was left behind
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_a_refused_run_into_an_existing_folder_keeps_the_folder_and_adds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("the user's own file\n")
    assert main(["run", str(tmp_path / "missing"), "--no-probe", "-q", "-o", str(out)]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    capsys.readouterr()


def test_more_ranks_than_the_machine_can_hold_are_refused_before_any_spawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the count of the issue, on this CPU machine
    import ckptprof.loader.ranks

    spawned: list[int] = []
    monkeypatch.setattr(ckptprof.loader.ranks, "run_spawned", lambda *a, **k: spawned.append(1))
    monkeypatch.chdir(tmp_path)
    # WHEN it is asked for
    code = main(["run", "--tp", "100000", "--devices", "cpu", "--no-probe", "-q", "--synth-size", "16MB"])
    # THEN one line, exit 2, nothing spawned and nothing written
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "--tp 100000" in lines[0] and "at most" in lines[0]
    assert not spawned
    assert list(tmp_path.iterdir()) == []


def test_the_python_api_gets_the_same_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    import ckptprof.loader.ranks

    monkeypatch.setattr(ckptprof.loader.ranks, "run_spawned", lambda *a, **k: pytest.fail("spawned"))
    with pytest.raises(UsageError, match="--tp 100000"):
        ckptprof.replay(tp=100000, devices="cpu", probe=False, synth_size=16_000_000)

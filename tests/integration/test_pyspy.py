"""`ckptprof run --py-spy` records every rank with py-spy (needs ptrace; CI runs as root)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main
from ckptprof.session import Session


def test_py_spy_profiles_every_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("py-spy") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("py-spy must be installed in CI (pip install -e '.[spy]')")
        pytest.skip("py-spy is not installed")
    # Large enough, and cold, for a load of some tenths of a second: py-spy samples at 100 Hz, and the 16 MB test
    # checkpoint loaded in a sample or two, so a rank's profile could hold no sample inside a phase at all.
    ckpt = tmp_path / "eagle3"
    synthesize(ckpt, preset="eagle3-draft", shards=16, size=192_000_000, seed=7)
    out = tmp_path / "run"
    code = main(
        [
            "run",
            str(ckpt),
            "--cache",
            "cold",
            "--tp",
            "2",
            "--no-probe",
            "-q",
            "--py-spy",
            "-o",
            str(out),
            "--devices",
            "cpu",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    session = Session.load(out / "session.json")
    profiles = session.artifacts["py_spy"]
    assert set(profiles) == {"0", "1"}, session.notes
    for path in profiles.values():
        doc = json.loads(Path(path).read_text())
        assert doc["profiles"] and doc["shared"]["frames"]
        assert Path(path).parent == out
    tops = session.extra["py_spy_top_frames"]
    assert any(phases for phases in tops.values())
    assert "py-spy: top frames per phase" in captured.out


def test_missing_py_spy_is_one_line(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["run", str(small_draft), "--no-probe", "-q", "--py-spy"]) == 2
    err = capsys.readouterr().err
    assert "py-spy is not installed" in err and "Traceback" not in err

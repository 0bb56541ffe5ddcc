"""`ckptprof run` shows each stage's time and the probe's share; spawning the ranks is a stage of its own (issue
#34 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptprof.cli.main import main


def test_the_summary_shows_every_stage_and_the_probe_share(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a run with a probe and two spawned ranks
    out = tmp_path / "run"
    code = main(["run", str(small_draft), "--tp", "2", "--probe-sample", "4MB", "-q", "-o", str(out)])
    assert code == 0
    # THEN the summary has one line of stage times, the probe's share among them
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("time: ")]
    assert len(lines) == 1, lines
    for stage in ("setup", "probe", "cache", "spawn", "load"):
        assert f" {stage} " in lines[0], lines[0]
    assert "% of the run)" in lines[0]
    # AND the session keeps them, adding up to the whole run
    stages = json.loads((out / "session.json").read_text())["extra"]["run_stages_s"]
    assert list(stages)[:5] == ["setup", "probe", "cache", "spawn", "load"]
    assert all(seconds >= 0 for seconds in stages.values())
    assert stages["spawn"] > stages["load"]  # two fresh interpreters importing torch, against 16 MB

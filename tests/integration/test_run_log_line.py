"""`run --log` replays what the server's log shows instead of the default; the run's first line says so (issue
#34 item 4: "--log silently changes the replayed path")."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.cli.main import main
from ckptprof.session import Session

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


@pytest.mark.parametrize("quiet", [True, False], ids=["-q", "with progress"])
def test_a_log_that_picks_the_release_says_so_on_the_first_line(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], quiet: bool
) -> None:
    # GIVEN a 2025 server's log, whose single-thread load bar means a release before the multithread default
    log = LOGS / "sglang_tp8_eagle3_2025_ready.log"
    argv = ["run", str(small_draft), "--no-probe", "--log", str(log), "-o", str(tmp_path / "r")]
    # WHEN ckptprof replays with it
    assert main([*argv, "-q"] if quiet else argv) == 0
    err = capsys.readouterr().err.splitlines()
    # THEN the first line of the run names the log, what it chose and how to choose otherwise
    session = Session.load(tmp_path / "r" / "session.json")
    profile = session.config["sglang_release"]["profile"]
    assert err[0].startswith(f"ckptprof run: --log {log} chose what is replayed: "), err[0]
    assert f"SGLang profile {profile}" in err[0] and "strategy sglang" in err[0], err[0]
    assert "--sglang-version" in err[0] and "--strategy" in err[0], err[0]


def test_a_log_that_chooses_nothing_adds_no_line(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the release and the path given on the command line: the log is only put next to the replay
    log = LOGS / "sglang_tp8_eagle3_2025_ready.log"
    argv = ["run", str(small_draft), "--no-probe", "-q", "--log", str(log), "-o", str(tmp_path / "r")]
    assert main([*argv, "--sglang-version", "0.5.9", "--strategy", "sglang"]) == 0
    assert "chose what is replayed" not in capsys.readouterr().err


def test_the_saved_session_carries_the_server_versus_replay_rows(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a server's log that states how long each model's weights took to load
    log = LOGS / "sglang_tp8_eagle3_2025_ready.log"
    argv = ["run", str(small_draft), "--no-probe", "-q", "--log", str(log), "-o", str(tmp_path / "r")]
    # WHEN ckptprof replays beside it and prints its session as JSON too
    assert main([*argv, "--json", str(tmp_path / "printed.json")]) == 0
    # THEN the saved session (not only the report renderings) holds one row per model the log loaded: the server's
    # time from the log, the replay's slowest rank, their ratio (issue #34 item 4)
    for path in (tmp_path / "r" / "session.json", tmp_path / "printed.json"):
        session = Session.load(path)
        rows = session.extra.server_vs_replay
        assert rows, path
        assert session.server_log is not None
        logged = {(p.model or "target"): p.seconds for p in session.server_log.load_weights}
        assert {r.model: r.server_s for r in rows} == logged
        for row in rows:
            walls = [m.wall_s for r in session.ranks for m in r.models if m.role == row.model]
            if not walls:  # a model the server loaded and this replay did not: no ratio to invent
                assert row.replay_s is None and row.ratio is None, row
                continue
            assert row.replay_s == max(walls)
            assert row.ratio == pytest.approx(row.server_s / max(walls), rel=1e-3)
        assert any(row.ratio is not None for row in rows), rows

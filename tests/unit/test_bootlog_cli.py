"""`ckptprof log` through main(): the JSON contract, the human report, exit codes and bad input."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from ckptprof.cli.main import main

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
SEED = str(LOGS / "sglang_tp8_eagle3_cut_loading_draft.log")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(["log", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_json_follows_the_design_contract(capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN the seed log WHEN `ckptprof log FILE --json` THEN exactly one object with the documented keys."""
    code, data = run_json(capsys, SEED)
    assert code == 0
    assert {"framework", "state", "ready", "phases", "progress", "warnings"} <= data.keys()
    assert (data["framework"], data["state"], data["ready"]) == ("sglang", "load-weights", False)
    phases = data["phases"]
    assert isinstance(phases, list)
    for phase in phases:
        assert {"name", "model", "start", "end", "seconds", "ranks", "slowest_rank"} <= phase.keys()
    assert phases[-1]["model"] == "draft" and phases[-1]["end"] is None
    progress = data["progress"]
    assert isinstance(progress, list)
    assert progress[-1] == {
        "desc": "Loading safetensors checkpoint shards",
        "model": "draft",
        "done": 40,
        "total": 64,
        "rate": 1.64,
        "elapsed_s": 24,
        "eta_s": 14,
    }
    assert data["warnings"] == []
    assert isinstance(data["summary"], str) and "loading draft weights" in data["summary"]


def test_human_report_shows_phases_progress_and_state(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", SEED]) == 0
    out = capsys.readouterr().out
    assert "SGLang boot log" in out
    assert "load-weights      draft" in out
    assert "40/64" in out
    assert "state: load-weights - loading draft weights: 40/64 shards read" in out


def test_human_report_lists_warnings_and_a_failed_boot_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN a boot that crashed WHEN read once (not followed) THEN exit 1, as --follow does."""
    assert main(["log", str(LOGS / "sglang_tp8_eagle3_crash.log")]) == 1
    out = capsys.readouterr().out
    assert "state: failed - failed while loading draft weights: TP3 logged torch.OutOfMemoryError" in out
    assert "failure: TP3 in load-weights (draft)" in out
    assert "warnings:\n  - failed: TP3" in out


def test_boot_picks_an_earlier_boot_of_a_restarted_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """GIVEN two real boots appended to one file (a crash, then a server that came up) WHEN --boot picks one
    THEN that boot is reported, the header says which of how many, and the exit status is that boot's."""
    real = LOGS / "real"
    log = tmp_path / "server.log"
    log.write_bytes(
        (real / "sglang-sglang-25118.log").read_bytes()
        + (real / "sglang-llms-in-clouds-qwq32b-tp4.log").read_bytes()
    )
    assert main(["log", str(log)]) == 0
    last = capsys.readouterr().out
    assert "(boot 2 of 2)" in last and "state: ready" in last
    assert "the log holds 2 boots; this report covers the last one" in last
    code, first = run_json(capsys, str(log), "--boot", "1")
    assert code == 1
    assert (first["state"], first["boot"], first["boots"]) == ("failed", 1, 2)
    assert first["failure"] == {
        "rank": "DP3 TP3",
        "phase": "kv-cache",
        "model": "target",
        "step": None,
        "error": "AssertionError at `assert self.store_dtype == torch.uint8`",
        "timestamp": "2026-05-13 02:15:18",
    }
    assert main(["log", str(log), "--boot", "-2", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["boot"] == 1


@pytest.mark.parametrize("boot", ["3", "0", "-3"])
def test_boot_outside_the_log_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], boot: str) -> None:
    assert main(["log", SEED, "--boot", boot]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("the log holds 1 boot") and len(err.strip().splitlines()) == 1


def test_boot_and_follow_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", SEED, "--follow", "--boot", "1"]) == 2
    assert "--boot reads a finished log" in capsys.readouterr().err


def test_stdin_is_read_with_a_dash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = (LOGS / "vllm_tp4_ready.log").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, report = run_json(capsys, "-")
    assert (code, report["framework"], report["state"]) == (0, "vllm", "ready")


@pytest.mark.parametrize("name", ["garbage.bin", "huge_line.log"])
def test_odd_inputs_give_an_answer(capsys: pytest.CaptureFixture[str], name: str) -> None:
    code, data = run_json(capsys, str(LOGS / name))
    assert code == 0
    assert data["framework"] in ("unknown", "sglang")


def test_empty_file_is_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    code, data = run_json(capsys, str(empty))
    assert (code, data["framework"], data["state"], data["phases"]) == (0, "unknown", "starting", [])


def test_missing_file_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    assert main(["log", str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"ckptprof log: error: {missing}: no such file\n"


def test_directory_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["log", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"ckptprof log: error: {tmp_path}: is a directory, not a log file\n"


def test_unreadable_file_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    locked = tmp_path / "locked.log"
    locked.write_text("[2025-11-29 10:00:00] hello\n")
    locked.chmod(0)
    if os.access(locked, os.R_OK):
        pytest.skip("running as root: permissions are not enforced")
    assert main(["log", str(locked)]) == 2
    assert capsys.readouterr().err == f"ckptprof log: error: {locked}: permission denied\n"


def test_permission_error_is_reported_when_open_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same check where root would bypass the file mode: make open() itself refuse."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("builtins.open", refuse)
    assert main(["log", str(tmp_path / "server.log")]) == 2
    assert capsys.readouterr().err.endswith("server.log: permission denied\n")


def test_follow_on_a_finished_log_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, str(LOGS / "sglang_tp8_ready.log"), "--follow")
    assert (code, data["state"]) == (0, "ready")


def test_follow_times_out_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", SEED, "--follow", "--timeout", "0.3", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["state"] == "load-weights"
    assert "timed out after 0.3 s" in captured.err


def test_a_large_log_read_on_a_terminal_shows_how_far_it_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a log above the size that takes seconds WHEN stderr is a terminal THEN a byte bar runs over the whole
    file; piped, or small, no bar at all (scripts read our stderr)."""
    from ckptprof.bootlog import analyze_path
    from ckptprof.cli import log_cmd

    log = tmp_path / "server.log"
    line = b"[2025-01-01 10:00:00 TP0] Load weight begin. avail mem=70.00 GB\n"
    log.write_bytes(line * 20_000)
    seen: list[int] = []
    analyze_path(str(log), on_bytes=seen.append)
    assert sum(seen) == log.stat().st_size
    monkeypatch.setattr(log_cmd, "PROGRESS_FROM_BYTES", 1 << 20)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with log_cmd._progress_bar(str(log)) as bar:
        assert not bar.disable and bar.total == log.stat().st_size
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    with log_cmd._progress_bar(str(log)) as bar:
        assert bar.disable
    small = tmp_path / "small.log"
    small.write_bytes(line)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with log_cmd._progress_bar(str(small)) as bar:
        assert bar.disable
    capsys.readouterr()
    assert main(["log", str(log)]) == 0  # on a terminal: the bar on stderr, the report on stdout
    out, err = capsys.readouterr()
    assert "SGLang boot log" in out and "load-weights" in out and "reading server.log" in err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert main(["log", str(log)]) == 0  # piped: the same report, nothing on stderr
    out, err = capsys.readouterr()
    assert "load-weights" in out and err == ""

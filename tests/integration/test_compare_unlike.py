"""`compare` of two real runs that measured different things (TP 1 against TP 2): the gate refuses to rule on
their walls unless told to accept the difference, and says which settings differ; without a gate the
comparison is shown with a warning naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptprof.cli.main import main


@pytest.fixture(scope="module")
def tp1_and_tp2(small_draft: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    out = tmp_path_factory.mktemp("compare-unlike")
    paths = []
    for tp in (1, 2):
        argv = ["run", str(small_draft), "--tp", str(tp), "--devices", "cpu", "--no-probe", "-q"]
        assert main([*argv, "-o", str(out / f"tp{tp}")]) == 0
        paths.append(str(out / f"tp{tp}" / "session.json"))
    return paths[0], paths[1]


def test_the_gate_refuses_runs_of_different_tp_and_names_the_settings(
    tp1_and_tp2: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = tp1_and_tp2
    capsys.readouterr()
    # WHEN a TP 2 run is gated against a TP 1 run, whatever the allowance
    for allowance in ("0", "1000000"):
        assert main(["compare", base, new, "--fail-above", allowance]) == 2
        # THEN the gate cannot rule (exit 2, bad input): one line naming both files, each differing setting with
        # its two values, and the flag that accepts the difference
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Traceback" not in err, err
        assert base in err and new in err, err
        assert "tp: BASE 1, NEW 2" in err and "--allow-different-config" in err, err
        assert "% vs BASE" not in err, err  # no ruling on the walls


def test_allow_different_config_gates_anyway_with_a_warning(
    tp1_and_tp2: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = tp1_and_tp2
    capsys.readouterr()
    # WHEN the difference is accepted THEN the gate rules on the walls as usual, and still warns which differ
    assert main(["compare", base, new, "--fail-above", "1000000", "--allow-different-config"]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "tp: BASE 1, NEW 2" in err


def test_without_a_gate_the_comparison_is_shown_with_a_warning_line(
    tp1_and_tp2: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = tp1_and_tp2
    capsys.readouterr()
    assert main(["compare", base, new, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["wall"]["base"] and data["wall"]["new"]
    # THEN one warning line on stderr names the settings that differ, with both values
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "tp: BASE 1, NEW 2" in warnings[0], err
    assert "not like for like" in warnings[0], err

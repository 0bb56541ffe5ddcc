"""A usage error is one line, a did-you-mean where a close value or flag exists, and where to look - never the
12-line usage block (issue #34 item 5), for every subcommand."""

from __future__ import annotations

import pytest

from ckptprof.cli.main import build_parser, main

SUBCOMMANDS = sorted(
    name
    for action in build_parser()._subparsers._group_actions  # type: ignore[union-attr]
    for name in getattr(action, "choices", None) or {}
)


def _error_lines(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[str]:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "usage:" not in captured.err, captured.err
    return captured.err.strip().splitlines()


def test_a_bad_value_is_one_error_line_a_did_you_mean_and_where_to_look(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN the value of the issue: a "hot" page cache, which ckptprof calls warm
    # WHEN the run is asked for it
    lines = _error_lines(capsys, ["run", "--cache", "hot"])
    # THEN the error names the flag, the value and the choices; the next line suggests warm and --help
    assert len(lines) == 2, lines
    assert lines[0].startswith("ckptprof run: error: ")
    assert "--cache" in lines[0] and "'hot'" in lines[0] and "cold, warm, as-is" in lines[0]
    assert "did you mean --cache warm?" in lines[1]
    assert "ckptprof run --help" in lines[1]


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["run", "--cache", "clod"], "--cache cold"),
        (["run", "--engine", "sglnag"], "--engine sglang"),
        (["run", "--cahce", "cold"], "--cache"),
        (["run", "--no-porbe"], "--no-probe"),
        (["compare", "a.json", "b.json", "--format", "markdown"], "--format md"),
        (["report", "s.json", "--format", "jsno"], "--format json"),
        (["log", "server.log", "--jsno"], "--json"),
        (["lgo", "server.log"], "log"),
    ],
)
def test_a_typo_gets_the_closest_spelling(
    capsys: pytest.CaptureFixture[str], argv: list[str], meant: str
) -> None:
    lines = _error_lines(capsys, argv)
    assert len(lines) == 2, lines
    assert f"did you mean {meant}?" in lines[1], lines


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_refuses_an_unknown_flag_in_two_lines(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    lines = _error_lines(capsys, [command, "--zzzz-no-such-flag"])
    assert len(lines) == 2, lines
    # (a subcommand with a required positional says that one first: it is as much a usage error)
    assert lines[0].startswith(f"ckptprof {command}: error: "), lines
    assert "--zzzz-no-such-flag" in lines[0] or "arguments are required" in lines[0], lines
    assert lines[1] == f"see `ckptprof {command} --help`"


def test_a_value_of_the_wrong_type_says_so_and_where_to_look(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _error_lines(capsys, ["run", "--tp", "eight"])
    assert lines == [
        "ckptprof run: error: argument -t/--tp: invalid int value: 'eight'",
        "see `ckptprof run --help`",
    ]


def test_help_still_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: ckptprof run")


def test_no_suggestion_when_nothing_is_close() -> None:
    from ckptprof.cli.parser import suggestion

    assert suggestion("xyzzy", ["cold", "warm", "as-is"]) is None
    assert suggestion("Cold", ["cold", "warm", "as-is"]) == "cold"

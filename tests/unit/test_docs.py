"""The documentation that is generated or checked against the code: docs/cli.md is the argument parser's text, and
the README's test command is the one CI runs (issue #34 item 6)."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_COMMAND = "python -m pytest -q --benchmark-disable tests benchmarks"


def load_script(name: str) -> ModuleType:
    """A script under scripts/ (not a package) imported by path."""
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"ckptprof_scripts_{name}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_md_is_what_the_argument_parser_says_now() -> None:
    # GIVEN the generator that walks ckptprof's argparse parsers
    gen = load_script("gen_cli_docs")
    # WHEN it renders every command's help now
    expected = gen.render()
    # THEN the committed page is exactly that (a flag added, renamed or re-worded makes it stale)
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == expected, "docs/cli.md is stale: run `python scripts/gen_cli_docs.py`"


def test_cli_md_names_every_subcommand_and_flag() -> None:
    # GIVEN the parser the command line uses
    from ckptprof.cli.main import build_parser

    gen = load_script("gen_cli_docs")
    text = gen.render()
    # THEN each subcommand has its section and each of its option strings appears in it
    for name, sub in gen.subcommands(build_parser()):
        assert f"## `ckptprof {name}`" in text
        section = text.split(f"## `ckptprof {name}`", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for option in action.option_strings:
                assert f"`{option}" in section or f", {option}" in section, (name, option)


def test_cli_md_does_not_depend_on_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = load_script("gen_cli_docs")
    monkeypatch.setenv("COLUMNS", "40")
    narrow = gen.render()
    monkeypatch.setenv("COLUMNS", "300")
    assert gen.render() == narrow


def test_readme_test_command_is_the_one_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in readme
    assert f"\n{TEST_COMMAND}\n" in ci


def test_readme_stays_a_front_page() -> None:
    readme = (ROOT / "README.md").read_bytes()
    assert len(readme) <= 10 * 1024, f"README.md is {len(readme)} bytes; reference belongs in docs/"
    text = readme.decode("utf-8")
    assert 'pip install -e ".[test]" && ckptprof run' in text
    # every page it links exists
    for page in (
        "cli",
        "commands",
        "engines",
        "how-it-measures",
        "json-contract",
        "results",
        "pytest-plugin",
    ):
        assert f"(docs/{page}.md)" in text
        assert (ROOT / "docs" / f"{page}.md").is_file(), page
    # the picture it shows: a PNG of the HTML report (scripts/readme_sample.py --screenshot), small enough to clone
    assert "](docs/report.png)" in text
    png = (ROOT / "docs" / "report.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) < 300 * 1024


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    # GIVEN the README and every docs page (the reference moved there from the README, with its links)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            # THEN each relative link names a file or folder of the repository
            if not (page.parent / target).resolve().exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_log_examples_are_what_ckptprof_log_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ckptprof.cli.main import main

    # GIVEN the incident log the README and docs/commands.md show, under the name they give it
    fixture = ROOT / "tests" / "fixtures" / "logs" / "sglang_tp8_eagle3_cut_loading_draft.log"
    (tmp_path / "server.log").write_bytes(fixture.read_bytes())
    monkeypatch.chdir(tmp_path)
    # WHEN ckptprof log reads it now
    assert main(["log", "server.log"]) == 0
    printed = capsys.readouterr().out.splitlines()
    # THEN every line the README's example shows is printed, in that order ("..." stands for lines left out)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ ckptprof log server.log", 1)[1].split("\n```", 1)[0].splitlines()[1:]
    shown = [line for line in block if line != "..."]
    assert shown, "the README lost its ckptprof log example"
    positions = [printed.index(line) for line in shown]  # ValueError names a line no longer printed
    assert positions == sorted(positions)
    # AND docs/commands.md's full example is the whole output
    commands = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    full = commands.split("    $ ckptprof log server.log\n", 1)[1].split("\n\n\n", 1)[0]
    indented = [line[4:] for line in full.split("\nBinary garbage", 1)[0].rstrip("\n").splitlines()]
    assert indented == printed


def test_every_ckptprof_command_the_readme_and_docs_show_parses() -> None:
    from ckptprof.cli.main import build_parser

    gen = load_script("gen_cli_docs")
    names = {name for name, _ in gen.subcommands(build_parser())}
    # GIVEN each `ckptprof COMMAND ...` line in the code blocks of the README and docs/ (up to a comment, a
    # redirection, a pipe or the two spaces before a description, as the help's examples write them)
    commands = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        in_code = False
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            text = re.split(r"\s{2,}|\s#|\s>>|\s\|", line.strip().removeprefix("$ "))[0]
            words = text.split()
            shown = in_code or line.startswith("    ")
            if shown and len(words) > 1 and words[0] == "ckptprof" and words[1] in names:
                commands.append((page.name, text))
    assert len(commands) >= 10, commands
    # THEN the command line accepts each (a renamed or removed flag fails here, not on a reader's machine)
    for page_name, text in commands:
        try:
            build_parser().parse_args(shlex.split(text)[1:])
        except SystemExit as exc:
            raise AssertionError(f"{page_name}: `{text}` is refused by the parser") from exc

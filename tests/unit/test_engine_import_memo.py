"""The engine's import check is run once per installation and question, then reused (engine_import_memo.py): a run
no longer pays 8-15 s for an answer it already has, and an answer is never reused where what it depends on moved."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ckptprof.loader.strategies import engine_import_memo, sglang_own

WANTED = {"iterate": {"kwargs": {"max_workers": 8}, "modes": []}}


def _package(root: Path, body: str) -> Path:
    package = root / "memo_engine"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    module = package / "weights.py"
    module.write_text(textwrap.dedent(body))
    return module


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CKPTPROF_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(engine_import_memo.FRESH_ENV, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    (tmp_path / "site").mkdir()
    return _package(tmp_path / "site", "def iterate(files, max_workers=1):\n    yield from files\n")


class ChildCounter:
    """subprocess.run as sglang_own calls it, counting the children it starts."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = subprocess.run

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.real(*args, **kwargs)


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> ChildCounter:
    counter = ChildCounter()
    monkeypatch.setattr(sglang_own.subprocess, "run", counter)
    return counter


def test_the_second_check_reuses_the_first_answer(engine: Path, children: ChildCounter) -> None:
    first = sglang_own.check_in_child(WANTED, "memo_engine.weights")
    second = sglang_own.check_in_child(WANTED, "memo_engine.weights")
    assert first.problem is None and first.refused == {"iterate": None}
    assert first.file is not None and Path(first.file).samefile(engine)
    assert (second.problem, second.refused, second.file) == (first.problem, first.refused, first.file)
    assert (first.reused, second.reused) == (False, True)
    assert children.calls == 1


def test_an_edited_module_is_checked_again(engine: Path, children: ChildCounter) -> None:
    assert sglang_own.check_in_child(WANTED, "memo_engine.weights").refused == {"iterate": None}
    # GIVEN the function loses the keyword (an upgrade in place: same path, new size and mtime)
    engine.write_text("def iterate(files):\n    yield from files\n")
    stat = engine.stat()
    os.utime(engine, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = sglang_own.check_in_child(WANTED, "memo_engine.weights")
    assert again.refused == {"iterate": "no iterate taking max_workers"}
    assert children.calls == 2


def test_another_question_is_not_answered_by_the_memo(engine: Path, children: ChildCounter) -> None:
    sglang_own.check_in_child(WANTED, "memo_engine.weights")
    other = {"iterate": {"kwargs": {"prefetch": True}, "modes": []}}
    assert sglang_own.check_in_child(other, "memo_engine.weights").refused == {
        "iterate": "no iterate taking prefetch"
    }
    assert children.calls == 2


def test_a_failed_import_is_not_kept(engine: Path, children: ChildCounter) -> None:
    engine.write_text("raise ImportError('half installed')\n")
    failed = sglang_own.check_in_child(WANTED, "memo_engine.weights")
    assert failed.problem is not None and "half installed" in failed.problem
    assert sglang_own.check_in_child(WANTED, "memo_engine.weights").problem == failed.problem
    assert children.calls == 2  # tried again: nothing was kept
    assert not list((Path(os.environ["CKPTPROF_CACHE"]) / "engine-checks").glob("*.json"))


def test_fresh_asks_the_child_again(
    engine: Path, children: ChildCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    sglang_own.check_in_child(WANTED, "memo_engine.weights")
    monkeypatch.setenv(engine_import_memo.FRESH_ENV, "fresh")
    assert sglang_own.check_in_child(WANTED, "memo_engine.weights").refused == {"iterate": None}
    assert children.calls == 2


def test_a_corrupt_memo_is_checked_again(engine: Path, children: ChildCounter) -> None:
    sglang_own.check_in_child(WANTED, "memo_engine.weights")
    for stored in (Path(os.environ["CKPTPROF_CACHE"]) / "engine-checks").glob("*.json"):
        stored.write_text('{"key": "x", "answer": []}')
    assert sglang_own.check_in_child(WANTED, "memo_engine.weights").refused == {"iterate": None}
    assert children.calls == 2


def test_an_installed_distribution_changes_the_key(engine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = engine_import_memo.key("memo_engine.weights", WANTED, "p", ())
    installed = engine_import_memo._distributions()
    monkeypatch.setattr(engine_import_memo, "_distributions", lambda: [*installed, ("sgl-kernel", "0.3.9")])
    assert engine_import_memo.key("memo_engine.weights", WANTED, "p", ()) != before

"""Issue #34 item 7: Markdown lines fit 100 columns; the HTML opens with the per-model headline, then the timeline."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from ckptprof.render import html, markdown
from ckptprof.session import Session
from tests.unit.test_render_cli import committed_sessions

WIDTH = 100
SESSIONS = committed_sessions()


def test_there_are_committed_sessions_to_render() -> None:
    # The width test below is only as good as the sessions it renders.
    assert len(SESSIONS) >= 3


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_every_markdown_line_fits_100_columns(path: Path) -> None:
    # GIVEN a committed session (real runs: long paths, long caveats, wide strategy and shard tables)
    session = Session.load(path)
    # WHEN it is rendered as Markdown
    md = markdown.render(session)
    # THEN no line is wider than 100 columns (no exceptions)
    wide = [f"{len(line)}: {line}" for line in md.splitlines() if len(line) > WIDTH]
    assert wide == []


class _Order(HTMLParser):
    """The ids and classes of the page's elements, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("id", "class") and value:
                self.marks += value.split() if name == "class" else [f"#{value}"]


@pytest.mark.parametrize("path", SESSIONS[:3], ids=lambda p: str(p.relative_to(p.parents[2])))
def test_html_opens_with_a_headline_per_model_then_the_timeline(path: Path) -> None:
    # GIVEN a committed session
    session = Session.load(path)
    # WHEN it is rendered as HTML
    parser = _Order()
    parser.feed(html.render(session, with_plots=False))
    marks = parser.marks
    # THEN the per-model headline is the first section, one line per model, and the timeline follows it
    assert "#headline" in marks and "#timeline" in marks
    assert marks.index("#headline") < marks.index("#timeline")
    sections_before = [m for m in marks[: marks.index("#timeline")] if m.startswith("#")]
    assert sections_before == ["#headline"]
    assert marks.count("model-headline") == len({m.role for r in session.ranks for m in r.models})

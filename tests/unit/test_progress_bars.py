"""The bars leave the cursor where the summary starts: at the beginning of a line (issue #34 item 5: "the progress
bar's clearing splits the first summary line" - a target + draft run closed the draft's bar, drawn one line down,
last, and tqdm returns from there to the column where its blanking ended)."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

from ckptprof.loader.progress import ProgressPrinter
from ckptprof.session import ShardTiming

WIDTH = 100


def _screen(text: str, width: int = WIDTH) -> list[str]:
    """What a terminal of ``width`` columns shows for ``text``: carriage return, newline, cursor up, wrapping."""
    rows: list[list[str]] = [[]]
    row = col = 0
    for token in re.findall(r"\x1b\[(\d*)A|(.)", text, flags=re.DOTALL):
        up, ch = token
        if ch == "":
            row, col = max(0, row - int(up or 1)), min(col, width - 1)
        elif ch == "\r":
            col = 0
        elif ch == "\n":
            row += 1
        else:
            if col >= width:
                row, col = row + 1, 0
            while len(rows) <= row:
                rows.append([])
            line = rows[row]
            line.extend(" " * (col + 1 - len(line)))
            line[col] = ch
            col += 1
        while len(rows) <= row:
            rows.append([])
    return ["".join(line).rstrip() for line in rows]


def test_after_a_target_and_a_draft_bar_the_summary_starts_a_line() -> None:
    # GIVEN the bars of a target + draft replay on two ranks, both drawn (the draft's one line below)
    plan = SimpleNamespace(
        tp=2,
        models=[
            SimpleNamespace(role="target", shards=[1] * 16),
            SimpleNamespace(role="draft", shards=[1] * 8),
        ],
    )
    stream = io.StringIO()
    printer = ProgressPrinter(plan, file=stream, ncols=WIDTH)  # type: ignore[arg-type]
    printer(0, "target", ShardTiming(file="a"))
    printer(0, "draft", ShardTiming(file="b"))
    # WHEN they are closed and the summary's first line is printed after them
    printer.close()
    stream.write("ckptprof: target ... the first summary line\n")
    # THEN that line is whole, at the start of a row
    assert "ckptprof: target ... the first summary line" in _screen(stream.getvalue())

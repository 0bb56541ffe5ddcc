"""The server-versus-replay table (`run --log`, #34 item 4) is computed once and shown in every format: terminal,
Markdown, HTML and the JSON's ``extra.server_vs_replay``."""

from __future__ import annotations

import json
import re
from html import unescape

from ckptprof.bootlog.report import PhaseReport
from ckptprof.render import RENDERERS, html, markdown, table
from ckptprof.results import ServerLog
from ckptprof.session import Session
from tests.unit.test_render_headline import pair


def logged() -> Session:
    s = pair()  # target 3.00 s, draft 0.75 s on one rank
    phases = (
        PhaseReport("load weights", None, None, None, None, 6.0, 1, None, stated=True),
        PhaseReport("load weights", "draft", None, None, None, 1.5, 1, None, stated=True),
    )
    s.server_log = ServerLog(path="server.log", framework="sglang", state="ready", load_weights=phases)
    return s


def test_every_format_shows_the_server_beside_the_replay() -> None:
    s = logged()
    # THEN the terminal has the table
    text = table.render(s)
    assert "server log server.log (sglang, state ready)" in text
    assert re.search(r"target\s+6\.00\s+1\s+3\.00\s+2\.0x", text)
    # AND Markdown and HTML the same rows
    md = markdown.render(s)
    assert "server log server.log (sglang, state ready)" in md
    assert re.search(r"\| target\s+\| 6\.00\s+\| 1\s+\| 3\.00\s+\| 2\.0x", md)
    page = unescape(re.sub(r"<[^>]+>", " ", html.render(s, with_plots=False)))
    assert "server log server.log (sglang, state ready)" in page
    assert re.search(r"draft\s+1\.50\s+1\s+0\.75\s+2\.0x", page)
    # AND the JSON carries the figures
    doc = json.loads(RENDERERS["json"](s))
    assert doc["extra"]["server_vs_replay"] == [
        {"model": "target", "server_s": 6.0, "server_ranks": 1, "replay_s": 3.0, "ratio": 2.0},
        {"model": "draft", "server_s": 1.5, "server_ranks": 1, "replay_s": 0.75, "ratio": 2.0},
    ]
    assert doc["extra"]["server_log"]["path"] == "server.log"  # the log itself stays where it was


def test_no_log_no_table_and_no_key() -> None:
    s = pair()
    assert "server log" not in table.render(s) + markdown.render(s) + html.render(s, with_plots=False)
    assert "server_vs_replay" not in json.loads(RENDERERS["json"](s)).get("extra", {})

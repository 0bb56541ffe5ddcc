"""`ckptprof report` on a watch session (a hand-made one, in the shape watch writes): the terminal table, Markdown,
HTML and JSON; the limit that bound the ranks named from their samples' classes; what only a run has refused in one
line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptprof.cli.main import main
from ckptprof.watch.record import SAMPLE_COLUMNS
from ckptprof.watch.session_file import bound


def rank(label: str, pid: int, states: list[str], read: int) -> dict[str, Any]:
    samples = [
        [0.5 * i, read * i // max(1, len(states) - 1), i, i, 0.1 * i, 0.05 * i, 10_000_000, 3, s]
        for i, s in enumerate(states)
    ]
    return {
        "label": label,
        "pid": pid,
        "title": f"sglang::scheduler_{label}",
        "engine": "sglang",
        "tp_rank": int(label[2:]),
        "status": "gone",
        "first_seen_s": 0.0,
        "gone_s": 0.5 * len(states),
        "at_first_sight": {"read_bytes": 0, "major_faults": 0, "user_s": 0.0, "system_s": 0.0},
        "at_last_sight": {"read_bytes": read, "major_faults": 17, "user_s": 0.4, "system_s": 0.2},
        "while_watched": {"read_bytes": read, "major_faults": 17, "user_s": 0.4, "system_s": 0.2},
        "peak_rss_bytes": 10_000_000,
        "peak_threads": 3,
        "state_shares": {},
        "io_note": None,
        "stacks": None,
        "samples": samples,
    }


def watch_session(states: dict[str, list[str]]) -> dict[str, Any]:
    ranks = [rank(label, 100 + i, s, 4_000_000 * (i + 1)) for i, (label, s) in enumerate(states.items())]
    return {
        "schema_version": 1,
        "observed": "live-server",
        "target": {"pid": 99, "command": ["python", "-m", "sglang.launch_server"], "engine": "sglang"},
        "duration_s": 3.0,
        "end_reason": "ready",
        "interval_s": 0.5,
        "totals": {
            "checkpoint_bytes": 8_000_000,
            "storage_bytes_since_rank_start": 12_000_000,
            "read_amplification": 1.5,
        },
        "models": [
            {
                "role": "target",
                "path": "/data/<m>",
                "fs_type": "ext4",
                "total_bytes": 8_000_000,
                "shards": [
                    {
                        "file": "model-00001-of-00002.safetensors",
                        "bytes": 4_000_000,
                        "resident_at_start": 0,
                        "resident_at_end": 4_000_000,
                        "first_growth_s": 0.5,
                        "full_s": 1.5,
                        "points": [[0.0, 0], [0.5, 1_000_000], [1.5, 4_000_000]],
                    },
                    {
                        "file": "model-00002-of-00002.safetensors",
                        "bytes": 4_000_000,
                        "resident_at_start": 0,
                        "resident_at_end": 2_000_000,
                        "first_growth_s": 2.0,
                        "full_s": None,
                        "points": [[0.0, 0], [2.0, 2_000_000]],
                    },
                ],
            }
        ],
        "sample_columns": list(SAMPLE_COLUMNS),
        "ranks": ranks,
        "log": {
            "source": "the server's output",
            "report": {
                "framework": "sglang",
                "state": "ready",
                "phases": [
                    {
                        "name": "load-weights",
                        "model": "target",
                        "start": "2026-12-03 01:00:00",
                        "end": "2026-12-03 01:00:03",
                        "seconds": 3.0,
                        "ranks": 2,
                    }
                ],
            },
        },
        "notes": ["read amplification 1.50x: <a note>"],
    }


def save(tmp_path: Path, doc: dict[str, Any]) -> Path:
    out = tmp_path / "w"
    out.mkdir()
    (out / "session.json").write_text(json.dumps(doc), encoding="utf-8")
    return out


STORAGE_BOUND = {
    "TP0": ["cpu"] + ["storage"] * 5 + ["cpu"],
    "TP1": ["cpu"] + ["storage"] * 4 + ["waiting"] * 2,
}


def test_the_bound_is_the_class_most_samples_fell_in() -> None:
    b = bound(watch_session(STORAGE_BOUND))
    # each rank's first sample has no interval before it: 6 + 6 samples counted, 9 of them storage
    assert (b.limit, b.samples) == ("storage", 12)
    assert b.shares["storage"] == pytest.approx(9 / 12)
    assert b.line.startswith("bound: storage-bound: 75% of 12 rank samples")
    cpu = bound(watch_session({"TP0": ["storage"] + ["cpu"] * 6, "TP1": ["cpu"] * 4 + ["page_cache"] * 3}))
    assert cpu.limit == "cpu"
    close = bound(watch_session({"TP0": ["cpu", "cpu", "cpu", "waiting", "waiting"]}))
    assert "too close to tell apart" in close.line  # 50% against 50%


def test_report_renders_a_watch_folder_as_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = save(tmp_path, watch_session(STORAGE_BOUND))
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "storage-bound" in out and "observed on a live server" in out
    assert "TP0" in out and "4.00 MB" in out and "8.00 MB" in out  # each rank's storage bytes
    assert "model-00002-of-00002.safetensors" in out and "50%" in out  # half of shard 2 resident at the end
    assert "load-weights" in out  # the log's phases
    assert "read amplification 1.50x" in out


def test_report_renders_a_watch_session_as_markdown_html_and_json(tmp_path: Path) -> None:
    doc = watch_session(STORAGE_BOUND)
    session = save(tmp_path, doc) / "session.json"
    assert main(["report", str(session), "-o", str(tmp_path / "r.md")]) == 0
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("## ckptprof watch:") and "| TP1" in md and "### The log's phases" in md
    assert main(["report", str(session), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "per-rank timeline of sampled states" in html and "per-shard page-cache residency" in html
    assert "/data/&lt;m&gt;" in html and "/data/<m>" not in html  # session text escaped
    assert html.count('fill="#c0392b"') >= 9 + 1  # one block per storage sample, and the legend's swatch
    assert main(["report", str(session), "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text()) == doc


def test_what_only_a_run_has_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = save(tmp_path, watch_session(STORAGE_BOUND))
    assert main(["report", str(folder), "--format", "perfetto"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "watch session" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert "without a session.json" in capsys.readouterr().err

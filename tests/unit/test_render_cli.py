"""`ckptprof report` re-renders a saved session; `run --html/--trace` write the same renderings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ckptprof.cli.main import main
from ckptprof.render import FORMATS
from ckptprof.session import RankModel, RankResult, Session, ShardTiming

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def committed_sessions() -> list[Path]:
    """Session JSON files under reports/ (probe outputs and other JSON there are not sessions)."""
    found = []
    for path in sorted(REPORTS.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "schema_version" in data and "ranks" in data:
            found.append(path)
    return found


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    shard = ShardTiming(
        file="a.safetensors", bytes=10**9, read_s=0.5, h2d_s=0.2, wall_s=1.0, nonresident_bytes=10**9
    )
    session = Session(
        config={"tp": 1, "devices": ["cpu"]},
        ranks=[
            RankResult(rank=0, device="cpu", models=[RankModel(role="draft", wall_s=1.0, shards=[shard])])
        ],
        verdict={"bottleneck": "storage", "summary": "storage-bound: 1.00 GB/s"},
    )
    return session.save(tmp_path / "session.json")


@pytest.mark.parametrize(
    ("fmt", "starts"),
    [("table", "ckptprof:"), ("md", "## ckptprof verdict: storage-bound"), ("html", "<!DOCTYPE html>"),
     ("json", '{\n "schema_version": 1'), ("perfetto", '{"traceEvents":')],
)  # fmt: skip
def test_every_format_goes_to_stdout(
    saved: Path, fmt: str, starts: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(saved), "--format", fmt]) == 0
    assert capsys.readouterr().out.startswith(starts)


def test_output_file_and_format_from_its_extension(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN -o report.html and no --format THEN the HTML lands there and stdout stays empty
    assert main(["report", str(saved), "-o", str(tmp_path / "out" / "report.html")]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "report.html" in err
    assert (tmp_path / "out" / "report.html").read_text().startswith("<!DOCTYPE html>")
    # AND an explicit --format wins over the extension; an unknown extension means the table
    assert main(["report", str(saved), "-f", "perfetto", "-o", str(tmp_path / "t.md")]) == 0
    assert json.loads((tmp_path / "t.md").read_text())["traceEvents"]
    assert main(["report", str(saved), "-o", str(tmp_path / "r.txt")]) == 0
    assert (tmp_path / "r.txt").read_text().startswith("ckptprof:")


def test_bad_input_is_one_line_and_exit_2(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for argv in (
        ["report", str(tmp_path / "missing.json")],
        ["report", str(bad)],
        ["report", str(saved), "-o", str(saved / "cannot" / "x.md")],  # a file is not a directory
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Traceback" not in err
    assert main(["report", str(saved), "--format", "pdf"]) == 2


def test_run_writes_html_and_trace(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a real run with --html and --trace
    html_path, trace_path = tmp_path / "r" / "report.html", tmp_path / "r" / "trace.json"
    argv = ["run", str(small_draft), "--devices", "cpu", "--no-probe", "-q", "-o", str(tmp_path / "run")]
    assert main([*argv, "--html", str(html_path), "--trace", str(trace_path)]) == 0
    capsys.readouterr()
    # THEN both files are written from the saved session, the same as `report` renders them
    session = Session.load(tmp_path / "run" / "session.json")
    assert session.verdict["summary"][:40] in html_path.read_text()
    trace = json.loads(trace_path.read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("cat") == "shard") == 8
    assert main(["report", str(tmp_path / "run" / "session.json"), "-f", "perfetto"]) == 0
    assert json.loads(capsys.readouterr().out) == trace


@pytest.mark.parametrize(
    "path", committed_sessions() or [None], ids=lambda p: p.parent.name + "/" + p.name if p else "none"
)
def test_every_committed_session_renders_in_every_format(
    path: Path | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if path is None:
        pytest.skip("no session committed under reports/ yet")
    for fmt in FORMATS:
        assert main(["report", str(path), "--format", fmt, "-o", str(tmp_path / f"out.{fmt}")]) == 0, fmt
    capsys.readouterr()
    assert json.loads((tmp_path / "out.perfetto").read_text())["traceEvents"]
    assert "<svg" in (tmp_path / "out.html").read_text()


def test_report_takes_separately_measured_ceilings(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a session run with --no-probe and a `ckptprof probe --json` output
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps({"storage_read_GBps": 1.5, "h2d_pinned_GBps": {"cuda:0": 55.0}}))
    # WHEN it is rendered with --ceilings
    assert main(["report", str(saved), "--format", "md", "--ceilings", str(probe)]) == 0
    out = capsys.readouterr().out
    # THEN the verdict quotes the ceiling and the report says where it came from
    assert "1.50 GB/s cold read ceiling" in out
    assert "measured separately" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["report", str(saved), "--ceilings", str(bad)]) == 2
    assert "probe --json" in capsys.readouterr().err

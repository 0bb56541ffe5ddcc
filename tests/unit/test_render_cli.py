"""`ckptprof report` re-renders a saved session; `run --html/--trace` write the same renderings."""

from __future__ import annotations

import gzip
import json
import re
from html import escape
from pathlib import Path
from typing import Any

import pytest

from ckptprof.analysis.verdict import compute_verdict
from ckptprof.cli import main as cli_main
from ckptprof.cli.main import main
from ckptprof.render import FORMATS, RENDERERS
from ckptprof.render.rows import headline
from ckptprof.results import Ceilings, Verdict
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def committed_sessions() -> list[Path]:
    """Session JSON files under reports/, most of them compressed (probe outputs and other JSON are not sessions)."""
    found = []
    for path in sorted([*REPORTS.rglob("*.json"), *REPORTS.rglob("*.json.gz")]):
        try:
            raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            data = json.loads(raw)
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
        verdict=Verdict.from_dict({"bottleneck": "storage", "summary": "storage-bound: 1.00 GB/s"}),
    )
    return session.save(tmp_path / "session.json")


@pytest.mark.parametrize(
    ("fmt", "starts"),
    [("table", "draft: 1.00 s load"), ("md", "## ckptprof verdict: storage-bound"), ("html", "<!DOCTYPE html>"),
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
    assert (tmp_path / "r.txt").read_text().startswith("draft: 1.00 s load")


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
    assert session.verdict.summary[:40] in html_path.read_text()
    trace = json.loads(trace_path.read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("cat") == "shard") == 8
    assert main(["report", str(tmp_path / "run" / "session.json"), "-f", "perfetto"]) == 0
    assert json.loads(capsys.readouterr().out) == trace


def as_reported(path: Path) -> Session:
    """The session as `report` renders it: loaded, its verdict computed again by this version."""
    session = Session.load(path)
    if session.ranks:
        session.verdict = compute_verdict(session)
    return session


def assert_renders_hold(session: Session, out: dict[str, str]) -> None:
    """Each format holds what the session does: the verdict, and per rank and model its device, role and wall;
    the trace a slice per shard; the JSON the session itself."""
    v = session.verdict
    rows = [(r, m) for r in session.ranks for m in r.models]
    # json: the session itself, the recomputed verdict included, plus the server-versus-replay rows it derives
    doc = json.loads(out["json"])
    derived = (doc.get("extra") or {}).pop("server_vs_replay", None)
    assert Session.from_dict(doc) == session
    assert (derived is not None) == (session.server_log is not None)
    # table: a headline per model with timings, then the run line naming each checkpoint, a row per rank and model,
    # the verdict's own line
    table = out["table"]
    lines = table.splitlines()
    run_at = next(i for i, line in enumerate(lines) if line.startswith("ckptprof: "))
    roles = list(dict.fromkeys(m.role for _, m in rows))
    assert [line.split(":", 1)[0] for line in lines[: len(roles)]] == roles
    assert run_at <= len(roles) + 2  # the headlines, a disagreement line at most, a blank line
    for m in session.models:
        assert f"{m.role} {m.path} ({len(m.shards)} shards, " in lines[run_at], m.path
    for r, m in rows:
        row = rf"^\s*{r.rank}\s+{re.escape(r.device)}\s+{re.escape(m.role)}\s+{m.wall_s:.2f}\s"
        assert re.search(row, table, re.MULTILINE), (r.rank, m.role)
    # md: the headline first, then the summary quoted; the same rows in the per-rank table
    md = out["md"]
    assert md.splitlines()[0] == f"## ckptprof verdict: {headline(session)}"
    for r, m in rows:
        row = rf"^\|\s*{r.rank}\s*\|\s*{re.escape(r.device)}\s*\|\s*{re.escape(m.role)}\s*\|\s*{m.wall_s:.2f}\s*\|"
        assert re.search(row, md, re.MULTILINE), (r.rank, m.role)
    # html: the headline in the title, each rank's model with its wall and shard count on the timeline
    doc = out["html"]
    assert f"<title>{escape(f'ckptprof: {headline(session)}')}</title>" in doc
    ends = [m.start_s + m.wall_s for _, m in rows] + [
        s.start_s + max(0.0, s.wall_s) for _, m in rows for s in m.shards
    ]
    if max(ends, default=0.0) > 0:
        assert doc.count("<svg") >= 2  # the timeline and the throughput chart
        for r, m in rows:
            assert escape(f"rank {r.rank} {m.role}: {m.wall_s:.3f} s, {len(m.shards)} shards") in doc
    else:
        assert "no shard timings in this session" in doc
    # perfetto: a process per rank, a slice per shard, the verdict in the trace's own data
    trace = json.loads(out["perfetto"])
    processes = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert processes == [
        f"rank {r.rank} ({r.device})" + ("" if r.status == "ok" else f" {r.status}")
        for r in sorted(session.ranks, key=lambda r: r.rank)
    ]
    shards = [e for e in trace["traceEvents"] if e.get("cat") == "shard"]
    assert len(shards) == sum(len(m.shards) for _, m in rows)
    assert sum(e["args"]["bytes"] for e in shards) == sum(s.bytes for _, m in rows for s in m.shards)
    if v is not None:
        assert f"verdict: {v.summary}" in table.splitlines()
        if v.summary:
            # the quote wraps at 100 columns: its lines joined give the summary back
            quote = [line[2:] for line in md.splitlines() if line.startswith("> ")]
            assert " ".join(" ".join(quote).split()).startswith(" ".join(v.summary.split()))
            assert f'<p class="summary">{escape(v.summary)}</p>' in doc
        assert (trace["otherData"]["bottleneck"], trace["otherData"]["summary"]) == (v.bottleneck, v.summary)


def test_the_content_checks_see_what_a_session_holds(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the saved one-shard session rendered in every format
    out = {}
    for fmt in FORMATS:
        assert main(["report", str(saved), "--format", fmt]) == 0
        out[fmt] = capsys.readouterr().out
    session = as_reported(saved)
    # THEN the checks the committed sessions get hold, on figures written in the session
    assert_renders_hold(session, out)
    assert re.search(r"^\s*0\s+cpu\s+draft\s+1\.00\s", out["table"], re.MULTILINE)
    assert "storage-bound" in session.verdict.summary and session.verdict.summary in out["perfetto"]
    # AND they fail on a rendering that lost a rank's wall, a shard's bytes or the verdict
    for fmt, old, new in (
        ("table", "1.00", "9.99"),
        ("md", "1.00", "9.99"),
        ("html", "1.000 s", "9.990 s"),
        ("perfetto", '"bytes":1000000000', '"bytes":1'),
        ("json", "storage-bound", "cpu-bound"),
    ):
        assert old in out[fmt], fmt
        with pytest.raises(AssertionError):
            assert_renders_hold(session, {**out, fmt: out[fmt].replace(old, new)})


COMMITTED = committed_sessions()
# Encoding the HTML's PNGs is most of a committed session's render time (matplotlib's savefig, about a second
# each): every session still builds its figures, and one in PNG_EVERY, spread over the reports, also encodes them
# (28 of the 283 sessions committed on 2026-12-07).
PNG_EVERY = 10


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_committed_session_renders_in_every_format(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ckptprof.render import plots

    if COMMITTED.index(path) % PNG_EVERY:
        monkeypatch.setattr(plots, "_png", lambda fig: "")
    for fmt in FORMATS:
        assert main(["report", str(path), "--format", fmt, "-o", str(tmp_path / f"out.{fmt}")]) == 0, fmt
    capsys.readouterr()
    out = {fmt: (tmp_path / f"out.{fmt}").read_text() for fmt in FORMATS}
    assert_renders_hold(as_reported(path), out)


def test_the_project_has_committed_sessions_to_render() -> None:
    # The parametrized test above runs once per session under reports/: none found would run it zero times.
    assert len(committed_sessions()) >= 100


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
    flat = " ".join(out.split())  # Markdown prose wraps at 100 columns
    assert "1.50 GB/s cold read ceiling" in flat
    assert "measured separately" in flat
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["report", str(saved), "--ceilings", str(bad)]) == 2
    assert "probe --json" in capsys.readouterr().err


# -- a bad session is refused in one line; what is written is strict JSON ---------------------------------------


def strict_json(text: str) -> Any:
    """json.loads that fails on the NaN / Infinity tokens Python's json would otherwise accept."""
    return json.loads(text, parse_constant=lambda token: pytest.fail(f"non-JSON token {token} in output"))


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('"wall_s": 1.0', '"wall_s": NaN', "wall_s: not a finite number (NaN)"),
        ('"read_s": 0.5', '"read_s": Infinity', "read_s: not a finite number (Infinity)"),
        (
            '"read_s": 0.5',
            '"read_s": "0.5"',
            "read_s: expected a number of seconds >= 0, got the string '0.5'",
        ),
        (
            '"h2d_s": 0.2',
            '"h2d_s": -255967232.0',
            "h2d_s: expected a number of seconds >= 0, got -255967232.0",
        ),
        ('"bytes": 1000000000', '"bytes": -5', "bytes: expected a whole number >= 0, got -5"),
        ('"bytes": 1000000000', '"bytes": [1]', "bytes: expected a whole number >= 0, got a list"),
        ('"ranks": [', '"ranks": 7, "x": [', "ranks: expected a list, got 7"),
        ('"devices": [\n   "cpu"\n  ]', '"devices": 3', "config.devices: expected a list, got 3"),
    ],
    ids=[
        "nan",
        "infinity",
        "string",
        "negative",
        "negative-bytes",
        "list-bytes",
        "ranks-not-a-list",
        "devices",
    ],
)
def test_report_refuses_a_bad_session_in_one_line(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, field: str
) -> None:
    # GIVEN a saved session with one bad field
    text = saved.read_text()
    assert old in text
    bad = tmp_path / "bad.json"
    bad.write_text(text.replace(old, new, 1))
    # WHEN it is rendered in any format THEN exit 2 and one line naming the file and the field, nothing on stdout
    for fmt in FORMATS:
        assert main(["report", str(bad), "--format", fmt]) == 2, fmt
        out, err = capsys.readouterr()
        line = err.strip()
        assert line.count("\n") == 0 and "Traceback" not in line
        assert str(bad) in line and field in line and out == ""


def test_report_refuses_ceilings_that_are_not_finite(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = tmp_path / "probe.json"
    probe.write_text('{"storage_read_GBps": NaN, "h2d_pinned_GBps": {"cuda:0": 55.0}}')
    assert main(["report", str(saved), "--format", "json", "--ceilings", str(probe)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and str(probe) in err and "ceilings.storage_read_GBps: not a finite number" in err


def test_json_and_perfetto_renderings_are_strict_json() -> None:
    # GIVEN a session in memory with non-finite values (no file validation in between: the API's own sessions)
    shard = ShardTiming(file="a", bytes=10, read_s=float("nan"), wall_s=float("inf"), h2d_s=0.1)
    session = Session(
        ranks=[RankResult(rank=0, device="cpu", models=[RankModel(role="draft", wall_s=float("nan"), shards=[shard])])],
        ceilings=Ceilings.from_dict({"storage_read_GBps": float("inf")}),
        verdict=Verdict.from_dict({"rank_skew": float("nan"), "summary": "x"}),
    )  # fmt: skip
    # THEN both JSON renderings parse as strict JSON, the non-finite values written as null
    assert strict_json(RENDERERS["json"](session))["verdict"]["rank_skew"] is None
    events = strict_json(RENDERERS["perfetto"](session))["traceEvents"]
    shard_event = next(e for e in events if e.get("cat") == "shard")
    assert shard_event["args"]["read_s"] is None and shard_event["args"]["wall_s"] is None


def leaf_paths(node: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every key path of a JSON document (containers too), the first two items of each list."""
    out = [path] if path else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += leaf_paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:2]):
            out += leaf_paths(v, (*path, i))
    return out


MUTATIONS: list[Any] = [float("nan"), float("inf"), -1, "3.5", None, [], {}, True, 1e308, 10**30, 5e-324]


def test_no_corruption_of_any_field_gives_a_traceback_or_non_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every field of a session with models, ceilings, a verdict and strategies, set to each bad value in turn:
    `report` (every format) and `compare` exit 0 with strict JSON or 2 with one line, never a traceback."""
    from ckptprof.render import plots

    # The HTML's plots are drawn from the ranks' timings and the ceilings alone: a corrupted field elsewhere draws
    # the same pictures as the intact session, so only those corruptions pay for encoding the PNGs (three quarters
    # of this test's time otherwise); every figure is still built from the corrupted session.
    encode = plots._png
    plotted = {"ranks", "ceilings"}
    drawn: list[bool] = [True]
    monkeypatch.setattr(plots, "_png", lambda fig: encode(fig) if drawn[0] else "")
    # Drawn at a few dots an inch: every artist is still laid out and rasterised from the corrupted values (what could
    # raise), at a fraction of the pixels. The real resolution is drawn by the committed sessions' test.
    monkeypatch.setattr(plots, "PNG_DPI", 12)
    # One parser for the thousands of runs below: building it is a few ms a run, and what is tested is the reading
    # of a corrupted session, not the parsing of the same argv.
    parser = cli_main.build_parser()
    monkeypatch.setattr(cli_main, "build_parser", lambda: parser)
    shard = ShardTiming(file="a.safetensors", bytes=10**9, read_s=0.5, deserialize_s=0.1, h2d_s=0.2, wall_s=1.0,
                        nonresident_bytes=10**9, storage_bytes=10**9, h2d_bytes=10**9, tensors=2)  # fmt: skip
    model = RankModel(role="target", wall_s=1.0, shards=[shard], faithful_wall_s=0.9, faithful_walls=[0.9, 1.0],
                      disk="vda", disk_busy_s=0.8, disk_read_bytes=10**9)  # fmt: skip
    good = Session(
        config={"tp": 1, "devices": ["cuda:0"], "cache": "cold", "strategy": "sglang", "faithful_rounds": 2},
        models=[ModelInfo("target", "/d", "ext4", 10**9, [ShardInfo("a.safetensors", 10**9, 2)], 0, "dropped")],
        ranks=[RankResult(rank=0, device="cuda:0", models=[model], wall_s=1.2, peak_rss_bytes=10**9)],
        ceilings=Ceilings.from_dict({"storage_read_1_stream_GBps": 1.4, "storage_read_n_streams_GBps": 1.8, "storage_streams": 8,
                  "page_cache_read_GBps": 7.0, "h2d_pinned_GBps": {"cuda:0": 50.0},
                  "h2d_pageable_GBps": {"cuda:0": 9.0}, "fresh_write_GBps": 3.0}),
        verdict=Verdict.from_dict({"bottleneck": "storage", "summary": "storage-bound", "load_wall_s": 1.0, "rank_skew": 1.0,
                 "predictions": [{"flags": "--x", "predicted_s": 0.8, "why": "w"}]}),
        extra={"strategies": {"rows": [{"strategy": "sglang", "status": "ok", "wall_s": 1.0, "GBps": 1.0,
                                        "x_floor": 1.1, "shares": {"storage": 0.9}}],
                              "warnings": ["w"], "summary": "s"},
               "prediction_check": [{"flags": "--x", "predicted_s": 0.8, "measured_s": 0.9, "error": -0.1}],
               "py_spy_top_frames": {"0": {"read": [["f (x.py:1)", 0.5]]}}},
    )  # fmt: skip
    base = str(good.save(tmp_path / "base.json"))
    doc = json.loads(Path(base).read_text())
    bad = tmp_path / "bad.json"
    for path in leaf_paths(doc):
        drawn[0] = path[0] in plotted
        for value in MUTATIONS:
            mutated = json.loads(Path(base).read_text())
            node = mutated
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            bad.write_text(json.dumps(mutated))
            runs = [["report", str(bad), "--format", fmt] for fmt in FORMATS]
            runs += [["compare", base, str(bad), "--fail-above", "10", "--format", "json"]]
            runs += [["compare", str(bad), base, "--fail-above", "10"]]
            for argv in runs:
                rc = main(argv)
                out, err = capsys.readouterr()
                where = f"{path} = {value!r}: {argv}"
                assert rc in (0, 1, 2), where
                if rc == 2:
                    assert err.strip().count("\n") == 0 and "Traceback" not in err, where
                    assert out == "" or argv[0] == "compare", where
                    if argv[0] == "report":  # refused on load: every other format would be refused alike
                        break
                elif argv[-1] in ("json", "perfetto"):
                    strict_json(out)

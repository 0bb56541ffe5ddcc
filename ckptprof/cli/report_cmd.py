"""`ckptprof report`: render a saved session again (table, Markdown, HTML, JSON, Perfetto trace), no re-run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ckptprof.errors import UsageError
from ckptprof.render import FORMATS, RENDERERS
from ckptprof.session import Session

EPILOG = """\
formats:
  table     the terminal summary `ckptprof run` prints (default)
  md        GitHub Markdown, verdict first: paste it into an issue
  html      one self-contained file: verdict, SVG timeline, throughput vs ceilings, tables (no network)
  json      the session itself (the versioned JSON contract)
  perfetto  Chrome trace-event JSON: open it in https://ui.perfetto.dev (one process per rank)
With -o FILE.html or FILE.md and no --format, the format follows the extension.

examples:
  ckptprof report ckptprof-runs/20260101-120000/session.json
  ckptprof report session.json -o report.html
  ckptprof report session.json --format perfetto -o trace.json
  ckptprof report session.json --engine-output      # what the real engine wrote, per rank
  ckptprof report watch-boot1 -o boot1.html          # a `ckptprof watch` session (its -o folder)
"""

# Only extensions that cannot be mistaken: a .json could be the session or a trace.
_BY_EXTENSION = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def write_output(path: str | Path, text: str) -> Path:
    """Write a rendering; a path that cannot be written is bad input (exit 2), named in the message."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return path


def emit(text: str, output: str | None) -> None:
    """To ``output`` when given ('-' too means stdout), else stdout."""
    if output and output != "-":
        saved = write_output(output, text)
        print(f"written to {saved}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def write_renderings(session: Session, outputs: dict[str, str | None]) -> None:
    """``{format: path}``: write each rendering that has a path (used by `run --html/--trace`)."""
    for fmt, path in outputs.items():
        if path:
            emit(RENDERERS[fmt](session), path)


def pick_format(fmt: str | None, output: str | None) -> str:
    if fmt:
        return fmt
    return _BY_EXTENSION.get(Path(output).suffix.lower(), "table") if output else "table"


def attach_ceilings(session: Session, path: str) -> None:
    """Ceilings measured by a separate `ckptprof probe --json`, for a session that has none of its own."""
    import json

    from ckptprof.errors import SessionFileError, UsageError
    from ckptprof.results import Ceilings
    from ckptprof.session import InvalidField, validate_ceilings

    if session.ceilings != Ceilings():
        raise UsageError(f"--ceilings: {path}: this session already has ceilings measured in its own run")
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SessionFileError(path, f"not a probe JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict) or not any(k.endswith("GBps") for k in data):
        raise SessionFileError(path, "not `ckptprof probe --json` output (no *_GBps keys)")
    try:
        validate_ceilings(data, "ceilings")
    except InvalidField as exc:
        raise SessionFileError(path, f"not valid `ckptprof probe --json` output: field {exc}") from None
    session.ceilings = Ceilings.from_dict(data)
    session.notes = [n for n in session.notes if not n.startswith("ceilings not measured")]
    session.notes.append(f"ceilings from {path}, measured separately from this run (not in the same run)")


class ReportCommand:
    name = "report"
    help = "Render a saved session as a table, Markdown, self-contained HTML, JSON or a Perfetto trace."

    def prepare_parser(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
        parser.add_argument(
            "session",
            help="a session JSON written by `ckptprof run` (session.json), or a `ckptprof watch` session or its "
            "-o folder (table, md, html or json)",
        )
        parser.add_argument(
            "-f", "--format", choices=FORMATS, default=None, help="output format (default: table)"
        )
        parser.add_argument("-o", "--output", metavar="PATH", help="write here instead of stdout")
        parser.add_argument(
            "--ceilings",
            metavar="PROBE_JSON",
            help="for a session run with --no-probe: take the ceilings from `ckptprof probe --json` output "
            "(the report says they were measured separately)",
        )
        parser.add_argument(
            "--engine-output",
            action="store_true",
            help="print what the real engine (sglang / vllm) wrote while the ranks imported and drove it in the "
            "faithful pass (kept in the session, never mixed into ckptprof's output), rank by rank",
        )

    def run(self, args: argparse.Namespace) -> int:
        from ckptprof.watch.session_file import load_session

        data, session = load_session(args.session)
        if session is None:
            return _report_watch(data, args)
        if args.engine_output:
            from ckptprof.render.rows import engine_output_text

            emit(engine_output_text(session), args.output)
            return 0
        if args.ceilings:
            attach_ceilings(session, args.ceilings)
        if session.ranks:
            from ckptprof.analysis.verdict import compute_verdict

            # The verdict is derived data: recompute it, so a saved run gets this version's analysis.
            session.verdict = compute_verdict(session)
        fmt = pick_format(args.format, args.output)
        emit(RENDERERS[fmt](session), args.output)
        return 0


def _report_watch(doc: dict[str, Any], args: argparse.Namespace) -> int:
    """A watch session: rendered by render/watch_report.py; what only a replay has is refused in one line."""
    from ckptprof.render.watch_report import FORMATS as WATCH_FORMATS
    from ckptprof.render.watch_report import render

    fmt = pick_format(args.format, args.output)
    if fmt not in WATCH_FORMATS:
        raise UsageError(f"{args.session}: a watch session renders as {', '.join(WATCH_FORMATS)}, not {fmt}")
    if args.ceilings or args.engine_output:
        flag = "--ceilings" if args.ceilings else "--engine-output"
        raise UsageError(f"{args.session}: {flag} is for a run's session; this is a watch session")
    emit(render(doc, fmt), args.output)
    return 0

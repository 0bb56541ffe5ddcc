"""Every reading the reader gives, as JSON, for one tree: each log of the corpus as-is and in 12 decorated forms
(indented, CRLF, quoted, framed, behind a compose or kubectl prefix, coloured, with notebook links, partly quoted,
quoted behind colour codes, quoted with CRLF), and analyze_path of two concatenations at nine boot choices.

    python identity.py TREE OUT.json      # then: python compare.py BASE.json WORK.json

/tmp/bl34/c16.log and c4.log: benchmarks/bench_bootlog_real.write_corpus_file at 16 MiB and 4 MiB."""

import glob
import json
import sys
from pathlib import Path

root, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
import ckptprof  # noqa: E402 - the tree named on the command line

assert ckptprof.__file__.startswith(root), ckptprof.__file__
from ckptprof.bootlog import analyze_bytes, analyze_path  # noqa: E402

QUOTE, CODE = b"> ", b"\x1b[2m> "


def dump(report: object) -> str:
    return json.dumps(getattr(report, "to_dict", lambda: report.__dict__)(), default=str, sort_keys=True)


def variants(data: bytes) -> dict[str, bytes]:
    lines = data.split(b"\n")
    return {
        "as-is": data,
        "indent": b"\n".join(b"    " + line for line in lines),
        "crlf": data.replace(b"\n", b"\r\n"),
        "quote": b"\n".join(QUOTE + line for line in lines),
        "frame": b"\n".join(b"\xe2\x94\x82 " + line + b" \xe2\x94\x82" for line in lines),
        "compose": b"\n".join(b"sglang-1  | " + line for line in lines),
        "rfc": b"\n".join(b"2025-12-18T08:24:02.123456789Z " + line for line in lines),
        "ansi": b"\n".join(b"\x1b[32m" + line + b"\x1b[0m" for line in lines),
        "link": data.replace(b"/", b"[/x](http://h:8888/x)", 3),
        "ansiquote": b"\n".join(
            (CODE if i % 9 < 5 else QUOTE if i % 9 < 7 else b"") + line for i, line in enumerate(lines)
        ),
        "crlfquote": b"\r\n".join((QUOTE if i % 5 < 3 else b"") + line for i, line in enumerate(lines)),
        "linkmany": data.replace(b"/", b"[/x](http://h:8888/x)"),
        "quotepart": b"\n".join((QUOTE if i % 7 < 4 else b"") + line for i, line in enumerate(lines)),
    }


readings = {}
logs = glob.glob("/work/main/tests/fixtures/logs/real/*.log") + glob.glob(
    "/work/main/tests/fixtures/logs/*.log"
)
for log in sorted(logs):
    for name, data in variants(Path(log).read_bytes()).items():
        readings[f"{log}:{name}"] = dump(analyze_bytes(data))
for path in ("/tmp/bl34/c16.log", "/tmp/bl34/c4.log"):
    for boot in (None, 1, 2, 5, 17, 30, -1, -2, -5):
        try:
            readings[f"{path}:{boot}"] = dump(analyze_path(path, boot=boot))
        except LookupError as exc:
            readings[f"{path}:{boot}"] = f"LookupError {exc}"
Path(out).write_text(json.dumps(readings))
print(len(readings))

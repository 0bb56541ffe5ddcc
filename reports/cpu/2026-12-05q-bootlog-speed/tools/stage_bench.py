"""CPU time of the reader's stages that this campaign changed, for one tree (PYTHONPATH=TREE), on one 16 MiB file.

    PYTHONPATH=TREE python stage_bench.py /tmp/bl34/c16.log [CALLS.pickle]

Collects what the reader asks while it reads the file (the messages read_message reads, the frames parse_bar reads)
with the tree's own reader, then times the same calls alone, best of 5. With CALLS.pickle, the calls are those saved
there (saved by the first tree run with it), so that two trees answer the very same calls: a digest of the answers
says whether they agree (a tree whose rules read more lines is asked more messages)."""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import time

from ckptprof.bootlog import parse, phases, reading, wrappers
from ckptprof.bootlog.phases import BootLogAnalyzer, iter_blocks

path = sys.argv[1]
messages: list[tuple[str, tuple[reading.EngineLog, ...]]] = []
original = phases.read_message


def _collect(message: str, engines: tuple[reading.EngineLog, ...]) -> reading.Reading:
    messages.append((message, engines))
    return original(message, engines)


phases.read_message = _collect
with open(path, "rb") as stream:
    blocks = list(iter_blocks(stream))
analyzer = BootLogAnalyzer()
lines: list[str] = []
feed_line = BootLogAnalyzer.feed_line


def _feed_line(self: BootLogAnalyzer, line: str) -> None:
    lines.append(line)
    feed_line(self, line)


BootLogAnalyzer.feed_line = _feed_line  # type: ignore[method-assign]
for block in blocks:
    analyzer.feed_block(block)
phases.read_message = original
BootLogAnalyzer.feed_line = feed_line  # type: ignore[method-assign]
frames = [seg for line in lines for seg in parse.strip_ansi(line).split("\r") if "%" in seg]
if len(sys.argv) > 2:
    if os.path.exists(sys.argv[2]):
        with open(sys.argv[2], "rb") as saved_in:
            asked, frames = pickle.load(saved_in)
        by_name = {engine.name: engine for engine in reading.ENGINES}
        messages = [(message, tuple(by_name[name] for name in names)) for message, names in asked]
    else:
        with open(sys.argv[2], "wb") as saved_out:
            asked = [(message, tuple(engine.name for engine in engines)) for message, engines in messages]
            pickle.dump((asked, frames), saved_out)


def best(name: str, call, items) -> None:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(5):
        start = time.process_time()
        answers = [call(item) for item in items]
        times.append(time.process_time() - start)
    digest = hashlib.md5(repr(answers).encode()).hexdigest()[:10]
    print(f"{name:24s} {len(items):6d} calls {min(times) * 1000:7.1f} ms  answers {digest}")


best("unwrap_paste (blocks)", lambda block: wrappers.unwrap_paste(block)[0], blocks)
best(
    "read_message",
    lambda item: (lambda r: (r.frame, r.rule and r.rule.needle, r.action, r.model, r.elapsed_s, r.may_fail))(
        reading.read_message(*item)
    ),
    messages,
)
best("parse_bar", parse.parse_bar, frames)

"""What the reader reads afresh in each copy of the corpus, when one analyzer reads it twice in one file: messages read
whole, readings-cache misses, worker tags read by their pattern, and the misses of the memos on stamps, process names
and bars. A cache that remembers the corpus reads the second copy for less, which the benchmark (whose file repeats the
corpus) would count as speed.

    python copies.py TREE          # from outside the tree; reads TREE's tests/fixtures/logs/real
"""

import sys
from pathlib import Path

tree = sys.argv[1]
sys.path.insert(0, tree)
import ckptprof  # noqa: E402 - the tree named on the command line

assert ckptprof.__file__.startswith(tree), ckptprof.__file__
from ckptprof.bootlog import bars, parse, phases, reading, timestamps  # noqa: E402
from ckptprof.bootlog.phases import BootLogAnalyzer, iter_blocks  # noqa: E402

REAL = Path(tree) / "tests" / "fixtures" / "logs" / "real"
corpus = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in sorted(REAL.glob("*.log")))
path = Path("/tmp/copies-twice.log")
path.write_bytes(corpus + corpus)

copy = [0]
counts = {"whole": [0, 0], "missed": [0, 0], "tags": [0, 0]}
if hasattr(reading, "_read_message"):
    whole = reading._read_message

    def counted_whole(message, engines):
        counts["whole"][copy[0]] += 1
        return whole(message, engines)

    reading._read_message = counted_whole
missed = phases.read_message


def counted_missed(message, engines):
    counts["missed"][copy[0]] += 1
    return missed(message, engines)


phases.read_message = counted_missed
pattern = parse._WORKER_PREFIX_RE


class Tags:
    def match(self, text):
        counts["tags"][copy[0]] += 1
        return pattern.match(text)


parse._WORKER_PREFIX_RE = Tags()
memos = {"stamps": timestamps.timestamp_seconds, "process names": parse.worker_rank_label, "bars": bars.bar_kind}
at_half = {}
analyzer = BootLogAnalyzer()
fed = 0
for block in iter_blocks(path.open("rb")):
    if fed >= len(corpus) and copy[0] == 0:
        copy[0] = 1
        at_half = {name: memo.cache_info().misses for name, memo in memos.items()}
    analyzer.feed_block(block)
    fed += len(block)
for name, memo in memos.items():
    counts[name] = [at_half[name], memo.cache_info().misses - at_half[name]]
print(f"{tree}: corpus {len(corpus) / 1e6:.1f} MB; first copy / second copy")
for name, (first, second) in counts.items():
    print(f"  {name:15s} {first:6d} {second:6d}")

"""The reader on /tmp/bl34/c16.log with one stage made free at a time (_on_record, then feed_line, then
parse_record), and the whole-block passes alone: best of 3 CPU times. PYTHONPATH=TREE python stages_free.py"""

import time

from ckptprof.bootlog import parse, phases, prefilter, wrappers
from ckptprof.bootlog.phases import BootLogAnalyzer, iter_blocks

path = "/tmp/bl34/c16.log"
with open(path, "rb") as s:
    blocks = list(iter_blocks(s))


def run(label, prep=None, n=3):
    ts = []
    for _ in range(n):
        a = BootLogAnalyzer()
        if prep:
            prep(a)
        t = time.process_time()
        for b in blocks:
            a.feed_block(b)
        ts.append(time.process_time() - t)
    print(f"{label:40s} {min(ts) * 1000:7.1f} ms")


run("full")


def noop_record(a):
    a._on_record = lambda r: None


run("on_record no-op", noop_record)


def noop_both(a):
    a._on_record = lambda r: None
    a.feed_line = lambda l: None


run("on_record+feed_line no-op", noop_both)
orig_pr = phases.parse_record
R = orig_pr("x")
phases.parse_record = lambda t: R
run("... + parse_record no-op", noop_both)
phases.parse_record = orig_pr
t = time.process_time()
for b in blocks:
    wrappers.unwrap_paste(b, None)
print("unwrap", (time.process_time() - t) * 1000)
t = time.process_time()
for b in blocks:
    prefilter.rare_line_starts(b)
print("rare", (time.process_time() - t) * 1000)
t = time.process_time()
for b in blocks:
    list(prefilter.CANDIDATE_RE.finditer(b))
print("candidate finditer", (time.process_time() - t) * 1000)
t = time.process_time()
for b in blocks:
    parse.looks_binary(b)
from ckptprof.bootlog.timestamps import last_timestamp_before

for b in blocks:
    last_timestamp_before(b, len(b))
print("binary+lastts", (time.process_time() - t) * 1000)
t = time.process_time()
for b in blocks:
    b.decode("utf-8", "replace").split("\n")
print("decode+split", (time.process_time() - t) * 1000)

#!/bin/bash
# Run from the repository root, with _bench_trees/base/ckptprof and _bench_trees/head/ckptprof the two trees' packages
# (git archive REV ckptprof | tar -x -C _bench_trees/NAME); on the device: run(command="bash _bench_trees/campaign.sh",
# carry=["_bench_trees"]), this file copied there.
# The device host's CPU: paired reads of 16 MiB of the real corpus, the session's start against its end (twice);
# then the 64 MiB benchmark for both, twice.
set -u
export PYTHONUNBUFFERED=1
P=reports/cpu/2026-12-06l-bootlog-speed/tools/paired.py
python3 -c "import sys; sys.path.insert(0, '.'); from pathlib import Path; from benchmarks.bench_bootlog_real import write_corpus_file; write_corpus_file(Path('/tmp/c16.log'), 16 << 20)"
lscpu | grep -E "Model name|^CPU\(s\)|MHz" ; python3 --version
echo "== base -> head"; python3 $P $PWD/_bench_trees/base $PWD/_bench_trees/head /tmp/c16.log 16
echo "== base -> head, again"; python3 $P $PWD/_bench_trees/base $PWD/_bench_trees/head /tmp/c16.log 16 | tail -1
for i in 1 2; do for t in base head; do
  mkdir -p /tmp/b-$t; rm -rf /tmp/b-$t/*; cp -r _bench_trees/$t/ckptprof /tmp/b-$t/; cp -r benchmarks tests /tmp/b-$t/ 2>/dev/null
  (cd /tmp/b-$t && PYTHONPATH=. python3 -m pytest -q -p no:cacheprovider benchmarks/bench_bootlog_real.py -k reads_the_real --benchmark-json=$OUT/bench-$t-$i.json > /dev/null 2>&1)
  python3 -c "import json; d=json.load(open('$OUT/bench-$t-$i.json'))['benchmarks'][0]['extra_info']; print('$t', $i, d['MBps_cpu_median'], d['MBps_cpu'], d['cpu_over_line_walk'])"
done; done

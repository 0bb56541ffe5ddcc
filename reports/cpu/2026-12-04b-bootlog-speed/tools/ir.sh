#!/bin/bash
# /tmp/bl34/c2.log: the first 2 MiB of benchmarks/bench_bootlog_real.write_corpus_file's file (the real-log corpus
# concatenated); run once with FILE=none for the import and warm-up alone, and subtract.
# ir.sh ROOT FILE -> callgrind Ir (millions) of analyze_path(FILE) after import and a 64 kB warm-up
R=$1; F=$2
cd /tmp && PYTHONPATH=$R valgrind --tool=callgrind --callgrind-out-file=/dev/null /root/.pyenv/versions/3.11.7/bin/python -c "
from ckptprof.bootlog.phases import analyze_bytes, analyze_path
analyze_bytes(open('/tmp/bl34/c4.log','rb').read(1<<16))
if '$F' != 'none': analyze_path('$F')" 2>&1 | grep -E "Collected" | awk '{print $4}'

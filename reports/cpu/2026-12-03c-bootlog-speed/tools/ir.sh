#!/bin/bash
# ir.sh ROOT FILE -> callgrind Ir of: import, warm-up on 64 kB, then analyze_path(FILE) if FILE != none
R=$1; F=$2
cd /tmp && PYTHONPATH=$R valgrind --tool=callgrind --callgrind-out-file=/dev/null /root/.pyenv/versions/3.11.7/bin/python -c "
from ckptprof.bootlog.phases import analyze_bytes, analyze_path
analyze_bytes(open('/tmp/bl34/c4.log','rb').read(1<<16))
if '$F' != 'none': analyze_path('$F')" 2>&1 | grep -E "Collected" | awk '{print $4}'

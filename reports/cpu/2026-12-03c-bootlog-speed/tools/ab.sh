#!/bin/bash
# usage: ab.sh FILE ROUNDS  -> alternates base and work subprocesses, 2 runs each per round
F=$1; R=$2
for i in $(seq $R); do
  echo "base $(PYTHONPATH=/tmp/base-tree python /tmp/bl34/one.py $F 2)"
  echo "work $(PYTHONPATH=/work/main python /tmp/bl34/one.py $F 2)"
done | python -c "
import sys, statistics, os
d={'base':[], 'work':[]}
for l in sys.stdin:
    k, *v = l.split(); d[k] += [min(map(float, v))]
mb = os.path.getsize('$F')/1e6
for k, v in d.items(): print(k, 'median %.3f s  %.1f MB/s' % (statistics.median(v), mb/statistics.median(v)), ' '.join('%.3f'%x for x in v))
r = [w/b for b, w in zip(d['base'], d['work'])]; print('work/base paired median %.3f' % statistics.median(r), ' '.join('%.2f'%x for x in r))
"; uptime

#!/usr/bin/env bash
# Run a command with this process tree's reads from the disk under DIR capped at RATE bytes/s (cgroup io.max on
# cgroup v2, blkio.throttle.read_bps_device on v1): the disk-bound box (a disk at 1.36-1.45 GB/s) on a
# machine whose disk is faster. Exits 3, running nothing, when neither interface can be written.
# Usage: bash reports/h200/throttle.sh DIR RATE COMMAND...
set -uo pipefail
DIR=${1:?dir}; RATE=${2:?bytes per second}; shift 2
[ -e "$DIR" ] || { echo "throttle: no such file or directory: $DIR" >&2; exit 2; }
DEV=$(python3 -c "import os,sys; s=os.stat(sys.argv[1]); print(f'{os.major(s.st_dev)}:{os.minor(s.st_dev)}')" "$DIR")
CG=/sys/fs/cgroup
if [ -f $CG/cgroup.controllers ] && grep -qw io $CG/cgroup.controllers; then
  G=$CG/ckptprof-throttle
  mkdir -p $G && echo +io > $CG/cgroup.subtree_control 2>/dev/null
  if echo "$DEV rbps=$RATE" > $G/io.max 2>/dev/null && echo $$ > $G/cgroup.procs 2>/dev/null; then
    echo "throttle: cgroup v2 io.max $DEV rbps=$RATE ($(cat $G/io.max))"
    exec "$@"
  fi
fi
for V1 in $CG/blkio $CG/blkio,cpuacct $CG/cpuacct,blkio; do
  [ -d $V1 ] || continue
  G=$V1/ckptprof-throttle
  mkdir -p $G 2>/dev/null || continue
  if echo "$DEV $RATE" > $G/blkio.throttle.read_bps_device 2>/dev/null && echo $$ > $G/cgroup.procs 2>/dev/null; then
    echo "throttle: cgroup v1 blkio.throttle.read_bps_device $(cat $G/blkio.throttle.read_bps_device)"
    exec "$@"
  fi
done
echo "throttle: cannot cap reads from $DEV here (no writable io.max or blkio.throttle.read_bps_device)" >&2
exit 3

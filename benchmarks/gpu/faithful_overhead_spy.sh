#!/usr/bin/env bash
# The faithful-overhead benchmark (bench_faithful_overhead.py) under py-spy, every process of it (pytest and each
# spawned rank), every thread, idle samples included, as raw collapsed stacks: which frames a rank's thread spends
# the faithful pass in and not the reference's (issue 32 item 4). Both passes run in the same rank processes, so
# py-spy's pauses fall on both alike. Run from the repository root on the GPU machine:
#   bash benchmarks/gpu/faithful_overhead_spy.sh OUTDIR CHECKPOINT_DIR
# PATHS, TPS, CACHES, DEVICE, ROUNDS and RATE (samples a second, default 250) as faithful_overhead.sh takes them.
# Writes OUTDIR/spy.txt (py-spy's raw format: one stack per line, its count last) and OUTDIR/faithful_overhead.json.
set -euo pipefail
OUT=${1:?outdir}
CKPT=${2:?checkpoint dir}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export CKPTPROF_BENCH_CKPT=$CKPT CKPTPROF_BENCH_TPS=${TPS:-8} CKPTPROF_BENCH_CACHES=${CACHES:-warm}
export CKPTPROF_BENCH_PATHS=${PATHS:-sglang-mt:num_threads=8} CKPTPROF_BENCH_DEVICE=${DEVICE:-cuda:0}
export CKPTPROF_BENCH_OVERHEAD_ROUNDS=${ROUNDS:-12} CKPTPROF_BENCH_ALL_RANKS=${ALL_RANKS:-1}
py-spy record --subprocesses --threads --idle --rate "${RATE:-250}" --format raw -o "$OUT/spy.txt" -- \
  python3 -m pytest benchmarks/bench_faithful_overhead.py -p no:cacheprovider -q \
  --benchmark-json="$OUT/faithful_overhead.json" --benchmark-columns=min,median,max,rounds

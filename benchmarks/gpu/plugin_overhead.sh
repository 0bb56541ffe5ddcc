#!/usr/bin/env bash
# Issue 37 on a GPU: pytest-benchmark's median of the ckptprof_replay fixture against the load wall, TP1 and TP8 with
# every rank on one GPU, warm and cold. Run from the repository root on the GPU machine:
#   bash benchmarks/gpu/plugin_overhead.sh OUTDIR [CHECKPOINT_DIR]
# Without CHECKPOINT_DIR the benchmark synthesises its 1 GB 16-shard draft. TPS, CACHES, DEVICE and ROUNDS override
# the defaults ("1 8", "warm cold", cuda:0, 5). Writes OUTDIR/plugin_overhead.json (pytest-benchmark's, every
# round's figures in extra_info) and OUTDIR/plugin_overhead.txt (the table below).
set -euo pipefail
OUT=${1:?outdir}
mkdir -p "$OUT"
export PYTHONPATH=$PWD
export CKPTPROF_BENCH_TPS=${TPS:-1 8} CKPTPROF_BENCH_CACHES=${CACHES:-warm cold}
export CKPTPROF_BENCH_DEVICE=${DEVICE:-cuda:0} CKPTPROF_BENCH_ROUNDS=${ROUNDS:-5}
[ -n "${2:-}" ] && export CKPTPROF_BENCH_CKPT=$2
python3 -m pytest benchmarks/bench_plugin_overhead.py -p no:cacheprovider -q \
  --benchmark-json="$OUT/plugin_overhead.json" --benchmark-columns=min,median,max,rounds
python3 - "$OUT/plugin_overhead.json" <<'PY' | tee "$OUT/plugin_overhead.txt"
import json, sys

print(f"{'benchmark':40} {'median s':>9} {'load wall s':>11} {'span s':>8} {'median/wall':>11} "
      f"{'start s':>8} {'gather s':>8}")
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    s, i = b["stats"], b["extra_info"]
    print(f"{b['name']:40} {s['median']:9.4f} {i['load_wall_s']:11.4f} {i['span_s']:8.4f} "
          f"{s['median'] / i['load_wall_s']:11.3f} {i['start_s']:8.4f} {i['gather_s']:8.4f}")
PY

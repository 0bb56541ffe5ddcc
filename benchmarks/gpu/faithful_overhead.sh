#!/usr/bin/env bash
# Issue 32 item 4 on a GPU: the faithful replay of each release profile's default path against the plain reference
# loader (benchmarks/reference_loader.py), rounds alternating in one invocation, TP1 and TP8 on one GPU (all 8 ranks
# at once, one process each; ALL_RANKS=0 runs rank 0 alone), warm and cold (cold: the checkpoint's pages dropped
# before every pass, fs.drop_cache as `--cache cold` does).
# Run from the repository root on the GPU machine:
#   bash benchmarks/gpu/faithful_overhead.sh OUTDIR [CHECKPOINT_DIR]
# Without CHECKPOINT_DIR it synthesises a 64-shard 4.7 GB EAGLE-3 draft under OUTDIR/../ckpt-faithful-overhead
# (CKPT_DIR overrides where; an existing one is reused). TPS, CACHES, PATHS, DEVICE and ROUNDS override the
# defaults ("1 8", "warm cold", "sglang-mt:num_threads=8 sglang", cuda:0, 7). Writes OUTDIR/faithful_overhead.json
# (pytest-benchmark's, every round in extra_info) and OUTDIR/faithful_overhead.txt (the table below).
# For a CPU try: DEVICE=cpu SIZE=64MB ROUNDS=3 bash benchmarks/gpu/faithful_overhead.sh /tmp/fo
set -euo pipefail
OUT=${1:?outdir}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
CKPT=${2:-}
if [ -z "$CKPT" ]; then
  CKPT=${CKPT_DIR:-$(dirname "$(realpath "$OUT")")/ckpt-faithful-overhead}
  if [ ! -f "$CKPT/model.safetensors.index.json" ]; then
    python3 -m ckptprof synth "$CKPT" --preset eagle3-draft --shards "${SHARDS:-64}" --size "${SIZE:-4.7GB}" -q --force
  fi
fi
export CKPTPROF_BENCH_CKPT=$CKPT
export CKPTPROF_BENCH_TPS=${TPS:-1 8} CKPTPROF_BENCH_CACHES=${CACHES:-warm cold}
export CKPTPROF_BENCH_PATHS=${PATHS:-sglang-mt:num_threads=8 sglang}
export CKPTPROF_BENCH_DEVICE=${DEVICE:-cuda:0} CKPTPROF_BENCH_OVERHEAD_ROUNDS=${ROUNDS:-7}
export CKPTPROF_BENCH_ALL_RANKS=${ALL_RANKS:-1}
python3 -m pytest benchmarks/bench_faithful_overhead.py -p no:cacheprovider -q \
  --benchmark-json="$OUT/faithful_overhead.json" --benchmark-columns=min,median,max,rounds
python3 - "$OUT/faithful_overhead.json" <<'PY' | tee "$OUT/faithful_overhead.txt"
import json, sys

print(f"{'path':26} {'tp':>3} {'ranks':12} {'cache':5} {'GB':>6} {'faithful s':>10} {'reference s':>11} {'ratio':>6}  rounds (f/r)")
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    i = b["extra_info"]
    each = " ".join(f"{r['faithful_s']:.3f}/{r['reference_s']:.3f}" for r in i["rounds"])
    print(f"{i['path']:26} {i['tp']:>3} {i['ranks']:12} {i['cache']:5} {i['bytes'] / 1e9:6.2f} {i['faithful_median_s']:10.4f} "
          f"{i['reference_median_s']:11.4f} {i['faithful_over_reference']:6.3f}  {each}")
PY

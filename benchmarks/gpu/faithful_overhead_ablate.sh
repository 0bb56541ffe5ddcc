#!/usr/bin/env bash
# Where the faithful replay's overhead over the plain loop goes (issue 32 item 4): benchmarks/gpu/faithful_overhead.sh
# once per variant of VARIANTS, each with the pieces it names taken out of the faithful pass only
# (benchmarks/gpu/ablate/sitecustomize.py says what each removes; "none" is the baseline). Defaults: the
# single-threaded `sglang` default path, TP8 on one GPU (all ranks at once), warm, 20 rounds per variant.
#   bash benchmarks/gpu/faithful_overhead_ablate.sh OUTDIR
# VARIANTS="none delivery counters spans gc delivery,counters,spans" (each a CKPTPROF_ABLATE value), and
# TPS, CACHES, PATHS, DEVICE, ROUNDS, CKPT_DIR as faithful_overhead.sh takes them. Writes OUTDIR/VARIANT/ per variant
# and OUTDIR/ablate.txt (one row per variant). PYTHONPATH leads with the ablation folder in every process.
# A CPU try: DEVICE=cpu SIZE=64MB ROUNDS=3 VARIANTS="none delivery" bash benchmarks/gpu/faithful_overhead_ablate.sh /tmp/ab
set -euo pipefail
OUT=${1:?outdir}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
HERE=$(cd "$(dirname "$0")" && pwd)
export CKPT_DIR=${CKPT_DIR:-$(dirname "$OUT")/ckpt-faithful-overhead}
export TPS=${TPS:-8} CACHES=${CACHES:-warm} PATHS=${PATHS:-sglang} ROUNDS=${ROUNDS:-20}
for variant in ${VARIANTS:-none delivery counters spans gc delivery,counters,spans}; do
  dir="$OUT/${variant//,/+}"
  ablate=$variant
  [ "$variant" = none ] && ablate=""
  echo "== variant $variant"
  # PYTHONPATH must lead with the ablation folder in every process; faithful_overhead.sh appends the repository.
  CKPTPROF_ABLATE=$ablate PYTHONPATH="$HERE/ablate" bash "$HERE/faithful_overhead.sh" "$dir" >"$dir.log" 2>&1 \
    || { tail -20 "$dir.log"; exit 1; }
  tail -n +2 "$dir/faithful_overhead.txt" | sed "s/^/${variant//,/+} /"
done | tee "$OUT/ablate.txt"

#!/usr/bin/env bash
# Storage's share of SGLang's own load as the disk gets slower: the built-in synthetic draft (64 shards, 512 MB)
# replayed on CPU (one rank), cold, with 3 alternated faithful passes, once uncapped and once under each read cap
# (bytes/s, cgroup blkio / io.max via reports/h200/throttle.sh), plus one warm run for the all-resident wall.
# CPU only: 'h2d' is the labelled host-copy stand-in. Run as root from the repository root.
# Usage: bash reports/cpu/diskcap_campaign.sh OUT [CAP...]   (default caps: 800000000 400000000 200000000 100000000)
set -uo pipefail
OUT=${1:?output directory}; shift
CAPS=${*:-800000000 400000000 200000000 100000000}
mkdir -p "$OUT"
CKPT=$(python3 -c "from ckptprof.cli.run_cmd import builtin_checkpoint; print(builtin_checkpoint(512_000_000))")
RUN=(ckptprof run "$CKPT" --tp 1 --devices cpu --faithful-rounds 3 -q --probe-sample 512MB)
{
  echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) cores; checkpoint $CKPT"
  "${RUN[@]}" --cache warm -o "$OUT/warm" | grep -E "^verdict|decomposed vs"
  "${RUN[@]}" --cache cold -o "$OUT/cold-uncapped" | grep -E "^verdict|decomposed vs"
  for CAP in $CAPS; do
    bash reports/h200/throttle.sh "$CKPT" "$CAP" "${RUN[@]}" --cache cold -o "$OUT/cold-cap$CAP" |
      grep -E "^throttle|^verdict|decomposed vs"
  done
} 2>&1 | tee "$OUT/console.log"

#!/usr/bin/env bash
# Issue 35 on a GPU: `ckptprof watch` follows a TP8-on-one-GPU `ckptprof run` (all 8 ranks on one device, one process
# each, cold, with the faithful pass) from outside, and what it saw is held against the run's own session, rank by
# rank (python -m ckptprof.watch.against_run). Then the same run unwatched, rounds alternated (watched first in odd
# rounds, unwatched first in even ones), for what watching costs end to end.
# Run from the repository root on the GPU machine:
#   bash benchmarks/gpu/watch_run.sh OUTDIR [CHECKPOINT_DIR]
# Without CHECKPOINT_DIR it synthesises the 64-shard 4.7 GB EAGLE-3 draft under OUTDIR/../ckpt-faithful-overhead
# (the one faithful_overhead.sh makes and reuses; CKPT_DIR overrides where). TP, DEVICE, CACHE, ROUNDS, INTERVAL,
# FAITHFUL (1/0) and PYSPY (1: watch --py-spy) override the defaults (8, cuda:0, cold, 2, 0.2, 1, 0; 0.2 s rather
# than watch's default 0.5: a rank process that ends while reading takes its last interval's reads with it);
# BUDGET_S (default 330) stops starting rounds after that many seconds: the whole script stays within ~8 minutes.
# Writes OUTDIR/watch_vs_run.txt (the comparison of round 1 and the overhead table), OUTDIR/watch_vs_run.json,
# OUTDIR/overhead.json (per round, the mean rank wall watched over unwatched, per pass, with a bootstrap interval), and
# every session under OUTDIR/r<N>-{watch,run,plain}/.
# For a CPU try: DEVICE=cpu TP=2 SIZE=64MB SHARDS=8 ROUNDS=1 bash benchmarks/gpu/watch_run.sh /tmp/wr-out
set -euo pipefail
OUT=${1:?outdir}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
export PYTHONPATH=$PWD
PY=${PYTHON:-python3}
began=$(date +%s)
CKPT=${2:-}
if [ -z "$CKPT" ]; then
  CKPT=${CKPT_DIR:-$(dirname "$OUT")/ckpt-faithful-overhead}
  if [ ! -f "$CKPT/model.safetensors.index.json" ]; then
    $PY -m ckptprof synth "$CKPT" --preset eagle3-draft --shards "${SHARDS:-64}" --size "${SIZE:-4.7GB}" -q --force
  fi
fi
TP=${TP:-8} DEVICE=${DEVICE:-cuda:0} CACHE=${CACHE:-cold} ROUNDS=${ROUNDS:-2} INTERVAL=${INTERVAL:-0.2}
BUDGET_S=${BUDGET_S:-330}
RUN=(-m ckptprof run "$CKPT" --tp "$TP" --devices "$DEVICE" --cache "$CACHE" --no-probe -q)
[ "${FAITHFUL:-1}" = 1 ] && RUN+=(--faithful)
WATCH=(-m ckptprof watch --interval "$INTERVAL")
[ "${PYSPY:-0}" = 1 ] && WATCH+=(--py-spy)
echo "checkpoint $CKPT; run: ${RUN[*]}; watch: ${WATCH[*]}" | tee "$OUT/commands.txt"

since() {  # seconds since $1 (date +%s.%N); awk, not bc: the GPU image has no bc
  awk -v now="$(date +%s.%N)" -v t0="$1" 'BEGIN { printf "%.3f", now - t0 }'
}
watched() {  # round
  rm -rf "$OUT/r$1-watch" "$OUT/r$1-run"
  local t0; t0=$(date +%s.%N)
  $PY "${WATCH[@]}" -o "$OUT/r$1-watch" -- $PY "${RUN[@]}" -o "$OUT/r$1-run" >"$OUT/r$1-watch.log" 2>&1
  echo "$1 watched $(since "$t0")" >>"$OUT/walls.txt"
}
plain() {  # round
  rm -rf "$OUT/r$1-plain"
  local t0; t0=$(date +%s.%N)
  $PY "${RUN[@]}" -o "$OUT/r$1-plain" >"$OUT/r$1-plain.log" 2>&1
  echo "$1 plain $(since "$t0")" >>"$OUT/walls.txt"
}
: >"$OUT/walls.txt"
for r in $(seq 1 "$ROUNDS"); do
  if [ "$r" -gt 1 ] && [ $(($(date +%s) - began)) -gt "$BUDGET_S" ]; then
    echo "budget: $(($(date +%s) - began)) s spent, no round $r" | tee -a "$OUT/walls.txt"
    break
  fi
  if [ $((r % 2)) = 1 ]; then watched "$r"; plain "$r"; else plain "$r"; watched "$r"; fi
  tail -n 2 "$OUT/walls.txt"
done

$PY -m ckptprof.watch.against_run "$OUT/r1-watch/session.json" "$OUT/r1-run/session.json" \
  -o "$OUT/watch_vs_run.txt" --json "$OUT/watch_vs_run.json" || echo "(some run rank was not seen by watch)"
$PY - "$OUT" <<'PY' | tee -a "$OUT/watch_vs_run.txt"
import json, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
walls: dict[str, dict[int, float]] = {"watched": {}, "plain": {}}
for line in (out / "walls.txt").read_text().splitlines():
    parts = line.split()
    if len(parts) == 3 and parts[1] in walls:
        walls[parts[1]][int(parts[0])] = float(parts[2])


def rank_walls(session: Path) -> tuple[list[float], list[float]]:
    """Every rank's decomposed wall and its faithful wall (the sum over its models) in a run session."""
    if not session.exists():
        return [], []
    ranks = json.loads(session.read_text())["ranks"]
    dec = [r["wall_s"] for r in ranks if r.get("wall_s") is not None]
    fai = [sum(m["faithful_wall_s"] for m in r["models"] if m.get("faithful_wall_s") is not None) for r in ranks]
    return dec, [x for x in fai if x]


def load(session: Path) -> tuple[float | None, float | None, float | None]:
    """(the slowest rank's decomposed wall, its faithful wall, the run's own total) of a run session."""
    if not session.exists():
        return None, None, None
    s = json.loads(session.read_text())
    total = sum((s.get("extra") or {}).get("run_stages_s", {}).values()) or None
    dec, fai = rank_walls(session)
    return (max(dec) if dec else None), (max(fai) if fai else None), total


f = lambda x: "-" if x is None else f"{x:.2f}"
print("\nwatched vs unwatched, per round (shell: the command's wall, watch's own start-up included when watched; "
      "run: the run's own total, setup to report; load: the slowest rank's wall inside the run)")
print(f"{'round':>5} {'shell watched s':>15} {'shell plain s':>13} {'run watched s':>13} {'run plain s':>11} "
      f"{'load watched s':>14} {'load plain s':>12} {'faithful watched s':>18} {'faithful plain s':>16}")
ratios = []
for r in sorted(walls["watched"]):
    lw, fw, tw = load(out / f"r{r}-run" / "session.json")
    lp, fp, tp = load(out / f"r{r}-plain" / "session.json")
    print(f"{r:>5} {f(walls['watched'].get(r)):>15} {f(walls['plain'].get(r)):>13} {f(tw):>13} {f(tp):>11} "
          f"{f(lw):>14} {f(lp):>12} {f(fw):>18} {f(fp):>16}")
    if lw and lp:
        ratios.append(lw / lp)
if ratios:
    print(f"load wall watched / unwatched: median {statistics.median(ratios):.3f} over {len(ratios)} round(s) "
          "(a ratio of single cold loads: storage's own variation is in it)")
# The slowest of 8 ranks swings with whichever rank the scheduler delayed: the mean rank wall of each pass is the
# steadier figure for what watching costs. Per round, watched over unwatched, and a bootstrap interval of the median.
import random
series: dict[str, list[float]] = {"decomposed": [], "faithful": []}
for r in sorted(walls["watched"]):
    (dw, fw), (dp, fp) = rank_walls(out / f"r{r}-run" / "session.json"), rank_walls(out / f"r{r}-plain" / "session.json")
    if dw and dp:
        series["decomposed"].append(statistics.fmean(dw) / statistics.fmean(dp))
    if fw and fp:
        series["faithful"].append(statistics.fmean(fw) / statistics.fmean(fp))
draw = random.Random(0)
summary = {}
for name, values in series.items():
    if not values:
        continue
    medians = sorted(statistics.median(draw.choices(values, k=len(values))) for _ in range(2000))
    low, high = medians[int(0.025 * len(medians))], medians[int(0.975 * len(medians)) - 1]
    summary[name] = {"ratios": [round(v, 4) for v in values], "median": round(statistics.median(values), 4),
                     "ci95": [round(low, 4), round(high, 4)]}
    print(f"mean rank wall, {name} pass, watched / unwatched: median {statistics.median(values):.3f} "
          f"(bootstrap 95% {low:.3f}-{high:.3f}) over {len(values)} round(s); per round "
          + " ".join(f"{v:.3f}" for v in values))
(out / "overhead.json").write_text(json.dumps(summary, indent=1))
PY
echo "done in $(($(date +%s) - began)) s; table: $OUT/watch_vs_run.txt"

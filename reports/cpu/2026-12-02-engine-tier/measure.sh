#!/usr/bin/env bash
# The engine tier's figures: per release, a TP2 target + draft load on the CPU through the engine's own iterator
# (cold, then warm with 3 faithful rounds) and through ckptprof's replica (warm, 3 rounds), sessions under OUT.
#   bash measure.sh OUT          (after .ci/engines.sh has built /var/tmp/ckptprof-engines)
set -euo pipefail
out="$1"; root="${ENGINES_ROOT:-/var/tmp/ckptprof-engines}"; py="$root/venv/bin/python"
mkdir -p "$out"
"$py" -m ckptprof synth "$out/ckpt/target" -p kimi-k2.5-verifier -n 6 -s 64MB --layers 3 --experts 4 --seed 5 -q --force
"$py" -m ckptprof synth "$out/ckpt/draft" -n 8 -s 48MB --seed 6 -q --force
for spec in sglang==0.5.23 sglang==0.5.9 vllm==0.33.0 vllm==0.11.0; do
    name="${spec%%==*}"; tag="${spec/==/-}"; site="$root/site/$tag"
    engine=(); [ "$name" = vllm ] && engine=(--engine vllm --strategy vllm)
    common=("$out/ckpt/target" --draft "$out/ckpt/draft" --tp 2 --no-probe --faithful "${engine[@]}" -q)
    for run in "cold:--cache cold" "warm:--cache warm --faithful-rounds 3" \
               "replica:--cache warm --faithful-rounds 3 --no-engine-iterator"; do
        label="${run%%:*}"; read -r -a flags <<<"${run#*:}"
        (cd /tmp && PYTHONPATH="$site" "$py" -m ckptprof run "${common[@]}" "${flags[@]}" \
            -o "$out/runs/$tag-$label" --json "$out/$tag-$label.json" >/dev/null)
    done
done
"$py" "$(dirname "$0")/table.py" "$out"

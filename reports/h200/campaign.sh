#!/usr/bin/env bash
# The H200 measurement campaign for `ckptprof run` (issue 3) and the ceilings (issue 4).
# Runs on the lent device machine from the repository root: PYTHONPATH=. python3 -m ckptprof ...
# Usage: bash reports/h200/campaign.sh OUTDIR [STEP...]
# steps: env smoke synth tp1 tp8 probe predict | enginedeps engine | deps peers peersbest gputests strategies1 verify strategies8 tune touch bench bench20 x2issue20 repeat readahead plainvspipe throttle pyspy verifier learn warmfloor sampled shared vllm vllmcheck
# (deps installs the wheels carried in .whl/: fastsafetensors, py-spy, pytest + pytest-benchmark for bench)
# (STRATEGIES picks the strategies; STRAT8_DEVICES / STRAT8_CACHES the device specs and cache modes of strategies8;
#  tune: the pipelined strategy's reader count, TUNE_READERS, and chunk size, TUNE_CHUNKS; readahead: RA_TPS and
#  RA_VARIANTS; tp1/tp8: FAITHFUL, e.g. "--faithful-rounds 3", and TP8_DEVICES)
# (fastsafetensors travels as a wheel in .whl/, fio with its libraries in .fio/fio.tgz; both optional)
set -uo pipefail
OUT=${1:?outdir}; shift
STEPS=${*:-env smoke synth tp1 tp8 probe}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
DATA=${CKPT_DATA:-/var/tmp/ckptprof-data}
CK="python3 -m ckptprof"
mkdir -p "$OUT" "$DATA"
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
for s in $STEPS; do
  case $s in
  env)
    step env
    nvidia-smi --query-gpu=name,pci.bus_id,pcie.link.gen.current,pcie.link.width.current,memory.total --format=csv
    python3 -c 'import torch,safetensors,psutil,sys;print(sys.version);print("torch",torch.__version__,"cuda",torch.version.cuda,torch.cuda.device_count());print("safetensors",safetensors.__version__)'
    nproc; free -g | head -2; df -hT "$DATA" | tail -1; uname -r
    ;;
  smoke)
    step smoke: small checkpoint, TP2 on cuda
    $CK synth "$DATA/small" --shards 8 --size 64MB --force -q
    $CK run "$DATA/small" --tp 2 --devices cuda --cache cold --faithful --probe-sample 64MB -o "$OUT/smoke" -q || exit 1
    ;;
  synth)
    step synth eagle3-draft 64 shards 4.7GB
    [ -f "$DATA/eagle3/.complete" ] || { $CK synth "$DATA/eagle3" --preset eagle3-draft --shards 64 --size 4.7GB --force -q && touch "$DATA/eagle3/.complete"; }
    $CK inspect "$DATA/eagle3" | head -4
    ;;
  tp1)
    for cache in cold warm; do
      step "TP1 $cache, faithful check"
      $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache $cache ${FAITHFUL:---faithful} -o "$OUT/tp1-$cache" -q
    done
    ;;
  tp8)
    for devs in ${TP8_DEVICES:-cuda:0 cuda}; do
      for cache in cold warm; do
        step "TP8 on $devs, $cache"
        $CK run "$DATA/eagle3" --tp 8 --devices $devs --cache $cache ${FAITHFUL:---faithful} --no-probe -o "$OUT/tp8-${devs/:/}-$cache" -q
      done
    done
    ;;
  predict)
    # The newest SGLang profile's own path with its faithful pass, and every recommended flag set replayed
    # (--check-predictions): predicted vs measured walls, TP1 and TP8, cold and warm.
    for tp in ${PREDICT_TPS:-1 8}; do
      devs=cuda:0; [ "$tp" = 1 ] || devs=${TP8_DEVICES:-cuda:0}
      for cache in ${PREDICT_CACHES:-cold warm}; do
        step "TP$tp on $devs, $cache, --check-predictions"
        timeout -s INT ${STEP_TIMEOUT_S:-240} $CK run "$DATA/eagle3" --tp $tp --devices $devs --cache $cache --faithful \
          --check-predictions --probe-sample ${PREDICT_PROBE:-2GB} -o "$OUT/predict-tp$tp-${devs/:/}-$cache" -q
      done
    done
    ;;
  deps)
    step deps
    if ls .whl/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site PATH=$PATH:/tmp/site/bin
    fi
    command -v py-spy || true
    python3 -c 'import fastsafetensors; print("fastsafetensors", fastsafetensors.__version__ if hasattr(fastsafetensors, "__version__") else "present")' || true
    python3 -c 'import runai_model_streamer, instanttensor; print("runai-model-streamer and instanttensor present")' || true
    ;;
  peers)
    # The peers' real loaders (runai-model-streamer, instanttensor, fastsafetensors from .whl/) next to SGLang's
    # default path, values verified: TP1, TP2 with a GPU each (instanttensor's NCCL group), TP8 sharing PEER_DEVICES.
    for cfg in ${PEER_CONFIGS:-1:cuda:0 2:cuda 8:cuda}; do
      tp=${cfg%%:*}; devs=${cfg#*:}
      for cache in ${PEER_CACHES:-cold warm}; do
        step "TP$tp on $devs $cache, peers' loaders, verified"
        timeout -s INT ${STEP_TIMEOUT_S:-300} $CK run "$DATA/eagle3" --tp $tp --devices $devs --cache $cache \
          --strategy "${PEER_STRATEGIES:-sglang-mt:num_threads=8,runai-streamer,instanttensor,fastsafetensors}" --verify \
          --probe-sample ${PEER_PROBE:-2GB} -o "$OUT/peers-tp$tp-${devs/:/}-$cache" -q
      done
    done
    ;;
  peersbest)
    # Every peer the way its documentation recommends, beside pipelined and SGLang's path, values verified:
    # TP1 on cuda:0, cold and warm (PEERSBEST_CONFIGS / PEER_CACHES to change).
    for cfg in ${PEERSBEST_CONFIGS:-1:cuda:0}; do
      tp=${cfg%%:*}; devs=${cfg#*:}
      for cache in ${PEER_CACHES:-cold warm}; do
        step "TP$tp on $devs $cache, --strategy peers, verified"
        timeout -s INT ${STEP_TIMEOUT_S:-300} $CK run "$DATA/eagle3" --tp $tp --devices $devs --cache $cache \
          --strategy peers --verify --probe-sample ${PEER_PROBE:-2GB} -o "$OUT/peersbest-tp$tp-${devs/:/}-$cache" -q
      done
    done
    ;;
  gputests)
    step "GPU tests (tests/gpu) with the peers' packages"
    python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -15
    ;;
  strategies1)
    for cache in warm cold; do
      step "TP1 cuda:0 $cache, every strategy, verified"
      $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache $cache --strategy "${STRATEGIES:-all}" --verify -o "$OUT/strategies-tp1-$cache" -q
    done
    ;;
  strategies8)
    for devs in ${STRAT8_DEVICES:-cuda cuda:0}; do
      for cache in ${STRAT8_CACHES:-warm cold}; do
        step "TP8 on $devs $cache, every strategy, verified"
        timeout -s INT ${STEP_TIMEOUT_S:-300} $CK run "$DATA/eagle3" --tp 8 --devices $devs --cache $cache --strategy "${STRATEGIES:-all}" --verify -o "$OUT/strategies-tp8-${devs/:/}-$cache" -q
      done
    done
    ;;
  shared)
    # Reads shared across ranks (issue 20 item 3): SGLang's TP8, pipelined's TP8 and pipelined-shared's TP8 on the
    # devices of SHARED_DEVICES, cold and warm, verified; then pipelined alone at TP1, the cold figure to match.
    for devs in ${SHARED_DEVICES:-cuda:0}; do
      for cache in cold warm; do
        step "TP8 on $devs $cache: sglang, pipelined, pipelined-shared (verified)"
        timeout -s INT ${STEP_TIMEOUT_S:-300} $CK run "$DATA/eagle3" --tp 8 --devices $devs --cache $cache --strategy "${SHARED_STRATEGIES:-sglang,pipelined,pipelined-shared}" --verify -o "$OUT/shared-tp8-${devs//[:,]/}-$cache" -q
      done
    done
    for cache in cold warm; do
      step "TP1 cuda:0 $cache: pipelined and pipelined-shared"
      timeout -s INT ${STEP_TIMEOUT_S:-300} $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache $cache --strategy pipelined,pipelined-shared -o "$OUT/shared-tp1-$cache" -q
    done
    ;;
  vllm)
    # vLLM's paths (issue 21) beside SGLang's default, TP1 and TP8 on VLLM_DEVICES, cold and warm, verified.
    for tp in 1 8; do
      for cache in cold warm; do
        step "TP$tp on ${VLLM_DEVICES:-cuda:0} $cache: vLLM's paths beside SGLang's default (verified)"
        timeout -s INT ${STEP_TIMEOUT_S:-300} $CK run "$DATA/eagle3" --engine vllm --tp $tp --devices ${VLLM_DEVICES:-cuda:0} --cache $cache --strategy "${VLLM_STRATEGIES:-sglang-mt:num_threads=8,vllm,vllm-eager,vllm-prefetch,vllm-mt}" --verify -o "$OUT/vllm-tp$tp-$cache" -q
      done
    done
    ;;
  vllmcheck)
    # vLLM's flags priced and checked (issue 21 item 3): cold runs of vLLM's default path with --check-predictions.
    for tp in ${VLLM_CHECK_TPS:-1 8}; do
      step "TP$tp on ${VLLM_DEVICES:-cuda:0} cold: vLLM's default path, its flags' predictions checked"
      timeout -s INT ${STEP_TIMEOUT_S:-300} $CK run "$DATA/eagle3" --engine vllm --strategy vllm --tp $tp --devices ${VLLM_DEVICES:-cuda:0} --cache cold --check-predictions -o "$OUT/vllmcheck-tp$tp" -q
    done
    ;;
  tune)
    for readers in ${TUNE_READERS:-8 16 24 32}; do
      step "TP1 cuda:0 warm, pipelined with $readers readers"
      $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache warm --strategy pipelined:readers=$readers --no-probe -o "$OUT/tune-readers$readers" -q | grep -E "^ +0 |verdict"
    done
    for chunk in ${TUNE_CHUNKS:-}; do
      step "TP1 cuda:0 warm, pipelined with 16 readers, $chunk MiB chunks"
      $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache warm --strategy pipelined:chunk_mib=$chunk --no-probe -o "$OUT/tune-chunk$chunk" -q | grep -E "^ +0 |verdict"
    done
    ;;
  bench)
    step "overhead benchmark on cuda:0 (256 MB, 1 GB and the 4.7 GB checkpoint; plain vs faithful vs decomposed)"
    CKPTPROF_BENCH_DEVICE=cuda:0 CKPTPROF_BENCH_CKPT="$DATA/eagle3" python3 -m pytest -q -p no:cacheprovider \
      benchmarks/bench_replay.py -k overhead --benchmark-json="$OUT/bench-overhead.json" 2>&1 | tail -15
    ;;
  bench20)
    # Issue 20's ratio benchmarks on the GPU: shared reads vs SGLang's TP8 and TP1 pipelined, and the sampled storage
    # share vs the cold/warm difference; TP8 on BENCH20_DEVICE, the 4.7 GB checkpoint. BENCH20_K selects tests (-k),
    # BENCH20_TAG names the JSON (bench20-TAG.json; no spaces).
    step "issue 20 benchmarks on ${BENCH20_DEVICE:-cuda:0}, TP${BENCH20_TP:-8}, -k '${BENCH20_K:-}'"
    CKPTPROF_BENCH_DEVICE=${BENCH20_DEVICE:-cuda:0} CKPTPROF_BENCH_TP=${BENCH20_TP:-8} CKPTPROF_BENCH_CKPT="$DATA/eagle3" \
      timeout -s INT ${STEP_TIMEOUT_S:-540} python3 -m pytest -q -p no:cacheprovider ${BENCH20_FILES:-benchmarks/bench_shared_reads.py benchmarks/bench_sampled_shares.py} \
      ${BENCH20_K:+-k "$BENCH20_K"} --benchmark-json="$OUT/bench20${BENCH20_TAG:+-$BENCH20_TAG}.json" 2>&1 | tail -8
    python3 -c 'import json,sys; [print(b["name"], json.dumps(b["extra_info"])) for b in json.load(open(sys.argv[1]))["benchmarks"]]' "$OUT/bench20${BENCH20_TAG:+-$BENCH20_TAG}.json" || true
    ;;
  x2issue20)
    # What issue 20 still needs from the 2-GPU box, in three calls (each under 10 minutes):
    #   X2_PART=1: TP8 over both GPUs, shared reads against SGLang's TP8 and TP1 pipelined, cold and warm, verified
    #              (the ratio benchmark, 3 rounds), then the sampled shares at TP8 over both GPUs;
    #   X2_PART=2: every peer beside pipelined at TP2 (a GPU each), cold and warm, verified;
    #   X2_PART=3: the same at TP8 over both GPUs.
    # Run `deps synth` first in each call (a fresh machine has neither).
    case ${X2_PART:-1} in
      1) BENCH20_DEVICE=cuda BENCH20_TAG=x2-shared BENCH20_K="shared_reads" STEP_TIMEOUT_S=420 bash "$0" "$OUT" bench20
         SAMPLED_CONFIGS="8:cuda" SAMPLED_ROUNDS=2 bash "$0" "$OUT" sampled ;;
      2) PEERSBEST_CONFIGS="2:cuda" STEP_TIMEOUT_S=270 bash "$0" "$OUT" peersbest ;;
      *) PEERSBEST_CONFIGS="8:cuda" STEP_TIMEOUT_S=270 bash "$0" "$OUT" peersbest ;;
    esac
    ;;
  repeat)
    for i in 1 2 3; do
      for cache in cold warm; do
        step "TP1 $cache, faithful check, repeat $i"
        $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache $cache --faithful --no-probe -o "$OUT/repeat$i-tp1-$cache" -q | grep -E "^ +0  cuda|faithful wall"
      done
    done
    ;;
  readahead)
    # Does the block read-ahead decomposition keep SGLang's overlap? Medians of 3 alternated passes, both ways.
    # RA_TPS: "TP:DEVICES ..." pairs; RA_VARIANTS: sglang strategy parameters, one run each.
    for tpdev in ${RA_TPS:-1:cuda:0 8:cuda}; do
      tp=${tpdev%%:*}; devs=${tpdev#*:}
      for ra in ${RA_VARIANTS:-read_ahead=true read_ahead=false}; do
        step "TP$tp on $devs cold, sglang:$ra, 3 faithful rounds"
        $CK run "$DATA/eagle3" --tp $tp --devices $devs --cache cold --faithful-rounds 3 --no-probe --strategy "sglang:$ra" -o "$OUT/readahead-${ra//[=,:]/-}-tp$tp" -q | grep -E "^ +0  cuda|verdict|faithful wall"
      done
    done
    ;;
  touch)
    step "TP1 warm and cold, faithful check, pages faulted in by touch (CKPTPROF_FAULT_IN=touch)"
    for cache in warm cold; do
      CKPTPROF_FAULT_IN=touch $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache $cache --faithful --no-probe -o "$OUT/tp1-$cache-touch" -q
    done
    ;;
  plainvspipe)
    # The pipelined strategy next to a plain pread-into-pinned loop on the same warm files, alternated twice.
    for i in 1 2; do
      step "plain pread -> pinned -> H2D loop, 16 and 32 threads, round $i"
      METHODS=pread-pinned,pread-only ROUNDS=1 python3 reports/h200/hostreg_probe.py "$DATA/eagle3" 16 32 > "$OUT/plain-$i.json" 2>/dev/null
      python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['gbps'])" "$OUT/plain-$i.json"
      for readers in ${PIPE_READERS:-16 32}; do
        step "TP1 cuda:0 warm, pipelined with $readers readers, round $i"
        $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache warm --strategy pipelined:readers=$readers --no-probe -o "$OUT/pipe$readers-$i" -q | grep -E "^ +0 "
      done
    done
    ;;
  pyspy)
    step "py-spy: TP1 cold on cuda:0, TP8 warm over both GPUs"
    $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache cold --py-spy --no-probe -o "$OUT/pyspy-tp1-cold" -q
    $CK run "$DATA/eagle3" --tp 8 --devices cuda --cache warm --py-spy --no-probe -o "$OUT/pyspy-tp8-warm" -q
    ;;
  verify)
    step "probe + independent checks (fio, plain copy_)"
    $CK probe "$DATA/eagle3" --devices cuda --json > "$OUT/probe.json"
    if [ -f .fio/fio.tgz ]; then tar xzf .fio/fio.tgz -C /tmp; FIO="env LD_LIBRARY_PATH=/tmp/fiolibs /tmp/fiolibs/fio"; fi
    printf '#!/bin/sh\nexec env LD_LIBRARY_PATH=/tmp/fiolibs /tmp/fiolibs/fio "$@"\n' > /tmp/fio.sh; chmod +x /tmp/fio.sh
    python3 reports/h200/verify_ceilings.py "$DATA/eagle3" "$OUT/probe.json" /tmp/fio.sh | tee "$OUT/verify.json"
    ;;
  verifier)
    step "synth kimi-k2.5-verifier ${VERIFIER_SIZE:-9.4GB}"
    [ -f "$DATA/verifier/.complete" ] || { $CK synth "$DATA/verifier" --preset kimi-k2.5-verifier --shards 61 --size ${VERIFIER_SIZE:-9.4GB} --force -q && touch "$DATA/verifier/.complete"; }
    for cache in cold warm; do
      step "verifier + draft, TP8 over both GPUs, $cache"
      $CK run "$DATA/verifier" --draft "$DATA/eagle3" --tp 8 --devices cuda --cache $cache --faithful -o "$OUT/verifier-draft-tp8-$cache" -q
    done
    ;;
  throttle)
    # The disk-bound box: reads from the disk capped at each rate of THROTTLE_BPS (bytes/s, space-separated;
    # default 1.4 GB/s) for that run only.
    for BPS in ${THROTTLE_BPS:-1400000000}; do
      step "TP1 cold on cuda:0, disk reads capped at $BPS B/s, 3 faithful rounds"
      bash reports/h200/throttle.sh "$DATA/eagle3" $BPS $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache cold --faithful-rounds 3 -o "$OUT/throttled-$BPS-tp1-cold" -q
    done
    ;;
  learn)
    # Issue 20 item 2: the probe held to the replays. A fresh probe, then SGLang's path and pipelined cold; when one
    # fetched faster than the probe, the probe measures again with other settings (probe/learn.py) and says so.
    for cfg in ${LEARN_CONFIGS:-1:cuda:0 1:cuda:0}; do
      tp=${cfg%%:*}; devs=${cfg#*:}
      step "TP$tp on $devs cold, sglang + pipelined, a fresh probe held to them"
      CKPTPROF_PROBE_MAX_AGE_S=0 timeout -s INT ${STEP_TIMEOUT_S:-300} $CK run "$DATA/eagle3" --tp $tp --devices $devs \
        --cache cold --strategy "${LEARN_STRATEGIES:-sglang,pipelined}" --verify -o "$OUT/learn-tp$tp-${devs/:/}-$RANDOM" -q
    done
    ;;
  warmfloor)
    # Issue 20 item 1: pipelined warm against min(page cache with N threads, pinned H2D) measured in the same run,
    # for each reader count and chunk size in WARM_VARIANTS.
    for v in ${WARM_VARIANTS:-pipelined pipelined:readers=8 pipelined:readers=32 pipelined:chunk_mib=16 pipelined:chunk_mib=128}; do
      step "TP1 cuda:0 warm, $v, with the probe"
      CKPTPROF_PROBE_MAX_AGE_S=${WARM_PROBE_AGE:-3600} $CK run "$DATA/eagle3" --tp 1 --devices cuda:0 --cache warm \
        --strategy "$v" -o "$OUT/warm-${v//[=,:]/-}" -q | grep -E "^ +0 |page-cache read|H2D pinned|both at once|verdict"
    done
    ;;
  sampled)
    # Issue 20 item 5: SGLang's own wall attributed by sampling the ranks' threads in the kernel, against what a
    # cold/warm pair says (cold wall - warm wall) / cold wall; SAMPLED_CONFIGS "TP:DEVICES ..." pairs.
    for cfg in ${SAMPLED_CONFIGS:-1:cuda:0 8:cuda:0}; do
      tp=${cfg%%:*}; devs=${cfg#*:}
      for cache in cold warm; do
        step "TP$tp on $devs $cache, faithful passes with the threads sampled"
        $CK run "$DATA/eagle3" --tp $tp --devices $devs --cache $cache --faithful-rounds ${SAMPLED_ROUNDS:-3} \
          --sample-threads --no-probe -o "$OUT/sampled-tp$tp-${devs/:/}-$cache" -q | grep -E "threads sampled|verdict"
      done
    done
    python3 reports/h200/sampled_vs_coldwarm.py "$OUT"
    ;;
  enginedeps)
    # Issue 30: the real SGLang release for the faithful pass, carried in .engine/: the release's files unpacked from
    # its cp312 wheel (less its compiled Rust extensions, which its weight utilities never import: checked on the CPU)
    # and the wheels of what importing its weight utilities asks for that this image lacks. sglang-kernel is not
    # carried (373 MB): ckptprof stands in for it where it is absent and says so in the session.
    step "enginedeps: sglang from .engine/"
    mkdir -p /tmp/engine-site
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/engine-site .engine/*.whl || exit 1
    tar xJf .engine/sglang-*.tar.xz -C /tmp/engine-site || exit 1
    export PYTHONPATH=$PYTHONPATH:/tmp/engine-site
    python3 -c 'import importlib.metadata as m; print("sglang", m.version("sglang"), "sgl_kernel installed:", __import__("importlib.util").util.find_spec("sgl_kernel") is not None)'
    ;;
  engine)
    # Issue 30: the faithful pass through the real engine's own iterator (its import outside every wall; a kernel
    # package stood in for where absent) beside the replica (--no-engine-iterator), each with the decomposed replay
    # and ENGINE_ROUNDS faithful passes with the threads sampled; TP of ENGINE_TPS on cuda:0, cold then warm.
    for tp in ${ENGINE_TPS:-1 8}; do
      for cache in ${ENGINE_CACHES:-cold warm}; do
        for source in engine replica; do
          flag=""; [ "$source" = replica ] && flag=--no-engine-iterator
          step "TP$tp on cuda:0 $cache: ${ENGINE_ROUNDS:-3} faithful passes through the $source"
          timeout -s INT ${STEP_TIMEOUT_S:-280} $CK run "$DATA/eagle3" --tp $tp --devices cuda:0 --cache $cache \
            --faithful-rounds ${ENGINE_ROUNDS:-3} --sample-threads --no-probe $flag -o "$OUT/engine-tp$tp-$cache-$source" -q \
            | grep -E "faithful pass|verdict" | cut -c1-400
        done
      done
    done
    python3 reports/h200/engine_vs_replica.py "$OUT"
    ;;
  probe)
    step probe
    $CK probe "$DATA/eagle3" --devices cuda --json > "$OUT/probe.json"; cat "$OUT/probe.json"
    ;;
  esac
done

"""The verdict's remedies spelled for vLLM: the same mechanisms priced from the same ceilings as SGLang's, under
vLLM's flags, each with the vLLM strategy that ``--check-predictions`` replays to check it.

vLLM's prefetch (background readers warming the page cache with each rank's share of the files), its eager
strategy (whole-file reads, then deserialisation) and its multithread loader (threads mapping files ahead of the
rank's own loop) are the mechanisms of SGLang's ``--weight-loader-prefetch-checkpoints``,
``--weight-loader-disable-mmap`` and ``enable_multithread_load``; the predictions carry over with the flags
respelled. vLLM's load formats (fastsafetensors, InstantTensor, Run:ai) are driven by vLLM in its own way, which no
strategy replays yet: they are left out rather than priced as SGLang drives them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ckptprof.engines import vllm
from ckptprof.results import Prediction

THREADS = 16  # the multithread advice, as for SGLang
# SGLang's replayed strategy -> (vLLM's strategy to replay, which flag)
_EQUIVALENT = {
    "prefetch": ("vllm-prefetch", "prefetch"),
    "sglang-mt:num_threads=16": (f"vllm-mt:num_threads={THREADS}", "multithread"),
    "sglang-mt-completed:num_threads=16": (f"vllm-mt:num_threads={THREADS}", "multithread"),
    "no-mmap": ("vllm-eager", "eager"),
}


def vllm_predictions(
    release: dict[str, Any], own_strategy: str, predictions: list[Prediction]
) -> tuple[list[Prediction], str]:
    """SGLang's predictions respelled for the vLLM release of ``release`` (a session's ``vllm_release``), without
    the path the run already takes (``own_strategy``); and the caveat that says what is and is not priced."""
    profile = vllm.profile_named(str(release.get("profile"))) or vllm.NEWEST
    flags = {
        "prefetch": vllm.prefetch_flags(profile, vllm.PREFETCH_THREADS, vllm.PREFETCH_BLOCK_BYTES),
        "multithread": vllm.multithread(THREADS),
        "eager": vllm.load_strategy("eager"),
    }
    out: list[Prediction] = []
    for p in predictions:
        if p.strategy is None:
            if (
                p.predicted_s is None
            ):  # advice that is no flag (copy the checkpoint to local disk): any engine's
                out.append(p)
            continue
        equivalent = _EQUIVALENT.get(p.strategy)
        if equivalent is None:
            continue
        strategy, kind = equivalent
        if kind == "prefetch" and "prefetch" not in profile.strategies:
            continue  # before 0.18 vLLM has no prefetch
        if strategy.split(":")[0] == own_strategy:
            continue  # what the run already does is no remedy
        out.append(replace(p, flags=flags[kind], strategy=strategy))
    note = (
        f"replaying vLLM {profile.name}: its flags are priced as SGLang's equivalents are, from the same ceilings "
        "(prefetch, eager whole-file reads, the multithread loader); its load formats (fastsafetensors, "
        "InstantTensor, Run:ai) are not priced for vLLM"
    )
    return out, note

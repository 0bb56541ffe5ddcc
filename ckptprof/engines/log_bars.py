"""The progress bars the engines and their weight loaders draw during a boot: which phase and which loader each
belongs to, by the start of its description. A new loader's bar is one more row; the first matching prefix wins.

Read by the boot-log reader (ckptprof/bootlog/bars.py, which also matches the descriptions no row knows by
keywords). Imports nothing else from ckptprof.
"""

from __future__ import annotations

from typing import NamedTuple


class BarKind(NamedTuple):
    prefix: str
    phase: str
    loader: str | None
    # A bar of this kind is evidence of its phase on its own: it may open the phase when no record did (vLLM V1
    # logs no record when graph capture begins, and an excerpt may start in the middle of a load).
    opens_phase: bool = True
    # The engine that alone draws it, which a bar is then evidence of (a CI copy may hold nothing but bars).
    engine: str | None = None


BARS: tuple[BarKind, ...] = (
    BarKind("Loading safetensors checkpoint shards", "load-weights", "default"),
    BarKind("Loading pt checkpoint shards", "load-weights", "default"),
    BarKind("Multi-thread loading shards", "load-weights", "multithread"),
    BarKind("Loading safetensors using Fastsafetensor loader", "load-weights", "fastsafetensors"),
    BarKind("Loading fastsafetensors checkpoint shards", "load-weights", "fastsafetensors"),
    BarKind("Loading safetensors using Runai Model Streamer", "load-weights", "runai_streamer"),
    BarKind("Loading safetensors using InstantTensor", "load-weights", "instanttensor"),
    BarKind("Loading weights with InstantTensor", "load-weights", "instanttensor"),
    # vLLM's graph capture (V0 "Capturing CUDA graph shapes", V1 "Capturing CUDA graphs (mixed prefill-decode,
    # PIECEWISE)"); SGLang's (cuda_graph_runner.py "Capturing batches (bs=.. avail_mem=..)", the piecewise runner's
    # "Capturing num tokens (..)"), as SGLang 0.5.9 and 0.5.23 and vLLM 0.11 to 0.34 write them.
    BarKind("Capturing CUDA graph", "cuda-graph", None, engine="vllm"),
    # vllm-ascend's (worker/model_runner_v1.py): "Capturing ACL graphs (mixed prefill-decode, PIECEWISE)".
    BarKind("Capturing ACL graph", "cuda-graph", None, engine="vllm"),
    BarKind("Capturing batches", "cuda-graph", None, engine="sglang"),
    BarKind("Capturing num tokens", "cuda-graph", None, engine="sglang"),
    # vLLM's offline engine (`LLM(...)`, entrypoints/llm.py; 0.34's entrypoints/common/offline.py) serving a script's
    # prompts: it prints no ready line, and these bars are drawn only once the engine is up ("ready": no step).
    BarKind("Adding requests", "ready", None, opens_phase=False, engine="vllm"),
    BarKind("Processed prompts", "ready", None, opens_phase=False, engine="vllm"),
    # lm-evaluation-harness driving an engine in the script's process (its vLLM and SGLang models turn the engine's
    # own bars off): its bar runs the requests through the engine, which is up (batch 43). Drawn by lm-eval whatever
    # the engine: evidence of none.
    BarKind("Running generate_until requests", "ready", None, opens_phase=False),
    BarKind("Running loglikelihood", "ready", None, opens_phase=False),
)

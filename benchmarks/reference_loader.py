"""Plain reference loaders: each release profile's default path with no recorder, no clocks, no counters.

What a server's ``DefaultModelLoader`` does with the checkpoint, written from the steps the engine's iterators take
(ckptprof's replicas, loader/strategies/sglang.py and sglang_mt.py, follow the same steps): open each shard with
``safe_open`` (mmap), take every tensor with ``get_tensor``, and hand it to the weight loader, which narrows it to
the rank's slice and ``copy_``s that into the parameter. The multithreaded paths open the files on a pool while
the rank's thread copies, as the replica does, so the faithful replay and this loop differ only in what ckptprof
adds to measure. The parameters and the TP slicing come from a ``LoadContext`` (dictionary look-ups, what a
model's ``weight_loader`` does too), so both sides copy into the same shapes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

import torch
from safetensors import safe_open

from ckptprof.engines.sglang import PROFILES
from ckptprof.loader.plan import ModelPlan, ReplayPlan
from ckptprof.loader.strategies.base import LoadContext

Weights = Iterator[tuple[str, torch.Tensor]]


def _open_all(path: str) -> dict[str, torch.Tensor]:
    """One pool task: every tensor of a shard as a view onto its mapping (no tensor bytes read yet)."""
    with safe_open(path, framework="pt", device="cpu") as handle:
        return {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118 - not a dict


def single_thread(files: list[str], **_: Any) -> Weights:
    """``safetensors_weights_iterator``: one file after the other on the calling thread."""
    for path in files:
        with safe_open(path, framework="pt", device="cpu") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                yield name, handle.get_tensor(name)


def multithread_in_order(files: list[str], num_threads: int = 8) -> Weights:
    """The newer multithread loader: ``num_threads + 1`` files in flight, handed over in submission order."""
    with ThreadPoolExecutor(max_workers=num_threads) as pool:
        pending = iter(files)
        window: deque[Future[dict[str, torch.Tensor]]] = deque(
            pool.submit(_open_all, path) for _, path in zip(range(num_threads + 1), pending, strict=False)
        )
        while window:
            tensors = window.popleft().result()
            yield from tensors.items()
            del tensors  # the views, and with the last one the mapping, go before the next file
            nxt = next(pending, None)
            if nxt is not None:
                window.append(pool.submit(_open_all, nxt))


def multithread_completed(files: list[str], num_threads: int = 8) -> Weights:
    """The older multithread loader: every file submitted at once, consumed as each completes."""
    with ThreadPoolExecutor(max_workers=num_threads) as pool:
        for done in as_completed([pool.submit(_open_all, path) for path in files]):
            yield from done.result().items()


ITERATORS: dict[str, Callable[..., Weights]] = {
    "sglang": single_thread,
    "sglang-mt": multithread_in_order,
    "sglang-mt-completed": multithread_completed,
}


def default_paths() -> dict[str, tuple[str, dict[str, Any]]]:
    """Each release profile's default path as (strategy, parameters), keyed by ``strategy[:k=v,...]``: the profiles
    that load alike share one entry."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for profile in PROFILES:
        params = dict(profile.default_params)
        key = profile.default_strategy + "".join(f":{k}={v}" for k, v in sorted(params.items()))
        out.setdefault(key, (profile.default_strategy, params))
    return out


def load_model(ctx: LoadContext, model: ModelPlan, strategy: str, params: dict[str, Any]) -> None:
    """The weight loader over the engine's iterator: narrow each tensor to the rank's slice, copy it in."""
    files = [shard.path for shard in model.shards]
    for name, full in ITERATORS[strategy](files, **params):
        src = ctx.narrow(model.role, name, full)
        if src is not None:
            ctx.copy(model.role, name, src)


def reference_load(plan: ReplayPlan, ctx: LoadContext) -> None:
    """Every model of the plan (target, then draft) on its path; ``ctx`` holds the rank's parameters."""
    for model in plan.models:
        strategy, params = plan.strategy_for(model.role)
        load_model(ctx, model, strategy, params)

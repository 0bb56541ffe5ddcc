"""vLLM's own iterators under `run --engine vllm --faithful`: which function each vLLM path stands for, the values
they load, and what the session says (the stand-in package: tests/fixtures/vllm_standin)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.plan import ModelPlan, build_plan
from ckptprof.loader.recorder import WallOnlyRecorder
from ckptprof.loader.strategies import param_digests, sglang_own
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.worker import strategies_by_role

if TYPE_CHECKING:
    from conftest import EnginePackage

Digests = Callable[[list[ModelPlan], int, int], dict[str, str]]
pytestmark = pytest.mark.engine


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, vllm_package: EnginePackage) -> Iterator[Path]:
    calls = tmp_path / "calls.jsonl"
    if vllm_package.standin is not None:
        monkeypatch.syspath_prepend(str(vllm_package.standin))
        monkeypatch.setenv(vllm_package.calls_variable, str(calls))
    yield calls
    if vllm_package.real:
        return  # a real engine registers torch operators on import: it cannot be imported twice
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[name]


def test_each_vllm_path_maps_to_the_function_vllm_runs_for_it() -> None:
    own = sglang_own.own_call
    module = sglang_own.VLLM_MODULE
    for strategy, load in (("vllm", "lazy"), ("vllm-eager", "eager"), ("vllm-prefetch", "prefetch")):
        assert own(strategy, {}) == sglang_own.OwnCall(
            "safetensors_weights_iterator",
            {"use_tqdm_on_load": True, "safetensors_load_strategy": load},
            module,
            # the plain path is every release's fallback; the others must be named in the release's function
            () if load == "lazy" else ("safetensors_load_strategy",),
        )
    assert own("vllm-mt", {"num_threads": 16}) == sglang_own.OwnCall(
        "multi_thread_safetensors_weights_iterator", {"use_tqdm_on_load": True, "max_workers": 16}, module
    )
    # a prefetch with other threads or blocks is not what vLLM's function is called with by default: the replica
    assert own("vllm-prefetch", {"num_threads": 2}) is None


@pytest.mark.parametrize("strategy", ["vllm", "vllm-eager", "vllm-prefetch", "vllm-mt"])
def test_the_own_iterator_loads_sglangs_values(
    standin: Path, small_draft: Path, strategy: str, sglang_digests: Digests, vllm_package: EnginePackage
) -> None:
    plan = build_plan(small_draft, tp=2, strategy=strategy, order="natural")
    plan.faithful_own = True
    (model,) = plan.models
    _skip_paths_the_release_lacks(vllm_package, strategy)
    for rank in range(2):
        ctx = LoadContext(rank=rank, tp=2, device=torch.device("cpu"), decompose=False)
        ctx.allocate(model)
        rec = WallOnlyRecorder(copy_timer=HostCopyTimer())
        loader = strategies_by_role(plan, faithful=True)["target"]
        assert isinstance(loader, sglang_own.SGLangOwnIterator) and loader.name == "vllm-own"
        with rec.model("target"):
            loader.load_model(ctx, model, rec)
        assert param_digests(ctx) == sglang_digests(plan.models, 2, rank)
        shards = rec.models[0].shards
        assert sorted(s.file for s in shards) == sorted(s.name for s in model.shards)
        assert all(s.status == "ok" and s.tensors > 0 for s in shards)
    made = vllm_package.calls(standin)
    assert made is None or (len(made) == 2 and all(call["files"] == len(model.shards) for call in made))


def _skip_paths_the_release_lacks(package: EnginePackage, strategy: str) -> None:
    """A real release from before a path existed has nothing of its own to drive for it (the replica runs, and
    ``availability`` says why: tested below)."""
    call = sglang_own.own_call(strategy, {})
    if package.real and call is not None and sglang_own.call_problem(call) is not None:
        pytest.skip(f"{package.package} {package.version}: {sglang_own.call_problem(call)}")


def test_availability_names_vllms_function_and_release(
    standin: Path, small_draft: Path, vllm_package: EnginePackage
) -> None:
    ok, text = sglang_own.availability(build_plan(small_draft, strategy="vllm-mt"))
    assert ok and text == (
        f"vLLM's own multi_thread_safetensors_weights_iterator (vllm {vllm_package.version}, installed here)"
    )
    ok, text = sglang_own.availability(build_plan(small_draft, strategy="vllm-prefetch"))
    if vllm_package.real and "prefetch" not in _load_strategies():
        # a release from before --safetensors-load-strategy prefetch: the replica, and why
        assert (
            not ok and 'no safetensors_weights_iterator taking safetensors_load_strategy="prefetch"' in text
        )
        return
    assert ok and text.endswith(
        "its prefetch runs without a process group here: each rank prefetches every file"
    )


def _load_strategies() -> set[str]:
    """The load strategies the installed vLLM's default iterator knows (read from its source)."""
    import inspect

    from vllm.model_executor.model_loader import weight_utils

    source = inspect.getsource(weight_utils.safetensors_weights_iterator)
    return {name for name in ("lazy", "eager", "prefetch") if f'"{name}"' in source}


def test_without_vllm_the_replica_runs_and_says_so(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a host without vllm (whether or not this one has it)
    monkeypatch.setattr(sglang_own, "installed", lambda package: False)
    ok, text = sglang_own.availability(build_plan(small_draft, strategy="vllm"))
    assert not ok and text == "ckptprof's replica of vLLM's sequence (vllm is not installed here)"

"""vLLM's own iterators under `run --engine vllm --faithful`: which function each vLLM path stands for, the values
they load, and what the session says (the stand-in package: tests/fixtures/vllm_standin)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.plan import ModelPlan, build_plan
from ckptprof.loader.recorder import WallOnlyRecorder
from ckptprof.loader.strategies import param_digests, sglang_own
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.worker import strategies_by_role

Digests = Callable[[list[ModelPlan], int, int], dict[str, str]]
STANDIN = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_standin"


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    calls = tmp_path / "calls.jsonl"
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.setenv("CKPTPROF_TEST_VLLM_CALLS", str(calls))
    yield calls
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
        )
    assert own("vllm-mt", {"num_threads": 16}) == sglang_own.OwnCall(
        "multi_thread_safetensors_weights_iterator", {"use_tqdm_on_load": True, "max_workers": 16}, module
    )
    # a prefetch with other threads or blocks is not what vLLM's function is called with by default: the replica
    assert own("vllm-prefetch", {"num_threads": 2}) is None


@pytest.mark.parametrize("strategy", ["vllm", "vllm-eager", "vllm-prefetch", "vllm-mt"])
def test_the_own_iterator_loads_sglangs_values(
    standin: Path, small_draft: Path, strategy: str, sglang_digests: Digests
) -> None:
    plan = build_plan(small_draft, tp=2, strategy=strategy, order="natural")
    plan.faithful_own = True
    (model,) = plan.models
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
    made = [json.loads(line) for line in standin.read_text().splitlines()]
    assert len(made) == 2 and all(call["files"] == len(model.shards) for call in made)


def test_availability_names_vllms_function_and_release(standin: Path, small_draft: Path) -> None:
    ok, text = sglang_own.availability(build_plan(small_draft, strategy="vllm-mt"))
    assert ok and text == "vLLM's own multi_thread_safetensors_weights_iterator (vllm 0.33.0, installed here)"
    ok, text = sglang_own.availability(build_plan(small_draft, strategy="vllm-prefetch"))
    assert ok and text.endswith(
        "its prefetch runs without a process group here: each rank prefetches every file"
    )


def test_without_vllm_the_replica_runs_and_says_so(small_draft: Path) -> None:
    if any(p for p in sys.path if "vllm_standin" in p):
        pytest.skip("the stand-in is on the path")
    ok, text = sglang_own.availability(build_plan(small_draft, strategy="vllm"))
    assert not ok and text == "ckptprof's replica of vLLM's sequence (vllm is not installed here)"

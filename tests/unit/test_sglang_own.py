"""SGLang's own iterators under --faithful: which function each replayed path stands for, the values they load, and
what the session says when the module cannot be used (the stand-in package: tests/fixtures/sglang_standin; in the
engine tier, the real release instead)."""

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
def standin(monkeypatch: pytest.MonkeyPatch, sglang_package: EnginePackage) -> Iterator[None]:
    if sglang_package.standin is not None:
        monkeypatch.syspath_prepend(str(sglang_package.standin))
    yield
    if sglang_package.real:
        return  # a real engine registers torch operators on import: it cannot be imported twice
    for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
        del sys.modules[name]


def test_each_replayed_path_maps_to_the_function_sglang_runs_for_it() -> None:
    own = sglang_own.own_call
    assert own("sglang", {}) == sglang_own.OwnCall("safetensors_weights_iterator", {})
    assert own("no-mmap", {}) == sglang_own.OwnCall("safetensors_weights_iterator", {"disable_mmap": True})
    assert own("sglang-mt", {"num_threads": 16}) == sglang_own.OwnCall(
        "buffered_multi_thread_safetensors_weights_iterator", {"max_workers": 16}
    )
    assert own("sglang-mt-completed", {}).function == "multi_thread_safetensors_weights_iterator"  # type: ignore[union-attr]
    # --weight-loader-prefetch-checkpoints: the single-thread iterator with its own prefetch (0.5.16 on)
    assert own("prefetch", {"num_threads": 6}) == sglang_own.OwnCall(
        "safetensors_weights_iterator", {"prefetch": True, "prefetch_num_threads": 6}
    )
    assert own("prefetch", {"block_mib": 64}) is None  # SGLang sets its block size from the environment
    # paths SGLang has no iterator function of its own for keep the replica
    assert own("pipelined", {}) is None and own("fastsafetensors", {}) is None
    assert own("sglang", {"read_ahead": True}) is None  # a ckptprof variant, not SGLang's sequence


@pytest.mark.usefixtures("standin")
@pytest.mark.parametrize("strategy", ["sglang", "sglang-mt", "no-mmap", "prefetch"])
def test_the_own_iterator_loads_the_values_of_sglangs_default_path(
    small_draft: Path, strategy: str, sglang_digests: Digests, sglang_package: EnginePackage
) -> None:
    # GIVEN a plan whose faithful pass may use SGLang's own functions
    plan = build_plan(small_draft, tp=2, strategy=strategy)
    plan.faithful_own = True
    (model,) = plan.models
    call = sglang_own.own_call(strategy, {})
    if sglang_package.real and call is not None and sglang_own.call_problem(call) is not None:
        # a release from before the path existed: the replica runs, and availability says why
        pytest.skip(f"sglang {sglang_package.version}: {sglang_own.call_problem(call)}")
    for rank in range(2):
        ctx = LoadContext(rank=rank, tp=2, device=torch.device("cpu"), decompose=False)
        ctx.allocate(model)
        rec = WallOnlyRecorder(copy_timer=HostCopyTimer())
        # WHEN the faithful pass's strategy loads the model
        loader = strategies_by_role(plan, faithful=True)["target"]
        assert isinstance(loader, sglang_own.SGLangOwnIterator)
        with rec.model("target"):
            loader.load_model(ctx, model, rec)
        # THEN the parameters hold what SGLang's default path gives the rank, and each file is one shard record
        assert param_digests(ctx) == sglang_digests(plan.models, 2, rank)
        shards = rec.models[0].shards
        assert sorted(s.file for s in shards) == sorted(s.name for s in model.shards)
        assert all(s.status == "ok" and s.tensors > 0 for s in shards)
        assert sum(s.tensors for s in shards) == sum(len(s.tensors or {}) for s in model.shards)
    # the decomposed pass never uses it
    assert not isinstance(strategies_by_role(plan, faithful=False)["target"], sglang_own.SGLangOwnIterator)


@pytest.mark.usefixtures("standin")
def test_availability_names_the_function_and_the_release(
    small_draft: Path, sglang_package: EnginePackage
) -> None:
    ok, text = sglang_own.availability(build_plan(small_draft, strategy="sglang-mt"))
    assert ok and text == (
        "SGLang's own buffered_multi_thread_safetensors_weights_iterator "
        f"(sglang {sglang_package.version}, installed here)"
    )
    ok, text = sglang_own.availability(build_plan(small_draft, strategy="pipelined"))
    assert not ok and "has no iterator function of its own" in text


def test_a_module_that_does_not_import_is_named_with_its_error(
    small_draft: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an sglang whose weight_utils fails on an import of the serving stack (as a bare `pip install --no-deps`)
    broken = tmp_path / "site"
    (broken / "sglang" / "srt" / "model_loader").mkdir(parents=True)
    for init in ("sglang", "sglang/srt", "sglang/srt/model_loader"):
        (broken / init / "__init__.py").write_text("")
    (broken / "sglang" / "srt" / "model_loader" / "weight_utils.py").write_text("import torchvision_absent\n")
    monkeypatch.syspath_prepend(str(broken))
    try:
        ok, text = sglang_own.availability(build_plan(small_draft, strategy="sglang-mt"))
    finally:
        for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
            del sys.modules[name]
    # THEN the replica runs, and the session says which import failed
    assert not ok
    assert "does not import here (ModuleNotFoundError: No module named 'torchvision_absent')" in text

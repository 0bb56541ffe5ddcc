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


class _Counting:
    """Process counters that an engine's own threads move (no recorder phase sees them)."""

    def __init__(self) -> None:
        self.storage = 1_000  # bytes the process had read before the load
        self.faults = 7

    def major_faults(self) -> int:
        return self.faults

    def storage_read_bytes(self) -> int:
        return self.storage


def test_what_the_engines_threads_read_is_booked_on_its_shards(small_draft: Path) -> None:
    # GIVEN an engine iterator that reads each file on its own threads (the process's counters move, no phase does)
    plan = build_plan(small_draft, tp=1, strategy="sglang")
    (model,) = plan.models
    counters = _Counting()
    rec = WallOnlyRecorder(copy_timer=HostCopyTimer(), counters=counters)
    ctx = LoadContext(rank=0, tp=1, device=torch.device("cpu"), decompose=False)
    ctx.allocate(model)
    owner = {name: shard.path for shard in model.shards for name in shard.tensors or {}}

    def weights() -> Iterator[tuple[str, torch.Tensor]]:
        from safetensors import safe_open

        for shard in model.shards:
            counters.storage += shard.bytes  # the engine's pool read the file
            counters.faults += 3
            with safe_open(shard.path, framework="pt", device="cpu") as f:
                for name in f.keys():  # noqa: SIM118
                    yield name, f.get_tensor(name)

    # WHEN the own iterator's loop consumes it
    with rec.model("target"):
        sglang_own.SGLangOwnIterator._consume(ctx, "target", weights(), owner, rec)
    # THEN every shard carries what was read while it was current, and the model's total is the process's delta
    shards = {s.file: s for s in rec.models[0].shards}
    assert sum(s.storage_bytes for s in shards.values()) == sum(s.bytes for s in model.shards)
    assert sum(s.major_faults for s in shards.values()) == 3 * len(model.shards)
    # a read lands on the shard that was current when it happened: the engine read the second file before it
    # yielded the second file's first tensor, so the first shard holds both (the split is approximate, the sum exact)
    first, second = model.shards[0], model.shards[1]
    assert shards[first.name].storage_bytes == first.bytes + second.bytes
    assert shards[model.shards[-1].name].storage_bytes == 0


def test_a_mode_the_release_never_names_is_refused() -> None:
    # GIVEN vLLM 0.11.0's iterator (its signature and its body, as that release wrote them): it takes
    # safetensors_load_strategy, knows "eager", and loads lazily for any other value
    import types

    source = """
def safetensors_weights_iterator(hf_weights_files, use_tqdm_on_load, safetensors_load_strategy="lazy"):
    loading_desc = "Loading safetensors checkpoint shards"
    if safetensors_load_strategy == "eager":
        loading_desc += " (eager)"
    yield from ()
"""
    module = types.ModuleType("vllm_0_11_weight_utils")
    import linecache

    filename = "<vllm-0.11.0 weight_utils>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), module.__dict__)
    # THEN prefetch is refused (the replica runs), eager and the plain path are not
    prefetch = sglang_own.own_call("vllm-prefetch", {})
    eager = sglang_own.own_call("vllm-eager", {})
    lazy = sglang_own.own_call("vllm", {})
    assert prefetch is not None and eager is not None and lazy is not None
    assert sglang_own.refusal(module, prefetch.function, prefetch.kwargs, prefetch.modes) == (
        'no safetensors_weights_iterator taking safetensors_load_strategy="prefetch"'
    )
    assert sglang_own.refusal(module, eager.function, eager.kwargs, eager.modes) is None
    assert sglang_own.refusal(module, lazy.function, lazy.kwargs, lazy.modes) is None

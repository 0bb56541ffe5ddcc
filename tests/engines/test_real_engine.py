"""ckptprof's faithful path through a real engine release, on the CPU (the engine tier: ``.ci/engines.sh``).

Each check holds what a session says against the installed package or the kernel, never against what ckptprof
believes: the package and version that ran, the import outside every wall, the bytes the kernel counted as read from
storage, the replica's wall on the same cached files, the release's own defaults and what it prints.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import statistics
from typing import Any

import pytest
from engine_runs import Engine, Run, RunFactory

from ckptprof.engines import sglang as sglang_profiles
from ckptprof.engines import vllm as vllm_profiles
from ckptprof.loader.strategies import sglang_own

REAL_ENGINE = os.environ.get("CKPTPROF_REAL_ENGINE", "")
pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(
        not REAL_ENGINE, reason="the engine tier: CKPTPROF_REAL_ENGINE=sglang==X (.ci/engines.sh)"
    ),
]

# Cold, the engine's processes together read each byte of the checkpoint once (the page cache serves the second
# rank); readahead past a file's end and the kernel's page granularity add a little. Measured on this 2-core VM
# with 0.5.23 and vllm 0.33.0: +0.01% to +0.04% over the checkpoint's bytes. Allowed: -1% / +2% and 1 MiB.
STORAGE_TOLERANCE = (0.99, 1.02, 1 << 20)
# Lines an engine writes on import that must never reach the user's terminal through ckptprof.
ENGINE_NOISE = ("UserWarning", "Failed to import from vllm._C", "is deprecated", "warnings.warn")


@pytest.fixture(scope="module")
def cold(run_ckptprof: RunFactory) -> Run:
    return run_ckptprof("--cache", "cold")


@pytest.fixture(scope="module")
def warm_engine(run_ckptprof: RunFactory) -> Run:
    return run_ckptprof("--cache", "warm", "--faithful-rounds", "3")


@pytest.fixture(scope="module")
def warm_replica(run_ckptprof: RunFactory) -> Run:
    return run_ckptprof("--cache", "warm", "--faithful-rounds", "3", "--no-engine-iterator")


def test_the_session_names_the_real_package_that_ran(cold: Run, engine: Engine) -> None:
    identity = cold.session["config"]["faithful_engine"]
    assert (identity["package"], identity["version"]) == (engine.package, engine.version)
    # the module came from the installed release, not from a stand-in of this repository
    module = importlib.import_module(identity["module"])
    assert identity["file"] == module.__file__ and "fixtures" not in identity["file"]
    assert cold.session["config"]["faithful_source"].startswith(f"{engine.title}'s own ")
    assert f"({engine.package} {engine.version}, installed here)" in cold.session["config"]["faithful_source"]


def test_the_engines_import_is_timed_apart_and_outside_the_faithful_wall(cold: Run, engine: Engine) -> None:
    imports = [rank["engine_import_s"] for rank in cold.session["ranks"]]
    assert all(seconds is not None and seconds > 0 for seconds in imports)
    # The engine imports in seconds (most of a serving stack); the 112 MB load it drives takes a fraction of that
    # here. A faithful wall that held the import would be longer than the import itself.
    for role in ("target", "draft"):
        for model, seconds in zip(cold.models(role), imports, strict=True):
            assert 0 < model["faithful_wall_s"] < seconds, (role, model["faithful_wall_s"], seconds)
    assert "its import took" in cold.stdout and "outside every timed wall" in cold.stdout


def test_cold_storage_bytes_are_what_the_kernel_counted(cold: Run) -> None:
    low, high, slack = STORAGE_TOLERANCE
    for info in cold.session["models"]:
        models = cold.models(info["role"])
        fetched = [m["faithful_storage_bytes"] for m in models]
        # Every rank's count is read; which rank fetched which page is a race (CI once had rank 0 read the whole
        # 48 MB draft before rank 1 touched it, and rank 1's count was rightly 0), so only the sum is held.
        assert all(b is not None and b >= 0 for b in fetched), fetched
        assert any(b > 0 for b in fetched), fetched
        total = info["total_bytes"]
        # the ranks' processes together fetched the files once, whoever opened them
        assert low * total <= sum(fetched) <= high * total + slack, (info["role"], fetched, total)
        for m in models:
            # the block device under the files read at least what this rank's process says it read meanwhile
            if m.get("faithful_disk_read_bytes") is not None:
                assert m["faithful_disk_read_bytes"] + slack >= m["faithful_storage_bytes"]
    # and the verdict of the faithful pass sees storage (today's main said "storage 0%" on a cold load)
    assert cold.session["verdict"]["bottleneck"] is not None


def test_the_faithful_wall_is_the_replicas_within_run_to_run_noise(
    warm_engine: Run, warm_replica: Run
) -> None:
    assert "(--no-engine-iterator)" in warm_replica.session["config"]["faithful_source"]
    for role in ("target", "draft"):
        engine_walls = _slowest_rank_walls(warm_engine, role)
        replica_walls = _slowest_rank_walls(warm_replica, role)
        # The noise: how far the rounds of one run spread (two cores, two ranks, a noisy VM).
        noise = max(_spread(engine_walls), _spread(replica_walls))
        delta = abs(statistics.median(engine_walls) - statistics.median(replica_walls))
        assert delta <= 2 * noise + 0.02, (role, engine_walls, replica_walls)


def _slowest_rank_walls(run: Run, role: str) -> list[float]:
    """Per faithful round, the slowest rank's wall for the model (the load ends when the last rank does)."""
    per_rank = [m["faithful_walls"] for m in run.models(role)]
    return [max(walls) for walls in zip(*per_rank, strict=True)]


def _spread(walls: list[float]) -> float:
    return max(walls) - min(walls)


def test_what_the_engine_writes_is_kept_in_the_session_not_printed(cold: Run, engine: Engine) -> None:
    terminal = cold.stdout + cold.stderr
    for noise in ENGINE_NOISE:
        assert noise not in terminal, f"the engine's {noise!r} reached the terminal"
    kept = [rank.get("engine_output") or "" for rank in cold.session["ranks"]]
    # every release tried writes warnings on a CPU host as it imports (quantization backends, vllm._C)
    assert all(text.strip() for text in kept), kept


def test_report_shows_the_kept_engine_output_on_request(
    cold: Run, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from ckptprof.cli.main import main

    path = tmp_path / "session.json"
    path.write_text(json.dumps(cold.session))
    assert main(["report", str(path), "--engine-output"]) == 0
    shown = capsys.readouterr().out
    for rank in cold.session["ranks"]:
        assert f"--- rank {rank['rank']} ({rank['device']}): " in shown
        assert rank["engine_output"].strip().splitlines()[-1] in shown


def test_the_progress_names_the_engine_that_runs(cold: Run, engine: Engine) -> None:
    assert f"faithful pass: {engine.title}'s exact sequence" in cold.stderr
    other = "SGLang" if engine.title == "vLLM" else "vLLM"
    assert f"{other}'s exact sequence" not in cold.stderr


def test_prefetch_runs_through_the_engines_own_path_where_the_release_has_it(
    run_ckptprof: RunFactory, engine: Engine
) -> None:
    strategy = "vllm-prefetch" if engine.package == "vllm" else "prefetch"
    call = sglang_own.own_call(strategy, {})
    assert call is not None
    problem = sglang_own.call_problem(call)
    flags = ["--strategy", strategy, "--cache", "cold"]
    if engine.package == "vllm":
        flags = ["--engine", "vllm", *flags]
    run = run_ckptprof(*flags)
    source = run.session["config"]["faithful_source"]
    if problem is None:
        assert source.startswith(f"{engine.title}'s own safetensors_weights_iterator"), source
        assert "each rank prefetches every file" in source
        fetched = [m["faithful_storage_bytes"] for m in run.models("target")]
        assert sum(fetched) > 0
    else:
        # a release from before the path: the replica runs, and the session says what the release lacks
        assert source == f"ckptprof's replica: {engine.package} {engine.version} has {problem}", source


def test_the_release_profile_is_what_the_installed_release_defaults_to(engine: Engine) -> None:
    if engine.package == "sglang":
        _sglang_defaults(engine)
    else:
        _vllm_defaults(engine)


def _sglang_defaults(engine: Engine) -> None:
    from sglang.srt.model_loader.loader import DefaultModelLoader
    from sglang.srt.server_args import ServerArgs

    profile = sglang_profiles.profile_for_version(engine.version)
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = parser.parse_args(["--model-path", "unused"])
    assert args.load_format == "auto"
    assert args.model_loader_extra_config == "{}"
    assert args.speculative_draft_load_format is None  # the draft loads like the target unless told
    assert args.weight_loader_disable_mmap is False
    # the loading flags the profile says this release accepts are the ones its parser has
    options = set(parser._option_string_actions)
    for flag in sorted(_sglang_loading_flags()):
        assert (flag in options) == (flag in profile.flags), flag
    if "--weight-loader-prefetch-checkpoints" in options:
        assert args.weight_loader_prefetch_checkpoints is False
        assert args.weight_loader_prefetch_num_threads == 4
    # multithreading: on or off by default, and its pool
    assert DefaultModelLoader.DEFAULT_NUM_THREADS == sglang_profiles.MT_DEFAULT_THREADS
    assert _multithread_default(inspect.getsource(DefaultModelLoader._get_weights_iterator)) == (
        profile.multithread_default
    )
    # the default path's iterator is the one the profile's default strategy is driven through
    call = sglang_own.own_call(profile.default_strategy, dict(profile.default_params))
    assert call is not None and sglang_own.call_problem(call) is None


def _sglang_loading_flags() -> set[str]:
    from ckptprof.engines import flags

    names = ("DISABLE_MMAP", "PREFETCH", "PREFETCH_THREADS", "DROP_CACHE", "DRAFT_LOAD_FORMAT", "LOAD_FORMAT")
    return {str(getattr(flags, name)) for name in names}


def _multithread_default(source: str) -> bool:
    """What ``extra_config.get("enable_multithread_load", X)`` defaults to in the release's loader."""
    found = re.search(r'get\(\s*"enable_multithread_load"\s*(?:,\s*(True|False))?\s*\)', source)
    assert found is not None, "the loader no longer reads enable_multithread_load"
    return found.group(1) == "True"


def _vllm_defaults(engine: Engine) -> None:
    import typing

    import vllm.config.load as load
    from vllm.model_executor.model_loader.default_loader import DefaultModelLoader

    profile = vllm_profiles.profile_for_version(engine.version)
    config: Any = load.LoadConfig()
    assert config.load_format == "auto"
    assert config.model_loader_extra_config == {}
    # unset (None, from 0.19: vLLM decides per file system) or the lazy path
    assert config.safetensors_load_strategy in (None, "lazy")
    assert (config.safetensors_load_strategy is None) == bool(profile.auto_prefetch_fs)
    assert hasattr(config, "safetensors_prefetch_num_threads") == profile.prefetch_flags
    if profile.prefetch_flags:
        assert config.safetensors_prefetch_num_threads == vllm_profiles.PREFETCH_THREADS
        assert config.safetensors_prefetch_block_size == vllm_profiles.PREFETCH_BLOCK_BYTES
    strategies = getattr(load, "SafetensorsLoadStrategy", None)
    if strategies is not None:
        assert set(typing.get_args(strategies)) == set(profile.strategies)
    assert DefaultModelLoader.DEFAULT_NUM_THREADS == vllm_profiles.DEFAULT_NUM_THREADS
    assert _multithread_default(inspect.getsource(DefaultModelLoader)) is False
    # --shuffle-safetensors-files (0.34 on), off by default
    assert hasattr(config, "shuffle_safetensors_files") == profile.shuffle_flag
    if profile.shuffle_flag:
        assert config.shuffle_safetensors_files is False


def test_the_shuffled_order_is_the_releases_own_for_every_rank(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a vLLM release with --shuffle-safetensors-files THEN the replica's order for each of 8 ranks is the one
    the release's own shuffle gives that rank (its generator seeded with torch.distributed's world rank, which the
    test stands in for), on padded and unpadded shard names."""
    if engine.package != "vllm" or not vllm_profiles.profile_for_version(engine.version).shuffle_flag:
        pytest.skip(f"{engine.package} {engine.version} has no --shuffle-safetensors-files")
    import types

    from vllm.model_executor.model_loader import weight_utils

    from ckptprof.loader.plan import ModelPlan, ShardPlan
    from ckptprof.loader.strategies.vllm import shuffled_for_rank

    for names in (
        [f"model-{i:05d}-of-00012.safetensors" for i in range(1, 13)],
        [f"model-{i}.safetensors" for i in range(1, 12)],
    ):
        files = [f"/ckpt/{name}" for name in sorted(names)]
        plan = ModelPlan("target", "/ckpt", "ext4", [ShardPlan(path, 1, {}) for path in files])
        for rank in range(8):
            group = types.SimpleNamespace(rank=rank)
            monkeypatch.setattr(weight_utils, "get_world_group", lambda group=group: group)
            theirs = weight_utils._shuffle_files(list(files))
            assert [s.path for s in shuffled_for_rank(plan, rank).shards] == theirs, (rank, names[0])


# SGLang releases whose weight utilities cannot import on a CUDA host even with sgl_kernel stood in for: they
# register fake implementations of its torch operators as they import (found with the real 0.5.9 wheel).
NEEDS_REAL_KERNELS = {"0.5.9": "operator sgl_kernel::sgl_per_token_group_quant_8bit does not exist"}

# A child that makes the engine believe it is on a CUDA host (the CPU tier has no GPU): SGLang's weight utilities
# then import its CUDA layers, which import its kernel package at module level, as they do on an H200.
_FAKE_CUDA_CHILD = """
import json, sys, torch
class _Properties:
    name, major, minor, total_memory, multi_processor_count = "NVIDIA H200", 9, 0, 143 << 30, 132
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_name = lambda *a, **k: _Properties.name
torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
torch.cuda.get_device_properties = lambda *a, **k: _Properties()
from ckptprof.loader import kernel_standin
mode, module_name, files = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if mode == "plain":
    try:
        __import__(module_name)
        print(json.dumps({"imported": True}))
    except ModuleNotFoundError as exc:
        print(json.dumps({"imported": False, "missing": exc.name}))
    raise SystemExit
try:
    module, stand_ins = kernel_standin.import_engine_module(module_name)
except kernel_standin.StandInNotEnough as exc:
    print(json.dumps({"refused": str(exc)}))
    raise SystemExit
sizes = {}
for name, tensor in module.safetensors_weights_iterator(files):
    sizes[name] = tensor.numel() * tensor.element_size()
print(json.dumps({"stand_ins": stand_ins, "calls": kernel_standin.CALLS, "sizes": sizes}))
"""


def test_on_a_cuda_host_without_its_kernel_package_sglang_loads_through_the_stand_in(
    engine: Engine, checkpoints: tuple[Any, Any]
) -> None:
    if engine.package != "sglang":
        pytest.skip("only SGLang's weight utilities import a kernel package ckptprof may stand in for")
    import json
    import subprocess
    import sys

    from safetensors import safe_open

    draft = checkpoints[1]
    files = sorted(str(p) for p in draft.glob("*.safetensors"))

    def child(mode: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", _FAKE_CUDA_CHILD, mode, sglang_own.MODULE, json.dumps(files)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return answer

    plain = child("plain")
    through = child("standin")
    if engine.version in NEEDS_REAL_KERNELS:
        # the release needs the real operators: ckptprof says so (the faithful pass then runs the replica)
        assert plain == {"imported": False, "missing": "sgl_kernel"}
        assert through["refused"].startswith(
            "sgl_kernel is not installed here, and the import failed with an import-only stand-in in its place"
        )
        assert NEEDS_REAL_KERNELS[engine.version] in through["refused"]
        return
    if plain["imported"]:
        # a release whose CUDA imports need no kernel package: nothing may be stood in for
        assert through["stand_ins"] == []
    else:
        assert plain["missing"].split(".")[0] == "sgl_kernel"
        assert through["stand_ins"] == ["sgl_kernel"]
    # SGLang's own iterator yields every tensor of every file, and none of the kernels was called
    expected = {}
    for path in files:
        with safe_open(path, framework="pt") as f:
            for key in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                tensor = f.get_tensor(key)
                expected[key] = tensor.numel() * tensor.element_size()
    assert through["sizes"] == expected
    assert through["calls"] == []

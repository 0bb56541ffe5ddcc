"""The strategies table under a release profile: each row's flags and the "default" mark are that release's (#32
item 2). On SGLang 0.5.16+ the multithread loader is the default, so single-threaded `sglang` needs a flag to turn
it off and `sglang-mt` at 8 threads needs none."""

from __future__ import annotations

from typing import Any

from ckptprof.analysis.strategies import compare_strategies
from ckptprof.engines import sglang as sglang_engine
from ckptprof.engines import vllm as vllm_engine
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardTiming

GB = 1_000_000_000


def run(strategy: str, params: dict[str, Any], wall: float, release: dict[str, Any], key: str) -> Session:
    shard = ShardTiming(file="a.safetensors", bytes=GB, read_s=wall / 2, h2d_s=wall / 2, wall_s=wall)
    return Session(
        config={
            "tp": 1,
            "cache": "warm",
            "devices": ["cpu"],
            "strategy": strategy,
            "strategy_params": params,
            key: release,
        },
        models=[ModelInfo(role="target", path="/ckpt", fs_type="ext4", total_bytes=GB)],
        ranks=[
            RankResult(rank=0, device="cpu", models=[RankModel(role="target", wall_s=wall, shards=[shard])])
        ],
    )


def sglang_runs(version: str) -> list[Session]:
    release = sglang_engine.profile_for_version(version).to_dict("--sglang-version", version)
    return [
        run("sglang", {}, 2.0, release, "sglang_release"),
        run("sglang-mt", {"num_threads": 8}, 1.0, release, "sglang_release"),
        run("sglang-mt", {"num_threads": 16}, 1.6, release, "sglang_release"),
    ]


def test_on_a_multithread_default_release_the_single_thread_path_is_the_one_that_needs_a_flag() -> None:
    # GIVEN sglang, sglang-mt at the default 8 threads and at 16 replayed as SGLang 0.5.16
    comparison = compare_strategies(sglang_runs("0.5.16"))
    flags = {r.label: r.flags for r in comparison.rows}
    # THEN the single-threaded path is selected by turning multithread off, the default path needs no flag, and 16
    # threads need only num_threads (enable_multithread_load is already on)
    assert flags["sglang"] == """--model-loader-extra-config '{"enable_multithread_load": false}'"""
    assert flags["sglang-mt:num_threads=8"] == "(default: no flags)"
    assert flags["sglang-mt:num_threads=16"] == """--model-loader-extra-config '{"num_threads": 16}'"""
    # and "faster than the default" compares with the release's default path, not with single-threaded sglang
    assert "2.00x faster than the default" not in comparison.summary
    assert comparison.summary.startswith("fastest: sglang-mt:num_threads=8 1.000 s")
    assert "select it with (default: no flags)" in comparison.summary


def test_on_a_single_thread_default_release_multithread_is_opted_into() -> None:
    comparison = compare_strategies(sglang_runs("0.5.9"))
    flags = {r.label: r.flags for r in comparison.rows}
    assert flags["sglang"] == "(default: no flags)"
    assert flags["sglang-mt:num_threads=8"] == (
        """--model-loader-extra-config '{"enable_multithread_load": true, "num_threads": 8}'"""
    )
    assert "2.00x faster than the default (2.000 s)" in comparison.summary


def test_the_default_path_is_named_when_it_was_not_replayed() -> None:
    # GIVEN only sglang and 16 threads under 0.5.16 (the default, 8 threads, not replayed)
    runs = sglang_runs("0.5.16")
    comparison = compare_strategies([runs[0], runs[2]])
    # THEN nothing is called "the default" that is not
    assert "than the default" not in comparison.summary
    assert "faster than sglang" in comparison.summary


def test_vllm_rows_take_the_flags_of_the_vllm_release_in_force() -> None:
    old = vllm_engine.profile_for_version("0.17.0").to_dict("--vllm-version", "0.17.0")
    new = vllm_engine.profile_for_version("0.22.0").to_dict("--vllm-version", "0.22.0")
    for release, expected in (
        (old, "not on vLLM 0.17: its --safetensors-load-strategy takes lazy, eager"),
        (new, "--safetensors-load-strategy prefetch --safetensors-prefetch-num-threads 4"),
    ):
        rows = [
            run("vllm", {}, 2.0, release, "vllm_release"),
            run("vllm-prefetch", {"num_threads": 4}, 1.0, release, "vllm_release"),
        ]
        flags = {r.strategy: r.flags for r in compare_strategies(rows).rows}
        assert flags["vllm-prefetch"] == expected


def vllm_runs(decision: dict[str, Any] | None) -> list[Session]:
    release = vllm_engine.profile_for_version("0.22.0").to_dict("--vllm-version", "0.22.0")
    if decision is not None:
        release["prefetch_decision"] = decision
    return [
        run("sglang", {}, 3.0, release, "vllm_release"),
        run("vllm", {}, 2.0, release, "vllm_release"),
        run("vllm-eager", {}, 2.5, release, "vllm_release"),
        run("vllm-mt", {"num_threads": 16}, 1.5, release, "vllm_release"),
        run("vllm-prefetch", {}, 1.0, release, "vllm_release"),
    ]


def test_every_vllm_row_takes_its_flags_and_default_mark_from_the_vllm_profile() -> None:
    # GIVEN the five paths replayed as vLLM 0.22 on a file system it does not prefetch on by itself
    flags = {r.label: r.flags for r in compare_strategies(vllm_runs({"prefetch": False})).rows}
    # THEN vLLM's lazy path is the default, each other path has vLLM's own flag, and SGLang's row is no vLLM path
    assert flags == {
        "sglang": "not a vLLM path: SGLang's default, the values' reference",
        "vllm": "(default: no flags)",
        "vllm-eager": "--safetensors-load-strategy eager",
        "vllm-mt:num_threads=16": """--model-loader-extra-config '{"enable_multithread_load": true, "num_threads": 16}'""",
        "vllm-prefetch": "--safetensors-load-strategy prefetch",
    }


def test_where_vllm_prefetches_by_itself_prefetching_is_the_default_row() -> None:
    # GIVEN the same paths where vLLM's rule prefetches unasked (NFS, the checkpoint fits in RAM)
    comparison = compare_strategies(vllm_runs({"prefetch": True}))
    flags = {r.label: r.flags for r in comparison.rows}
    # THEN prefetching needs no flag, the lazy path needs one, and "faster than vLLM's default" is not claimed for
    # the default itself
    assert flags["vllm-prefetch"] == "(default: no flags)"
    assert flags["vllm"] == "--safetensors-load-strategy lazy"
    assert comparison.summary.startswith("fastest: vllm-prefetch 1.000 s")
    assert "faster than vLLM's default" not in comparison.summary

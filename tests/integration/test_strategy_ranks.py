"""Strategies through real rank processes: ``--verify`` digests from the worker, and fastsafetensors' TP group."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ckptprof import api
from ckptprof.cli.main import main
from ckptprof.loader import ranks
from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.plan import ModelPlan, build_plan
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies import FLAGS, get_strategy, param_digests
from ckptprof.loader.strategies import fastsafetensors as fst_mod
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.loader.worker import replay_rank

Digests = Callable[[list[ModelPlan], int, int], dict[str, str]]


def test_replay_rank_verify_returns_digests_equal_to_sglang(
    small_verifier: Path, small_draft: Path, sglang_digests: Digests
) -> None:
    plan = build_plan(
        small_verifier,
        small_draft,
        tp=1,
        devices="cpu",
        strategy="pipelined",
        strategy_params={"readers": 4, "chunk_mib": 4},
        verify=True,
    )
    assert plan.config()["strategy_params"] == {"readers": 4, "chunk_mib": 4} and plan.config()["verify"]
    threads = torch.get_num_threads()
    try:
        result = replay_rank(plan, 0)
    finally:
        torch.set_num_threads(threads)  # replay_rank pins torch to one thread, as SGLang does
    assert result.status == "ok" and result.error is None, result.error
    assert result.checksums == sglang_digests(plan.models, 1, 0)
    unverified = replay_rank(build_plan(small_draft, devices="cpu", strategy="no-mmap"), 0)
    torch.set_num_threads(threads)
    assert unverified.checksums is None


def test_fastsafetensors_tp3_in_rank_processes(
    small_verifier: Path, small_draft: Path, sglang_digests: Digests
) -> None:
    """Files spread over 3 rank processes (a gloo group on CPU); each rank ends with sglang's values.
    Without the package every rank reports the strategy unavailable, with the install hint."""
    plan = build_plan(
        small_verifier, small_draft, tp=3, devices="cpu", strategy="fastsafetensors", verify=True
    )
    results = ranks.run_spawned(plan)
    assert [r.rank for r in results] == [0, 1, 2]
    if fst_mod.load_package() is None:
        # Each rank finds the package missing; one that finds it first can stop the others at the start barrier
        # before they look (a race: seen once in CI), and they then say so. At least one names the install hint.
        hint = "fastsafetensors is not installed (pip install fastsafetensors)"
        stopped = "stopped before loading: another rank died before the start barrier"
        assert all(r.status == "failed" and r.error for r in results)
        assert all(hint in (r.error or "") or stopped in (r.error or "") for r in results), results
        assert any(hint in (r.error or "") for r in results)
        return
    for r in results:
        assert r.status == "ok" and r.error is None, r.error
        assert r.checksums == sglang_digests(plan.models, 3, r.rank), f"rank {r.rank}"
        for role, model in zip(("target", "draft"), r.models, strict=True):
            assert model.role == role
            assert all(s.status == "ok" for s in model.shards)
        # each rank read only its own file of every batch: about a third of the bytes
        read = sum(s.bytes for m in r.models for s in m.shards)
        total = sum(m.total_bytes for m in plan.models)
        assert read < 0.6 * total
    assert FLAGS["fastsafetensors"] == "--load-format fastsafetensors"


@pytest.mark.parametrize("name", ["sglang-mt", "prefetch"])
def test_threaded_strategies_in_a_rank_process_tp2(
    small_draft: Path, name: str, sglang_digests: Digests
) -> None:
    plan = build_plan(small_draft, tp=2, devices="cpu", strategy=name, verify=True)
    results = ranks.run_spawned(plan)
    for r in results:
        assert r.status == "ok" and r.error is None, r.error
        assert r.checksums == sglang_digests(plan.models, 2, r.rank)
        shards = r.models[0].shards
        assert len(shards) == len(plan.models[0].shards)
        assert all(s.wall_s > 0 and s.h2d_bytes > 0 for s in shards)


def test_cli_runs_strategies_side_by_side_and_verifies(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ckptprof.cli.main import main
    from ckptprof.session import Session

    code = main(
        [
            "run",
            str(small_draft),
            "--strategy",
            "no-mmap,sglang-mt:num_threads=2",
            "--verify",
            "--no-probe",
            "-q",
            "--tp",
            "2",
            "-o",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    session = Session.load(tmp_path / "session.json")
    cmp = session.strategies
    assert cmp is not None
    assert [r.strategy for r in cmp.rows] == [
        "sglang",
        "no-mmap",
        "sglang-mt",
    ]  # --verify puts sglang first
    assert cmp.verified is True
    # each variant's session is saved under its label, so two variants of one strategy never overwrite each other
    assert [r.label for r in cmp.rows] == ["sglang", "no-mmap", "sglang-mt:num_threads=2"]
    assert set(session.artifacts["strategy_sessions"]) == {"no-mmap", "sglang-mt:num_threads=2"}
    assert (tmp_path / "session-sglang-mt_num_threads-2.json").is_file()
    assert "strategies, side by side" in out
    assert main(["run", str(small_draft), "--strategy", "warp-drive", "--no-probe"]) == 2
    assert "available:" in capsys.readouterr().err


@pytest.mark.parametrize(("tp", "block_mib", "depth"), [(1, 16, 2), (3, 1, 1), (2, 1, 3)])
def test_read_ahead_on_a_cold_checkpoint_loads_the_same_values_and_counts_its_reads(
    small_verifier: Path, small_draft: Path, tp: int, block_mib: int, depth: int
) -> None:
    """The read-ahead decomposition (a cold shard's next tensor faulted in on another thread) loads exactly what
    the serial one does, and its reads land on the right shards with their bytes and storage bytes."""
    from ckptprof.checkpoint import fs

    plans = [build_plan(small_verifier, small_draft, tp=tp, devices="cpu") for _ in range(2)]
    rank = tp - 1
    digests, recorders = [], []
    for read_ahead, plan in zip((True, False), plans, strict=True):
        dropped = fs.drop_cache([f for m in plan.models for f in m.files])
        if not dropped.ok:
            pytest.skip(f"cannot drop the page cache here: {dropped.note}")
        ctx = LoadContext(rank=rank, tp=tp, device=torch.device("cpu"))
        for m in plan.models:
            ctx.allocate(m)
        rec = Recorder(copy_timer=HostCopyTimer())
        params = {"read_ahead": True, "block_mib": block_mib, "depth": depth} if read_ahead else {}
        strategy = get_strategy("sglang", **params)
        for m in plan.models:
            with rec.model(m.role):
                strategy.load_model(ctx, m, rec)
        digests.append(param_digests(ctx))
        recorders.append(rec)
    assert digests[0] == digests[1]
    ahead, serial = recorders
    for m_ahead, m_serial in zip(ahead.models, serial.models, strict=True):
        by_file = {s.file: s for s in m_serial.shards}
        for s in m_ahead.shards:
            assert s.status == "ok", s.error
            twin = by_file[s.file]
            assert (s.bytes, s.h2d_bytes, s.tensors) == (twin.bytes, twin.h2d_bytes, twin.tensors)
            assert s.nonresident_bytes > 0  # cold: this shard went through the read-ahead path
            if s.bytes:
                assert s.read_s > 0
    fetched = sum(s.storage_bytes for m in ahead.models for s in m.shards)
    total = sum(m.total_bytes for m in plans[0].models)
    if (
        sum(s.storage_bytes for m in serial.models for s in m.shards) > total // 2
    ):  # the kernel counts reads here
        assert fetched > total // 2  # the read-ahead thread's storage bytes are counted on the shards too


def test_a_read_ahead_failure_fails_its_shard_only(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error on the read-ahead thread marks the shard it was reading failed; the other shards still load."""
    from ckptprof.checkpoint import fs
    from ckptprof.loader.strategies import sglang as sglang_mod

    plan = build_plan(small_draft, tp=1, devices="cpu")
    (model,) = plan.models
    dropped = fs.drop_cache(model.files)
    if not dropped.ok:
        pytest.skip(f"cannot drop the page cache here: {dropped.note}")
    victim = Path(model.files[2]).name
    real_fault_in = sglang_mod.fault_in

    current = [""]

    def failing(t: torch.Tensor) -> None:
        if threading.current_thread().name.startswith("ckptprof-read-ahead") and current[0] == victim:
            raise OSError(5, "Input/output error (injected)")
        real_fault_in(t)

    real_load = sglang_mod.SGLang._load_shard_read_ahead

    def tracking(self: sglang_mod.SGLang, ctx: LoadContext, role: str, path: str, *rest: object) -> None:
        current[0] = Path(path).name
        real_load(self, ctx, role, path, *rest)

    monkeypatch.setattr(sglang_mod, "fault_in", failing)
    monkeypatch.setattr(sglang_mod.SGLang, "_load_shard_read_ahead", tracking)
    ctx = LoadContext(rank=0, tp=1, device=torch.device("cpu"))
    ctx.allocate(model)
    rec = Recorder(copy_timer=HostCopyTimer())
    with rec.model(model.role):
        get_strategy("sglang", read_ahead=True, block_mib=1).load_model(ctx, model, rec)
    status = {s.file: (s.status, s.error) for s in rec.models[0].shards}
    assert len(status) == len(model.files)
    assert status[victim][0] == "failed" and "injected" in (status[victim][1] or "")
    assert all(st == "ok" for f, (st, _) in status.items() if f != victim)


def test_the_draft_loads_through_its_own_format_and_holds_sglangs_values(
    small_verifier: Path, small_draft: Path, sglang_digests: Digests
) -> None:
    # GIVEN SGLang's --speculative-draft-load-format runai_streamer: the target on the default path, the draft not
    pytest.importorskip("runai_model_streamer")
    session = api.replay(
        small_verifier,
        small_draft,
        tp=2,
        devices="cpu",
        strategy="sglang",
        draft_strategy="runai-streamer",
        probe=False,
        verify=True,
    )
    # THEN both models hold on every rank what SGLang's default path gives them
    assert all(r.status == "ok" and not r.error for r in session.ranks), [r.error for r in session.ranks]
    plan = build_plan(small_verifier, small_draft, tp=2)
    for r in session.ranks:
        assert r.checksums == sglang_digests(plan.models, 2, r.rank), r.rank
    # AND the session says how each model was loaded, with the flag that selects the draft's format
    assert session.config["draft_strategy"] == "runai-streamer"
    assert session.config["draft_strategy_flags"] == "--speculative-draft-load-format runai_streamer"
    assert session.config["strategy_flags"].endswith("--speculative-draft-load-format runai_streamer")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--draft-strategy", "runai-streamer"], "there is no draft"),
        (["--draft", "D", "--draft-strategy", "sglang-mt"], "only the draft's load format"),
        (["--draft", "D", "--draft-strategy", "runai-streamer:nope=1"], "no parameter nope"),
    ],
)
def test_draft_strategy_refusals_name_the_problem(
    small_verifier: Path, small_draft: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(small_draft) if a == "D" else a for a in argv]
    assert main(["run", str(small_verifier), "--no-probe", "-q", *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_strategy_asked_for_again_keeps_a_session_per_run(small_draft: Path, tmp_path: Path) -> None:
    """GIVEN `--strategy no-mmap,sglang,no-mmap,sglang` (rounds of a comparison, as on the H200 for vLLM's shuffle)
    THEN every run's session is saved: the repeats numbered, none overwriting another (the second sglang replaced
    the first before, silently)."""
    from ckptprof.session import Session

    argv = [
        "run",
        str(small_draft),
        "--strategy",
        "no-mmap,sglang,no-mmap,sglang",
        "--no-probe",
        "-q",
        "--tp",
        "2",
    ]
    assert main([*argv, "-o", str(tmp_path)]) == 0
    session = Session.load(tmp_path / "session.json")
    assert session.artifacts["strategy_sessions"] == {
        "sglang": str(tmp_path / "session-sglang.json"),
        "no-mmap (2)": str(tmp_path / "session-no-mmap-2.json"),
        "sglang (2)": str(tmp_path / "session-sglang-2.json"),
    }
    assert sorted(p.name for p in tmp_path.glob("session*.json")) == [
        "session-no-mmap-2.json",
        "session-sglang-2.json",
        "session-sglang.json",
        "session.json",
    ]
    strategies = [
        Session.load(Path(path)).config["strategy"]
        for path in session.artifacts["strategy_sessions"].values()
    ]
    assert strategies == ["sglang", "no-mmap", "sglang"]
    assert session.config["strategy"] == "no-mmap"

"""What the faithful pass measures besides its walls is taken outside them (issue 32 item 4): shards delivered to the
parent after the wall, residency read on descriptors opened before the load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from ckptprof.checkpoint import fs
from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.plan import build_plan
from ckptprof.loader.recorder import WallOnlyRecorder
from ckptprof.loader.strategies import get_strategy
from ckptprof.loader.strategies.base import LoadContext
from ckptprof.session import ShardTiming


def test_shards_left_for_after_the_wall_reach_the_parent_in_order_when_flushed() -> None:
    # GIVEN the faithful recorder, two models whose pending deliveries are left for after the wall
    seen: list[tuple[str, str]] = []

    def done(role: str, timing: ShardTiming) -> None:
        seen.append((role, timing.file))

    rec = WallOnlyRecorder(copy_timer=HostCopyTimer(), on_shard_done=done)
    rec.start()
    for role, files in (("target", ["t1", "t2"]), ("draft", ["d1"])):
        with rec.model(role, flush_at_end=False):
            for file in files:
                with rec.shard(file):
                    pass
    # WHEN the caller flushes once its wall is taken
    rec.flush_deliveries()
    # THEN every shard has reached the callback, in the order the shards closed, models in order
    assert seen == [("target", "t1"), ("target", "t2"), ("draft", "d1")]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _open_shards(folder: Path) -> list[str]:
    """The files under ``folder`` this process holds open."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder.resolve())):
            out.append(target)
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_the_faithful_sglang_pass_reads_residency_on_descriptors_opened_before_the_load(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the single-thread sglang path prepared for the faithful pass (outside the timed load)
    plan = build_plan(small_draft, tp=1, devices="cpu", cache="warm", strategy="sglang", faithful=True)
    (model,) = plan.models
    ctx = LoadContext(rank=0, tp=1, device=torch.device("cpu"), decompose=False)
    ctx.allocate(model)
    strategy = get_strategy("sglang")
    fds_before = _open_fds()
    strategy.prepare(ctx, plan)
    assert _open_fds() == fds_before + len(model.shards)

    # WHEN the load runs with a path-based residency check that would fail, and the kernel reports a third of each
    # shard resident on a descriptor
    def no_open(path: str | Path) -> int:
        raise OSError("opened a shard inside the timed load for its residency")

    monkeypatch.setattr(fs, "resident_bytes", no_open)
    monkeypatch.setattr(fs, "resident_bytes_fd", lambda fd, offset=0, length=None: os.fstat(fd).st_size // 3)
    rec = WallOnlyRecorder(copy_timer=HostCopyTimer())
    rec.start()
    with rec.model(model.role):
        strategy.load_model(ctx, model, rec)
    strategy.close()

    # THEN each shard's missing bytes come from its own descriptor, every shard loaded, and close() let them go
    got = {s.file: s.nonresident_bytes for s in rec.models[0].shards}
    assert got == {shard.name: shard.bytes - shard.bytes // 3 for shard in model.shards}
    assert all(s.status == "ok" for s in rec.models[0].shards)
    assert _open_shards(small_draft) == []


def test_the_decomposed_sglang_pass_still_checks_each_shard_as_it_opens(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the decomposed pass (its wall is not the one compared with SGLang's): nothing kept open by prepare
    plan = build_plan(small_draft, tp=1, devices="cpu", cache="warm", strategy="sglang")
    (model,) = plan.models
    ctx = LoadContext(rank=0, tp=1, device=torch.device("cpu"), decompose=True)
    ctx.allocate(model)
    strategy = get_strategy("sglang")
    fds_before = _open_fds()
    strategy.prepare(ctx, plan)
    assert _open_fds() == fds_before
    checked: list[str] = []

    def by_path(path: str | Path) -> int:
        checked.append(Path(path).name)
        return 0

    monkeypatch.setattr(fs, "resident_bytes", by_path)
    from ckptprof.loader.recorder import Recorder

    rec = Recorder(copy_timer=HostCopyTimer())
    rec.start()
    with rec.model(model.role):
        strategy.load_model(ctx, model, rec)
    strategy.close()
    # THEN each shard's residency was read at its start, by path
    assert checked == [shard.name for shard in model.shards]

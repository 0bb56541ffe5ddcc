"""The faithful recorder hands closed shards to ``on_shard_done`` off the loading thread (issue 32 item 4)."""

from __future__ import annotations

import threading

from ckptprof.loader.copytimers import HostCopyTimer
from ckptprof.loader.recorder import Recorder, WallOnlyRecorder
from ckptprof.session import ShardTiming

# A deadlock guard, not a timing: a delivery made on the closing thread would wait this long for the test.
GUARD_S = 5.0


def test_the_faithful_pass_closes_a_shard_without_waiting_for_its_delivery() -> None:
    # GIVEN a callback that cannot return before the test lets it (as a parent's queue may be slow to take a shard)
    released = threading.Event()
    seen: list[tuple[str, bool, str]] = []

    def done(role: str, timing: ShardTiming) -> None:
        seen.append((timing.file, released.wait(GUARD_S), role))

    rec = WallOnlyRecorder(copy_timer=HostCopyTimer(), on_shard_done=done)
    rec.start()
    # WHEN the loading thread closes a shard, lets the callback go, then closes the next
    with rec.model("draft"):
        with rec.shard("a.safetensors"):
            pass
        released.set()
        shard = rec.open_shard("b.safetensors")
        rec.close_shard(shard)
    # THEN the first close did not wait for the callback, and by the model's end both were delivered, in order
    assert seen == [("a.safetensors", True, "draft"), ("b.safetensors", True, "draft")]


def test_a_shard_closed_before_a_stall_is_delivered_during_the_stall() -> None:
    # GIVEN the faithful recorder, a shard closed and nothing else happening (a rank stuck on its next file)
    delivered = threading.Event()
    rec = WallOnlyRecorder(copy_timer=HostCopyTimer(), on_shard_done=lambda role, t: delivered.set())
    rec.start()
    with rec.model("target"):
        with rec.shard("a.safetensors"):
            pass
        # THEN the parent hears of it while the model is still loading (it tells where a stuck rank stands)
        assert delivered.wait(GUARD_S)


def test_the_decomposed_pass_still_delivers_each_shard_as_it_closes() -> None:
    seen: list[str] = []
    rec = Recorder(copy_timer=HostCopyTimer(), on_shard_done=lambda role, t: seen.append(t.file))
    rec.start()
    with rec.model("target"):
        with rec.shard("a.safetensors"):
            pass
        assert seen == ["a.safetensors"]

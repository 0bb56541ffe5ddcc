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


def test_the_faithful_pass_hands_a_batch_of_shards_over_in_one_call() -> None:
    # GIVEN the faithful recorder with a batch callback (a rank puts one message on the parent's queue per call)
    batches: list[list[tuple[str, str]]] = []
    rec = WallOnlyRecorder(
        copy_timer=HostCopyTimer(),
        on_shards_done=lambda batch: batches.append([(role, t.file) for role, t in batch]),
    )
    rec.start()
    # WHEN five shards close within one delivery interval
    with rec.model("draft"):
        for name in "abcde":
            with rec.shard(f"{name}.safetensors"):
                pass
    # THEN the model's end hands all five over at once, in the order they closed: one message, not five
    assert batches == [[("draft", f"{name}.safetensors") for name in "abcde"]]


def test_the_parent_reads_a_rank_batch_as_the_shards_it_holds() -> None:
    from ckptprof.loader.plan import ReplayPlan
    from ckptprof.loader.ranks import _Collector
    from ckptprof.loader.recorder import shard_dict

    class Queue:
        def __init__(self, messages: list[tuple[object, ...]]) -> None:
            self.messages = messages

        def empty(self) -> bool:
            return not self.messages

        def get(self) -> tuple[object, ...]:
            return self.messages.pop(0)

    # GIVEN a rank's faithful pass reporting three closed shards as one batch (it then stalls: no result)
    shards = [ShardTiming(file=f"{n}.safetensors", start_s=i * 0.1, wall_s=0.05) for i, n in enumerate("abc")]
    batch = [
        ("target", shard_dict(shards[0])),
        ("target", shard_dict(shards[1])),
        ("draft", shard_dict(shards[2])),
    ]
    plan = ReplayPlan.from_dict({"models": [], "tp": 2})
    seen: list[tuple[int, str, str]] = []
    collector = _Collector(plan, lambda rank, role, t: seen.append((rank, role, t.file)))
    # WHEN the parent drains its queue
    collector.drain(Queue([("shards", 1, batch)]), 0.5)
    # THEN each shard counts as a reported one, under its model, and moves the progress bar
    assert seen == [
        (1, "target", "a.safetensors"),
        (1, "target", "b.safetensors"),
        (1, "draft", "c.safetensors"),
    ]
    models = collector.partial[1]
    assert [(m.role, [s.file for s in m.shards]) for m in models] == [
        ("target", ["a.safetensors", "b.safetensors"]),
        ("draft", ["c.safetensors"]),
    ]

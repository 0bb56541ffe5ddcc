"""watch ends at the server's ready line, and the load's last reads came before that line: watch looks once more
after it, so a shard read between its last sample and the ready line is seen whole (a CI run of test_watch's
`--log` test once saw the last shard short of whole)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.synth import synthesize
from ckptprof.watch.session_file import was_full
from ckptprof.watch.watcher import Watcher, start


def test_a_shard_read_just_before_the_ready_line_is_seen_whole(tmp_path: Path) -> None:
    # GIVEN a checkpoint whose pages are dropped, and a watch of a server process
    ckpt = tmp_path / "ckpt"
    synthesize(ckpt, preset="eagle3-draft", shards=2, size=4_000_000, seed=3)
    shards = sorted(ckpt.glob("*.safetensors"))
    if not fs.drop_cache(shards).ok:
        pytest.skip(f"{ckpt}: its pages cannot be dropped")
    watcher = Watcher(start(["sleep", "30"]), model_path=str(ckpt), interval_s=0.2, timeout_s=30)

    def ready_right_after_the_last_reads() -> tuple[str | None, str | None, list[object]]:
        # WHEN the server reads every shard after watch's sample and says ready before watch's next one
        for shard in shards:
            shard.read_bytes()
        return "ready", None, []

    watcher._log_words = ready_right_after_the_last_reads  # type: ignore[method-assign]
    try:
        record = watcher.run()
    finally:
        watcher.target.popen.kill()  # type: ignore[union-attr]
    # THEN watch ended at ready, and every shard was seen whole
    assert record.end_reason == "ready"
    seen = record.to_dict()["models"][0]["shards"]
    assert len(seen) == len(shards) and all(was_full(s) for s in seen), seen

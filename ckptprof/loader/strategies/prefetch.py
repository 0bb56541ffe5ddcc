"""SGLang with ``--weight-loader-prefetch-checkpoints``: background reads warm the page cache for everyone.

Each node-local rank reads its share of the sorted files, ``sorted_files[local_rank::local_world_size]``, from
start to end in 16 MiB blocks (``SGLANG_PREFETCH_BLOCK_SIZE_MB``) on a small pool of background threads
(``--weight-loader-prefetch-num-threads``, default 4), while its own loop runs the default mmap path. The
ranks of a node thus read disjoint files in parallel, and each rank's page faults find most pages cached.

Every file is one shard record, shared by both sides: the background reads land on it as "read" (their bytes
and their thread's storage counters), the foreground's mmap path as usual; the record closes when both are done
with the file, so its wall spans the first background block to the last copy. When the foreground is done the
prefetcher stops after its current block: what it had not read yet is no longer needed by this rank.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ckptprof.engines import flags as sglang_flags
from ckptprof.loader.plan import ModelPlan, ShardPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies.base import LoadContext, Strategy, nonresident
from ckptprof.loader.strategies.sglang import SGLang
from ckptprof.session import ShardTiming

DEFAULT_THREADS = 4
DEFAULT_BLOCK_MIB = 16


@dataclass
class _Tracker:
    """A shard record used by the foreground and (for this rank's share) the prefetcher; closed by the last."""

    timing: ShardTiming
    users: int
    error: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def release(self, rec: Recorder, error: BaseException | None = None) -> None:
        with self.lock:
            self.users -= 1
            if error is not None:
                self.error = error
            last = self.users == 0
        if last:
            rec.close_shard(self.timing, self.error)


def local_position(ctx: LoadContext) -> tuple[int, int]:
    """(local_rank, local_world_size): torchrun's when this process is a torchrun rank, else the spawned TP group
    (spawned ranks all run on this node)."""
    position = ctx.position
    return position.local_rank, position.local_world_size


class SGLangPrefetch(Strategy):
    name = "prefetch"

    def __init__(self, num_threads: int = DEFAULT_THREADS, block_mib: int = DEFAULT_BLOCK_MIB) -> None:
        if num_threads < 1 or block_mib < 1:
            raise ValueError("num_threads and block_mib must be at least 1")
        self.num_threads = num_threads
        self.block = block_mib * 1024 * 1024
        self.flags = sglang_flags.PREFETCH + (
            f" {sglang_flags.PREFETCH_THREADS} {num_threads}" if num_threads != DEFAULT_THREADS else ""
        )
        if block_mib != DEFAULT_BLOCK_MIB:
            self.flags = f"SGLANG_PREFETCH_BLOCK_SIZE_MB={block_mib} " + self.flags

    def share(self, ctx: LoadContext, model: ModelPlan) -> list[ShardPlan]:
        """The files this rank prefetches: its node-local share of the sorted files."""
        local_rank, local_world = local_position(ctx)
        return sorted(model.shards, key=lambda s: s.path)[local_rank::local_world]

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        share = self.share(ctx, model)
        mine = {s.path for s in share}
        trackers = {
            s.path: _Tracker(
                rec.open_shard(Path(s.path).name, nonresident_bytes=nonresident(s.path, s.bytes)),
                users=2 if s.path in mine else 1,
            )
            for s in model.shards
        }
        stop = threading.Event()
        background = threading.Thread(
            target=self._prefetch, args=(share, trackers, rec, stop), name="ckptprof-prefetch", daemon=True
        )
        background.start()
        try:
            self._foreground(ctx, model, trackers, rec)
        finally:
            stop.set()
            background.join()

    def _foreground(
        self, ctx: LoadContext, model: ModelPlan, trackers: dict[str, _Tracker], rec: Recorder
    ) -> None:
        """The default mmap path, unchanged, recording onto the shared shard records."""
        mmap_path = SGLang()
        for shard in model.shards:
            tracker = trackers[shard.path]
            error: BaseException | None = None
            try:
                if shard.error is not None:
                    raise UnreadableShard(shard.error)
                with rec.use_shard(tracker.timing):
                    mmap_path._load_shard(ctx, model.role, shard.path, rec)
            except Exception as exc:
                error = exc
            tracker.release(rec, error)

    def _prefetch(
        self, share: list[ShardPlan], trackers: dict[str, _Tracker], rec: Recorder, stop: threading.Event
    ) -> None:
        with ThreadPoolExecutor(max_workers=self.num_threads, thread_name_prefix="ckptprof-prefetch") as pool:
            for shard in share:
                pool.submit(self._read_file, shard, trackers[shard.path], rec, stop)

    def _read_file(self, shard: ShardPlan, tracker: _Tracker, rec: Recorder, stop: threading.Event) -> None:
        """Read one file front to back in blocks, only to bring it into the page cache."""
        try:
            view = memoryview(bytearray(self.block))
            with open(shard.path, "rb", buffering=0) as fh:
                size = os.fstat(fh.fileno()).st_size
                pos = 0
                while pos < size and not stop.is_set():
                    want = min(self.block, size - pos)
                    with rec.read(want, shard=tracker.timing):
                        n = fh.readinto(view[:want])
                    if not n:
                        break
                    pos += n
        except OSError:
            pass  # a failed warm-up read costs the foreground its cache hits, not its correctness
        finally:
            tracker.release(rec)

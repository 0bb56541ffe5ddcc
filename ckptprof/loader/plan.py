"""What to replay: the models (target, then draft), their shard files in SGLang's order, TP size, devices."""

from __future__ import annotations

import re
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ckptprof.checkpoint import fs, pickled
from ckptprof.checkpoint.discovery import ORDERS, discover, order_files
from ckptprof.checkpoint.header import read_header
from ckptprof.devices import parse_devices
from ckptprof.errors import CheckpointError, UsageError
from ckptprof.loader.options import ReplayOptions, resolve
from ckptprof.session_config import RunConfig

CACHE_MODES = ("cold", "warm", "as-is")


class UnreadableShard(ValueError):
    """A shard the plan found unusable (its header failed validation): the message is the validator's, the same
    words ``inspect`` prints for that file."""


@dataclass
class ShardPlan:
    path: str
    bytes: int
    # name -> (safetensors dtype, shape); None when the header could not be read (the shard is then failed).
    tensors: dict[str, tuple[str, tuple[int, ...]]] | None
    error: str | None = None
    # st_mtime_ns when the plan was made (None: unknown): with the size, how a failed shard is told apart from a
    # file rewritten under the run
    mtime_ns: int | None = None

    @property
    def name(self) -> str:
        return Path(self.path).name


@dataclass
class ModelPlan:
    role: str  # target | draft
    path: str
    fs_type: str
    shards: list[ShardPlan]
    num_experts: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def files(self) -> list[Path]:
        """The shard files that can be read (cache preparation and probes skip missing or corrupt ones)."""
        return [Path(s.path) for s in self.shards if s.tensors is not None]


@dataclass
class ReplayPlan:
    models: list[ModelPlan]
    tp: int = 1
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    cache: str = "warm"
    order: str = "sorted"
    strategy: str = "sglang"
    faithful: bool = False
    expert_parallel: bool = False
    # Keyword arguments of the strategy's constructor, e.g. {"num_threads": 16} for sglang-mt.
    strategy_params: dict[str, Any] = field(default_factory=dict)
    verify: bool = False  # each rank also returns a digest of every parameter after the load
    # The draft's own path (SGLang's --speculative-draft-load-format); None: the draft loads like the target.
    draft_strategy: str | None = None
    draft_strategy_params: dict[str, Any] = field(default_factory=dict)
    # The faithful pass drives SGLang's own iterator functions (sglang importable here) instead of the replica.
    faithful_own: bool = False
    # No rank reporting anything for this long is a hang (None: no limit).
    rank_timeout_s: float | None = None
    # Unique per plan: names rendezvous that the ranks of one replay share (e.g. fastsafetensors' process group).
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def strategy_for(self, role: str) -> tuple[str, dict[str, Any]]:
        """The strategy (name, parameters) that loads the model of this role."""
        if role == "draft" and self.draft_strategy is not None:
            return self.draft_strategy, dict(self.draft_strategy_params)
        return self.strategy, dict(self.strategy_params)

    def rank_device(self, rank: int) -> str:
        """Ranks map to devices round-robin; more ranks than devices share them."""
        return self.devices[rank % len(self.devices)]

    def config(self) -> RunConfig:
        """The session's ``config``: what this plan replays (the run adds how, e.g. the launcher and flags)."""
        draft = self.draft_strategy is not None
        return RunConfig(
            tp=self.tp,
            devices=list(self.devices),
            rank_devices=[self.rank_device(r) for r in range(self.tp)],
            ranks_share_devices=self.tp > len(self.devices),
            cache=self.cache,
            order=self.order,
            strategy=self.strategy,
            strategy_params=dict(self.strategy_params),
            verify=self.verify,
            faithful=self.faithful,
            expert_parallel=self.expert_parallel,
            draft_strategy=self.draft_strategy,
            draft_strategy_params=dict(self.draft_strategy_params) if draft else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReplayPlan:
        models = []
        for m in d["models"]:
            shards = [
                ShardPlan(
                    path=s["path"],
                    bytes=s["bytes"],
                    tensors=None
                    if s["tensors"] is None
                    else {k: (v[0], tuple(v[1])) for k, v in s["tensors"].items()},
                    error=s.get("error"),
                    mtime_ns=s.get("mtime_ns"),
                )
                for s in m["shards"]
            ]
            models.append(ModelPlan(**{**m, "shards": shards}))
        return cls(**{**d, "models": models})


def plan_model(role: str, path: str | Path, order: str = "sorted", allow_pickle: bool = False) -> ModelPlan:
    """Discover the shards and read their headers (headers only). A bad shard is kept, with its error."""
    if order not in ORDERS:
        raise UsageError(f"--order {order!r}: choose one of {', '.join(ORDERS)}")
    ckpt = discover(path, order=order)
    if ckpt.format != "safetensors" and not allow_pickle:
        raise CheckpointError(
            ckpt.path,
            f"holds only .{ckpt.format} (pickle) weight files, which ckptprof never unpickles by default; pass "
            "--allow-pickle to load them with torch.load(weights_only=True)",
        )
    shards = []
    for f in ckpt.files:
        try:
            if ckpt.format == "safetensors":
                header = read_header(f)
                tensors = {name: (t.dtype, t.shape) for name, t in header.tensors.items()}
            else:
                tensors = pickled.tensor_specs(f)
        except CheckpointError as exc:
            shards.append(ShardPlan(path=str(f), bytes=_size(f), tensors=None, error=exc.problem))
            continue
        shards.append(ShardPlan(path=str(f), bytes=_size(f), tensors=tensors, mtime_ns=_mtime_ns(f)))
    # A file discovery matched but could not use (unreadable, a directory or a FIFO named *.safetensors, a link
    # loop) is a failed shard, named, as `inspect` names it: never silently dropped.
    for problem in ckpt.problems:
        file, _, reason = problem.partition(": ")
        shards.append(ShardPlan(path=file, bytes=0, tensors=None, error=reason or problem))
    # A shard the index names but the directory lacks is a failed shard: the server would fail on it too.
    for name in ckpt.missing_from_disk:
        missing = ckpt.path / name
        shards.append(ShardPlan(path=str(missing), bytes=0, tensors=None, error=ckpt.missing_reason()))
    by_path = {s.path: s for s in shards}
    shards = [by_path[str(p)] for p in order_files([Path(s.path) for s in shards], order)]
    if all(s.tensors is None for s in shards):
        first = shards[0]
        raise CheckpointError(first.path, f"{first.error} (and no readable shard in {ckpt.path})")
    experts = _count_experts(shards)
    return ModelPlan(
        role=role, path=str(ckpt.path), fs_type=fs.fs_type(ckpt.path), shards=shards, num_experts=experts
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _count_experts(shards: list[ShardPlan]) -> int:
    ids = set()
    for s in shards:
        for name in s.tensors or {}:
            match = re.search(r"\.experts\.(\d+)\.", name)
            if match:
                ids.add(int(match.group(1)))
    return max(ids) + 1 if ids else 0


def build_plan(
    target: str | Path,
    draft: str | Path | None = None,
    options: ReplayOptions | None = None,
    **overrides: Any,
) -> ReplayPlan:
    """The plan of one replay: the models' shards (headers read), the ranks' devices, the strategies. ``options``
    (or the defaults) with any ``ReplayOptions`` field given as a keyword (``tp=8``) in its place."""
    o = resolve(options, overrides)
    if o.tp < 1:
        raise UsageError("--tp must be at least 1")
    if o.cache not in CACHE_MODES:
        raise UsageError(f"--cache {o.cache!r}: choose one of {', '.join(CACHE_MODES)}")
    device_list = parse_devices(o.devices) if isinstance(o.devices, str) else list(o.devices)
    models = [plan_model("target", target, o.order, o.allow_pickle)]
    if draft is not None:
        models.append(plan_model("draft", draft, o.order, o.allow_pickle))
    return ReplayPlan(
        models=models,
        tp=o.tp,
        devices=device_list,
        cache=o.cache,
        order=o.order,
        strategy=o.strategy,
        faithful=o.faithful or o.faithful_rounds > 1,
        expert_parallel=o.expert_parallel,
        strategy_params=dict(o.strategy_params),
        verify=o.verify,
        draft_strategy=o.draft_strategy if draft is not None else None,
        draft_strategy_params=dict(o.draft_strategy_params),
        rank_timeout_s=o.hang_timeout_s(),
    )

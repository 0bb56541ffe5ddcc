"""vLLM's weight loading, per release line, read from each release's own wheel (`pip download --no-deps vllm==X`:
`vllm/model_executor/model_loader/default_loader.py` and `weight_utils.py`, `vllm/config/load.py`,
`vllm/engine/arg_utils.py`). Releases read: 0.10.2, 0.11.0, 0.12.0, 0.15.0, 0.17.0, 0.18.0, 0.19.0, 0.20.0, 0.22.0,
0.24.0, 0.26.0, 0.33.0, 0.34.0; a release in between loads like the last one read before it.

What every line shares: the default path (``safetensors_weights_iterator``) opens each file with ``safe_open``
and takes ``get_tensor`` of every key (mmap views; the pages fault in as the model's weight loaders copy them);
``--safetensors-load-strategy eager`` reads each file whole and deserialises it from memory (bar
``Loading safetensors checkpoint shards (eager)``); ``--model-loader-extra-config '{"enable_multithread_load":
true}'`` submits every file at once to ``num_threads`` (default 8) threads that each ``load_file`` one, consumed
as they complete. What changes:

- 0.10.2 - 0.16: files in the directory's glob order; strategies ``lazy`` (the default) and ``eager``.
- 0.17: files in natural order (``model-2`` before ``model-10``).
- 0.18: ``--safetensors-load-strategy prefetch``: every rank reads its share of the files, ``files[rank::world]``
  over the global ranks, front to back in 16 MiB blocks on 8 background threads, while its own loop runs the
  default path.
- 0.19: with the strategy left unset, vLLM prefetches on its own when the checkpoint is on NFS (``nfs``, ``nfs4``)
  and fits in 90% of the available RAM.
- 0.20 - 0.21: the same rule also for Lustre; vLLM logs ``Filesystem type for checkpoints: X. Checkpoint size: ...
  Available RAM: ...`` and says why it does or does not prefetch.
- 0.22 and later: ``--safetensors-prefetch-num-threads`` and ``--safetensors-prefetch-block-size``; from 0.33 the
  available RAM is capped by the cgroup's free memory (0.26 - 0.32: on ROCm only), and the load strategies include
  ``torchao``.
- 0.34: ``--shuffle-safetensors-files`` (off by default): each rank's loop takes the files in natural order shuffled
  by ``random.Random(global rank)``, in the single-thread iterator (after its prefetcher took its share of the natural
  order) and in the multithread one (the order files go to the pool); it logs ``Shuffled N safetensors files with
  seed R``. The weight loaders' copy becomes ``copy_weight_``, a plain ``copy_`` except on integrated GPUs (where it
  first touches a byte of each page on the CPU).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ckptprof.engines.versions import line_for, line_named, parse_version

DEFAULT_NUM_THREADS = 8  # DefaultModelLoader.DEFAULT_NUM_THREADS: the multithread loader's pool
PREFETCH_THREADS = 8
PREFETCH_BLOCK_BYTES = 16 * 1024 * 1024
RAM_SHARE = 0.9  # the checkpoint must fit in this share of the available RAM for the automatic prefetch

LOAD_STRATEGY = "--safetensors-load-strategy"
PREFETCH_THREADS_FLAG = "--safetensors-prefetch-num-threads"
PREFETCH_BLOCK_FLAG = "--safetensors-prefetch-block-size"
LOAD_FORMAT = "--load-format"
EXTRA_CONFIG = "--model-loader-extra-config"
SHUFFLE_FLAG = "--shuffle-safetensors-files"


@dataclass(frozen=True)
class VllmProfile:
    """How one vLLM release line loads a safetensors checkpoint."""

    name: str
    first: str
    natural_order: bool  # files in natural order (else the directory's glob order)
    strategies: tuple[str, ...]  # the values --safetensors-load-strategy accepts
    auto_prefetch_fs: frozenset[str] = field(
        default_factory=frozenset
    )  # file systems it prefetches on unasked
    prefetch_flags: bool = False  # --safetensors-prefetch-num-threads / -block-size exist
    cgroup_ram: bool = False  # available RAM capped by the cgroup's free memory
    shuffle_flag: bool = False  # --shuffle-safetensors-files exists

    def describe(self) -> str:
        auto = (
            f"prefetches on its own on {'/'.join(sorted(self.auto_prefetch_fs))} when the checkpoint fits in "
            f"{RAM_SHARE:.0%} of available RAM"
            if self.auto_prefetch_fs
            else "never prefetches unless asked"
        )
        return f"vLLM {self.name}: one thread by default (mmap views per tensor); {auto}"

    def to_dict(self, why: str, version: str | None) -> dict[str, object]:
        return {
            "engine": "vllm",
            "profile": self.name,
            "version": version,
            "why": why,
            "natural_order": self.natural_order,
            "strategies": list(self.strategies),
            "auto_prefetch_fs": sorted(self.auto_prefetch_fs),
            "prefetch_flags": self.prefetch_flags,
            "cgroup_ram": self.cgroup_ram,
            "shuffle_flag": self.shuffle_flag,
        }


_NET = frozenset({"nfs", "nfs4"})
# Each line is the one before it and what its first release changed (the module's docstring says what).
_LINE_10 = VllmProfile("0.10.2 - 0.16", "0.10.2", natural_order=False, strategies=("lazy", "eager"))
_LINE_17 = replace(_LINE_10, name="0.17", first="0.17.0", natural_order=True)
_LINE_18 = replace(_LINE_17, name="0.18", first="0.18.0", strategies=("lazy", "eager", "prefetch"))
_LINE_19 = replace(_LINE_18, name="0.19", first="0.19.0", auto_prefetch_fs=_NET)
_LINE_20 = replace(_LINE_19, name="0.20 - 0.21", first="0.20.0", auto_prefetch_fs=_NET | {"lustre"})
_LINE_22 = replace(_LINE_20, name="0.22 - 0.32", first="0.22.0", prefetch_flags=True)
# 0.33.0's SafetensorsLoadStrategy also names "torchao" (found by the engine tier against the installed 0.33.0; the
# releases between 0.26 and 0.33 were not read for it). ckptprof has no replay of it.
_LINE_33 = replace(
    _LINE_22,
    name="0.33",
    first="0.33.0",
    cgroup_ram=True,
    strategies=("lazy", "eager", "prefetch", "torchao"),
)
_LINE_34 = replace(_LINE_33, name="0.34 and later", first="0.34.0", shuffle_flag=True)
PROFILES: tuple[VllmProfile, ...] = (
    _LINE_10,
    _LINE_17,
    _LINE_18,
    _LINE_19,
    _LINE_20,
    _LINE_22,
    _LINE_33,
    _LINE_34,
)
NEWEST = PROFILES[-1]


def profile_named(name: str) -> VllmProfile | None:
    return line_named(name, PROFILES)


def profile_for_version(version: str) -> VllmProfile:
    """The line a release belongs to (a release older than the first read is replayed as the oldest line)."""
    return line_for(version, PROFILES)


def choose_profile(
    version: str | None, installed: str | None, logged: str | None = None
) -> tuple[VllmProfile, str, str | None]:
    """(profile, why, version): --vllm-version, else the installed vllm's metadata, else the release the server's
    log names, else the newest line."""
    for given, why in (
        (version, f"--vllm-version {version}"),
        (installed, f"the installed vllm {installed}"),
        (logged, f"the vLLM release the server's log names ({logged})"),
    ):
        if given is not None:
            profile = profile_for_version(given)
            if parse_version(given) < parse_version(PROFILES[0].first):
                why += "; older than any release read, replayed as the oldest line"
            return profile, why, given
    return (
        NEWEST,
        # Read after "profile chosen by": the reason, not the profile again.
        f"default, the newest line read (vllm {NEWEST.first}): no version given, none installed",
        None,
    )


# "vLLM API server version 0.13.0+faa43dbf.nv26.01", "Initializing a V1 LLM engine (v0.19.0) with config: ..."
_LOG_VERSION_RE = re.compile(rb"vLLM API server version (\S{1,64})|LLM engine \(v([^)\s]{1,64})\)")
_LOG_CHUNK = 1 << 20


def version_from_log(path: str) -> str | None:
    """The vLLM release a server's log names (its API server banner or its engine's config line; the last one, as
    the last boot's), or None. Read in bounded chunks, whatever the log's size."""
    found: str | None = None
    tail = b""
    try:
        with open(path, "rb") as src:
            while chunk := src.read(_LOG_CHUNK):
                data = tail + chunk
                for match in _LOG_VERSION_RE.finditer(data):
                    if match.end() <= len(tail):
                        continue  # seen in the previous pass
                    text = (match.group(1) or match.group(2)).decode("ascii", "replace")
                    try:
                        parse_version(text)
                    except ValueError:
                        continue
                    found = text
                tail = data[-256:]  # a banner cut by the chunk's end is found whole in the next pass
    except OSError:
        return None
    return found


# -- the automatic prefetch -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefetchDecision:
    """Whether vLLM prefetches the checkpoint into the page cache before its workers load it, and the line it logs."""

    prefetch: bool
    fs_type: str
    checkpoint_bytes: int
    available_bytes: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "prefetch": self.prefetch,
            "fs_type": self.fs_type,
            "checkpoint_bytes": self.checkpoint_bytes,
            "available_bytes": self.available_bytes,
            "reason": self.reason,
        }


def decide_prefetch(
    profile: VllmProfile, strategy: str | None, fs_type: str, checkpoint_bytes: int, available_bytes: int
) -> PrefetchDecision:
    """What the release does with ``--safetensors-load-strategy strategy`` (None: unset) for a checkpoint of
    ``checkpoint_bytes`` on a file system of type ``fs_type`` (as /proc/mounts names it) with
    ``available_bytes`` of RAM available."""
    fits = checkpoint_bytes <= RAM_SHARE * available_bytes
    net = fs_type in profile.auto_prefetch_fs
    name = fs_type.upper() if fs_type else "unknown"
    size = f"{checkpoint_bytes / 2**30:.2f} GiB checkpoint, {available_bytes / 2**30:.2f} GiB RAM available"
    if strategy == "prefetch":
        note = "" if fits else f"; it does not fit in {RAM_SHARE:.0%} of available RAM (vLLM warns of OOM)"
        return PrefetchDecision(True, fs_type, checkpoint_bytes, available_bytes, f"asked for ({size}){note}")
    if strategy is not None:
        return PrefetchDecision(
            False,
            fs_type,
            checkpoint_bytes,
            available_bytes,
            f"--safetensors-load-strategy {strategy} never prefetches",
        )
    if not profile.auto_prefetch_fs:
        return PrefetchDecision(
            False,
            fs_type,
            checkpoint_bytes,
            available_bytes,
            f"vLLM {profile.name} never prefetches unless asked",
        )
    if net and fits:
        return PrefetchDecision(
            True,
            fs_type,
            checkpoint_bytes,
            available_bytes,
            f"{name} is a network file system and the checkpoint fits ({size})",
        )
    if net:
        why = f"{name} is a network file system but the checkpoint exceeds {RAM_SHARE:.0%} of available RAM ({size})"
    else:
        kinds = "/".join(sorted(fs.upper() for fs in profile.auto_prefetch_fs))
        why = f"the file system ({name}) is not one vLLM prefetches on ({kinds}) ({size})"
    return PrefetchDecision(False, fs_type, checkpoint_bytes, available_bytes, why)


def mount_fs_type(path: str | Path, mounts: str = "/proc/mounts") -> str:
    """The type of the file system serving ``path``: the longest mount point that holds it, as vLLM finds it
    ("" when /proc/mounts cannot be read)."""
    resolved = os.path.realpath(path)
    best_mount, best_type = "", ""
    try:
        with open(mounts, encoding="utf-8", errors="replace") as src:
            for line in src:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mount_point = parts[1].replace("\\040", " ")
                inside = resolved == mount_point or resolved.startswith(os.path.join(mount_point, ""))
                if inside and len(mount_point) > len(best_mount):
                    best_mount, best_type = mount_point, parts[2]
    except OSError:
        return ""
    return best_type


def available_ram_bytes(cgroup: bool) -> int:
    """psutil's available memory; with ``cgroup``, capped by the cgroup's limit minus its usage (cgroup v2)."""
    import psutil

    available = int(psutil.virtual_memory().available)
    if not cgroup:
        return available
    try:
        limit_text = Path("/sys/fs/cgroup/memory.max").read_text(encoding="ascii").strip()
        usage = int(Path("/sys/fs/cgroup/memory.current").read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return available
    if limit_text == "max":
        return available
    return min(available, max(0, int(limit_text) - usage))


# -- flags ----------------------------------------------------------------------------------------------------


def load_strategy(name: str) -> str:
    return f"{LOAD_STRATEGY} {name}"


def prefetch_flags(profile: VllmProfile, num_threads: int, block_bytes: int) -> str:
    """``--safetensors-load-strategy prefetch`` with non-default threads and block size where the release takes them."""
    out = load_strategy("prefetch")
    if profile.prefetch_flags:
        if num_threads != PREFETCH_THREADS:
            out += f" {PREFETCH_THREADS_FLAG} {num_threads}"
        if block_bytes != PREFETCH_BLOCK_BYTES:
            out += f" {PREFETCH_BLOCK_FLAG} {block_bytes}"
    return out


def multithread(num_threads: int) -> str:
    return f'{EXTRA_CONFIG} \'{{"enable_multithread_load": true, "num_threads": {num_threads}}}\''


# -- a run that replays vLLM ----------------------------------------------------------------------------------


def choose_release(version: str | None, log: str | None = None) -> tuple[VllmProfile, dict[str, object]]:
    """The profile to replay and its record for the session (``vllm_release``): --vllm-version, else the installed
    vllm's metadata (never imported), else the release the server's log (``log``) names, else the newest line."""
    from ckptprof.engines.versions import installed_version

    installed = installed_version("vllm") if version is None else None
    logged = version_from_log(log) if log and version is None and installed is None else None
    profile, why, chosen = choose_profile(version, installed, logged)
    record = profile.to_dict(why, chosen)
    record["description"] = profile.describe()
    return profile, record


def checkpoint_decision(
    profile: VllmProfile, files: list[Path], strategy: str | None = None
) -> PrefetchDecision:
    """``decide_prefetch`` for these files on this machine: their file system (vLLM looks at the first file's),
    their total size, the RAM available now."""
    fs_type = mount_fs_type(files[0]) if files else ""
    total = 0
    for f in files:
        try:
            total += f.stat().st_size
        except OSError:
            continue
    return decide_prefetch(profile, strategy, fs_type, total, available_ram_bytes(profile.cgroup_ram))


def default_strategies(decision: PrefetchDecision) -> list[tuple[str, dict[str, object]]]:
    """What ``run --engine vllm`` replays when no --strategy is given: the path vLLM takes here (with the strategy
    unset) first, then the other side of its prefetch rule, so the run measures what the rule costs or saves."""
    lazy: tuple[str, dict[str, object]] = ("vllm", {})
    prefetch: tuple[str, dict[str, object]] = ("vllm-prefetch", {})
    return [prefetch, lazy] if decision.prefetch else [lazy, prefetch]


def prefetch_note(
    profile: VllmProfile, decision: PrefetchDecision, walls: dict[str, float], cache: str
) -> str:
    """One line: whether vLLM prefetches this checkpoint on its own here, why, and (when both paths were replayed
    in a controlled cache mode) what prefetching measured against the lazy path."""
    verb = "would prefetch" if decision.prefetch else "would not prefetch"
    line = f"vLLM {profile.name} {verb} this checkpoint on its own here: {decision.reason}"
    lazy, prefetch = walls.get("vllm"), walls.get("vllm-prefetch")
    if not (lazy and prefetch):
        return line
    if cache not in ("cold", "warm"):
        # With the page cache left as it is, the first replay leaves the files cached for the second.
        return line + "; run with --cache cold to measure what prefetching costs or saves here"
    delta = prefetch - lazy
    effect = "saves" if delta < 0 else "costs"
    return line + (
        f"; measured here ({cache} cache), prefetching {effect} {abs(delta):.2f} s ({100 * abs(delta) / lazy:.0f}% "
        f"of the lazy path's {lazy:.2f} s; {load_strategy('prefetch')} {prefetch:.2f} s)"
    )

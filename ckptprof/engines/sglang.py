"""SGLang's weight loading, per release line, read from each release's own wheel (`pip download --no-deps
sglang==X`, `sglang/srt/model_loader/loader.py` and `weight_utils.py`, `server_args.py`).

A line is a run of releases that load the same way. What changes between them:

- 0.4.x: one thread, `safetensors.torch.load_file` per shard (every tensor's mmap view taken before the first is
  used); no multithread option, no `--weight-loader-*` flags; files in glob order.
- 0.5.1 - 0.5.9: one thread by default, `safe_open` + `get_tensor` per key; bar `Loading safetensors checkpoint
  shards`. `--model-loader-extra-config '{"enable_multithread_load": true}'` opts in: every file submitted at once
  and consumed as they complete up to 0.5.8, a window of num_threads + 1 files in order from 0.5.9.
- 0.5.10 - 0.5.15: multithread on by default (8 threads, the window), bar `Multi-thread loading shards`;
  `--weight-loader-prefetch-checkpoints` from 0.5.11 runs beside it; files sorted from 0.5.13 (two profiles).
- 0.5.16 on: the same, but checkpoint prefetching turns multithread off unless the extra config names
  `enable_multithread_load` or `num_threads`; `--load-format instanttensor` by 0.5.23.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ckptprof.engines import flags
from ckptprof.engines.versions import line_for, line_named

SINGLE_BAR = "Loading safetensors checkpoint shards"
MULTI_BAR = "Multi-thread loading shards"
MT_DEFAULT_THREADS = 8

_BASE_FORMATS = (
    "auto",
    "pt",
    "safetensors",
    "npcache",
    "dummy",
    "sharded_state",
    "gguf",
    "bitsandbytes",
    "layered",
)


@dataclass(frozen=True)
class LoaderProfile:
    """How one SGLang release line loads a safetensors checkpoint."""

    name: str  # the releases it covers, "0.5.16 and later"
    first: str  # its first release
    default_strategy: str  # the replay strategy that is this line's default path
    default_params: tuple[tuple[str, int], ...]
    bar: str  # the default path's progress bar
    multithread_default: bool
    # What `enable_multithread_load: true` gives on this line (None: no such option).
    multithread_strategy: str | None
    prefetch: Literal["none", "beside-multithread", "single-thread"]
    sorted_files: bool
    flags: frozenset[str] = field(default_factory=frozenset)  # the loading flags this line accepts
    load_formats: tuple[str, ...] = _BASE_FORMATS

    def describe(self) -> str:
        if self.multithread_default:
            how = f"multithread loader by default ({MT_DEFAULT_THREADS} threads, a window of {MT_DEFAULT_THREADS + 1} files)"
        else:
            how = "one thread by default (mmap views per tensor)"
        if self.prefetch == "single-thread":
            how += "; checkpoint prefetching turns multithread off unless the extra config sets it"
        return f"SGLang {self.name}: {how}"

    def to_dict(self, why: str, version: str | None) -> dict[str, object]:
        return {
            "profile": self.name,
            "version": version,
            "why": why,
            "default_strategy": self.default_strategy,
            "default_params": dict(self.default_params),
            "multithread_default": self.multithread_default,
            "multithread_strategy": self.multithread_strategy,
            "prefetch": self.prefetch,
            "sorted_files": self.sorted_files,
            "flags": sorted(self.flags),
            "load_formats": list(self.load_formats),
            "description": self.describe(),
        }


_MT = flags.EXTRA_CONFIG
_NO_MMAP = flags.DISABLE_MMAP
_PREFETCH = flags.PREFETCH
_PREFETCH_THREADS = flags.PREFETCH_THREADS
_DROP_CACHE = flags.DROP_CACHE
_DRAFT_FORMAT = flags.DRAFT_LOAD_FORMAT
_RECENT_FORMATS = (
    *_BASE_FORMATS,
    "mistral",
    "flash_rl",
    "remote",
    "remote_instance",
    "fastsafetensors",
    "private",
    "runai_streamer",
)

PROFILES: tuple[LoaderProfile, ...] = (
    LoaderProfile(
        name="0.4.x",
        first="0.4.0",
        default_strategy="sglang",
        default_params=(),
        bar=SINGLE_BAR,
        multithread_default=False,
        multithread_strategy=None,
        prefetch="none",
        sorted_files=False,
        flags=frozenset({flags.LOAD_FORMAT}),
    ),
    LoaderProfile(
        name="0.5.1 - 0.5.8",
        first="0.5.1",
        default_strategy="sglang",
        default_params=(),
        bar=SINGLE_BAR,
        multithread_default=False,
        multithread_strategy="sglang-mt-completed",
        prefetch="none",
        sorted_files=False,
        flags=frozenset({flags.LOAD_FORMAT, _MT, _NO_MMAP, _DRAFT_FORMAT}),
        load_formats=(*_BASE_FORMATS, "mistral", "remote", "remote_instance"),
    ),
    LoaderProfile(
        name="0.5.9",
        first="0.5.9",
        default_strategy="sglang",
        default_params=(),
        bar=SINGLE_BAR,
        multithread_default=False,
        multithread_strategy="sglang-mt",
        prefetch="none",
        sorted_files=False,
        flags=frozenset({flags.LOAD_FORMAT, _MT, _NO_MMAP, _DRAFT_FORMAT}),
        load_formats=_RECENT_FORMATS,
    ),
    LoaderProfile(
        name="0.5.10 - 0.5.12",
        first="0.5.10",
        default_strategy="sglang-mt",
        default_params=(("num_threads", MT_DEFAULT_THREADS),),
        bar=MULTI_BAR,
        multithread_default=True,
        multithread_strategy="sglang-mt",
        prefetch="beside-multithread",
        sorted_files=False,
        flags=frozenset(
            {flags.LOAD_FORMAT, _MT, _NO_MMAP, _DRAFT_FORMAT, _PREFETCH, _PREFETCH_THREADS, _DROP_CACHE}
        ),
        load_formats=_RECENT_FORMATS,
    ),
    LoaderProfile(
        name="0.5.13 - 0.5.15",
        first="0.5.13",
        default_strategy="sglang-mt",
        default_params=(("num_threads", MT_DEFAULT_THREADS),),
        bar=MULTI_BAR,
        multithread_default=True,
        multithread_strategy="sglang-mt",
        prefetch="beside-multithread",
        sorted_files=True,  # SGLANG_SORT_WEIGHT_FILES defaults to 0: sorted
        flags=frozenset(
            {flags.LOAD_FORMAT, _MT, _NO_MMAP, _DRAFT_FORMAT, _PREFETCH, _PREFETCH_THREADS, _DROP_CACHE}
        ),
        load_formats=_RECENT_FORMATS,
    ),
    LoaderProfile(
        name="0.5.16 and later",
        first="0.5.16",
        default_strategy="sglang-mt",
        default_params=(("num_threads", MT_DEFAULT_THREADS),),
        bar=MULTI_BAR,
        multithread_default=True,
        multithread_strategy="sglang-mt",
        prefetch="single-thread",
        sorted_files=True,
        flags=frozenset(
            {flags.LOAD_FORMAT, _MT, _NO_MMAP, _DRAFT_FORMAT, _PREFETCH, _PREFETCH_THREADS, _DROP_CACHE}
        ),
        load_formats=(*_RECENT_FORMATS, "instanttensor", "presharded", "expert_pack"),
    ),
)
NEWEST = PROFILES[-1]
# The releases these profiles were read from; a newer release is taken to load as the newest line does.
NEWEST_READ = "0.5.23"


def profile_named(name: str) -> LoaderProfile | None:
    return line_named(name, PROFILES)


def profile_for_version(version: str) -> LoaderProfile:
    """The line a release belongs to (ValueError for a text that is not a release number)."""
    return line_for(version, PROFILES)


def profile_for_loader(loader: str | None) -> LoaderProfile | None:
    """The line a server's boot log points to by the bar its default loader drew (bootlog's ``loader``)."""
    if loader == "multithread":
        return NEWEST
    if loader == "default":
        return next(profile for profile in reversed(PROFILES) if not profile.multithread_default)
    return None


def choose_profile(
    version: str | None = None, installed: str | None = None, log_loader: str | None = None
) -> tuple[LoaderProfile, str, str | None]:
    """(profile, why, version): from --sglang-version, else the installed distribution, else the server's log,
    else the newest line."""
    if version is not None:
        return profile_for_version(version), f"--sglang-version {version}", version
    if installed is not None:
        try:
            return profile_for_version(installed), f"the installed sglang {installed}", installed
        except ValueError:
            pass  # a local build's odd version string: fall through to the other sources
    by_log = profile_for_loader(log_loader)
    if by_log is not None:
        bar = MULTI_BAR if log_loader == "multithread" else SINGLE_BAR
        return by_log, f"the server log's bar `{bar}`", None
    return (
        NEWEST,
        # Read after "profile chosen by": the reason, not the profile again.
        f"default, the newest line read (sglang {NEWEST_READ}): no version given, none installed",
        None,
    )


def multithread_extra_config(profile: LoaderProfile, num_threads: int) -> str:
    """The extra-config flag that runs the multithread loader with ``num_threads`` on this line."""
    return flags.multithread(num_threads, opt_in=not profile.multithread_default)

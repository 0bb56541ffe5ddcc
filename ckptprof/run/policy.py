"""The run's policy: from what the user asked (a ``RunRequest``) to what will be replayed (a ``RunConfig``).

Which engine (a vLLM server's log means vLLM's loading), which release profile (the flag, else the installed
package's metadata, else the bar the server's log shows, else the newest), which loading path (the flag, else the
load format the server's log shows, else the release's default), the draft's own format, the release's file order.
Everything here is decided before anything slow starts, so a typo fails at once; the CLI and the Python API call
the same function and so cannot disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ckptprof.errors import UsageError
from ckptprof.loader import launch
from ckptprof.loader.launch import Launch
from ckptprof.loader.options import COLD_THEN_WARM
from ckptprof.results import ServerLog
from ckptprof.run.request import RunRequest, spec_text

Printer = Callable[[str], None]
Spec = tuple[str, dict[str, object]]

# `--strategy peers`: the other loaders, each the way its own documentation recommends, beside ckptprof's pipelined
# reader (InstantTensor twice: its default direct I/O, and the buffered policy that reads through the page cache).
PEERS = (
    "pipelined",
    "safetensors-pread",
    "fastsafetensors",
    "runai-streamer",
    "instanttensor",
    "instanttensor:backend=BUFFERED",
)

# Strategies SGLang can give the draft alone: load formats (--speculative-draft-load-format). The other paths are
# server-wide flags that the draft shares with the target.
DRAFT_FORMATS = ("runai-streamer", "instanttensor", "fastsafetensors")

# The bar a server's log shows for a load format -> the strategy that replays it.
LOGGED_FORMATS = {
    "runai_streamer": "runai-streamer",
    "instanttensor": "instanttensor",
    "fastsafetensors": "fastsafetensors",
}


@dataclass(frozen=True)
class RunConfig:
    """A request with every choice made: what ``ckptprof.run.execute`` replays."""

    request: RunRequest
    engine: str
    """``sglang`` or ``vllm``: whose loading is replayed."""

    release: dict[str, object]
    """The release profile (``ckptprof.engines``), with why it was chosen; saved in the session's config."""

    strategies: list[Spec]
    """The loading paths to replay in turn (``--verify``'s reference, sglang, first)."""

    draft_spec: Spec | None
    server_log: ServerLog | None
    order: str
    engine_from_log: bool = False
    """The engine was chosen because the server's log is a vLLM server's (the CLI says so)."""

    joined: Launch | None = None
    """This process's place in a torchrun launch; None when the run spawns its own ranks."""

    from_log: tuple[tuple[str, str], ...] = ()
    """What the server's log chose instead of the default, as (what, the flag that chooses otherwise): the engine,
    the release profile, the target's and the draft's paths. The CLI says so on the run's first line."""

    @property
    def is_rank0(self) -> bool:
        """Whether this process owns the session (spawned ranks, or torchrun's rank 0): it probes and writes."""
        return self.joined is None or self.joined.is_main

    def with_request(self, **fields: object) -> RunConfig:
        """The same choices with request fields that decide nothing (where py-spy's profiles go) replaced."""
        return dataclasses.replace(self, request=self.request.with_fields(**fields))


def parse_strategies(text: str, verify: bool) -> list[Spec]:
    """'sglang,sglang-mt:num_threads=16' -> [(name, params), ...]; with --verify sglang comes first as reference."""
    from ckptprof.loader.strategies import AVAILABLE, parse_spec

    if text.strip() == "all":
        items = list(AVAILABLE)
    elif text.strip() == "peers":
        items = list(PEERS)
    else:
        items = [t for t in text.split(",") if t.strip()]
    specs: list[Spec] = []
    for item in items:
        try:
            specs.append(parse_spec(item))
        except (ValueError, TypeError) as exc:
            # The strategy's own checks ("block_mib ... must be at least 1") do not say which item they refused.
            named = str(exc).startswith(("strategy ", "unknown strategy "))
            raise UsageError(f"--strategy{'' if named else f' {item.strip()!r}'}: {exc}") from None
    if not specs:
        raise UsageError("--strategy: name at least one strategy")
    if verify:
        specs = [s for s in specs if s != ("sglang", {})]
        specs.insert(0, ("sglang", {}))
    return specs


def parse_draft_strategy(text: str | None, draft: str | Path | None, default_spec: str) -> Spec | None:
    """--draft-strategy: a load format, or 'auto' for the release's default path; None when not given."""
    if text is None:
        return None
    if draft is None:
        raise UsageError("--draft-strategy: there is no draft (give it with --draft DIR)")
    from ckptprof.loader.strategies import parse_spec

    spec = default_spec if text.strip() == "auto" else text
    try:
        name, params = parse_spec(spec)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--draft-strategy: {exc}") from None
    if text.strip() != "auto" and name not in DRAFT_FORMATS:
        raise UsageError(
            f"--draft-strategy {name}: SGLang sets only the draft's load format on its own "
            f"(--speculative-draft-load-format): {', '.join(DRAFT_FORMATS)} or auto"
        )
    return name, params


def logged_load_formats(server_log: ServerLog | None, has_draft: bool) -> tuple[str | None, str | None]:
    """(the target's strategy, the draft's --draft-strategy) that the server's log shows, or None for each the
    log does not settle: its load-weights bars name the loader of each model."""
    if server_log is None:
        return None, None
    loaders = server_log.loaders
    target = LOGGED_FORMATS.get(str(loaders.get("target")))
    draft_loader = loaders.get("draft")
    if not has_draft or draft_loader is None or draft_loader == loaders.get("target"):
        return target, None
    # The draft's bar differs from the target's: --speculative-draft-load-format was set on the server.
    return target, LOGGED_FORMATS.get(str(draft_loader), "auto")


def read_server_log(path: str) -> ServerLog:
    """The server's own load-weights phases, read before the replay so a bad path fails fast."""
    from ckptprof.bootlog import LogInputError, analyze_path

    try:
        report = analyze_path(path)
    except LogInputError as exc:
        raise UsageError(f"--log: {exc}") from None
    return ServerLog(
        path=path,
        framework=report.framework,
        state=report.state,
        load_weights=tuple(p for p in report.phases if p.name == "load-weights"),
        loader=report.loader,
        loaders=dict(report.loaders),
    )


def choose_release(version: str | None, server_log: ServerLog | None) -> dict[str, object]:
    """The SGLang release profile to replay: --sglang-version, else the installed sglang's metadata (never
    imported), else the bar the server's log shows, else the newest profile."""
    from ckptprof.engines.sglang import choose_profile
    from ckptprof.engines.versions import installed_version

    loader = server_log.loader if server_log is not None else None
    try:
        profile, why, chosen = choose_profile(
            version=version,
            installed=installed_version("sglang") if version is None else None,
            log_loader=loader if isinstance(loader, str) else None,
        )
    except ValueError as exc:
        raise UsageError(f"--sglang-version: {exc}") from None
    return profile.to_dict(why, chosen)


def choose_vllm_release(version: str | None, log: str | None) -> dict[str, object]:
    """The vLLM release profile to replay (--vllm-version, else the installed vllm, else the release the server's
    --log names, else the newest)."""
    from ckptprof.engines import vllm

    try:
        return vllm.choose_release(version, log)[1]
    except ValueError as exc:
        raise UsageError(f"--vllm-version: {exc}") from None


def release_order(release: dict[str, object]) -> str:
    """The file order the release loads in: SGLang's sorted or glob order, vLLM's natural or glob order."""
    if release.get("engine") == "vllm":
        return "natural" if release.get("natural_order") else "glob"
    return "sorted" if release.get("sorted_files") else "glob"


def default_strategy_spec(release: dict[str, object]) -> str:
    """'sglang-mt:num_threads=8' for a release whose default is the multithread loader."""
    params = release.get("default_params") or {}
    assert isinstance(params, dict)
    return spec_text(str(release["default_strategy"]), params)


def resolve(request: RunRequest) -> RunConfig:
    """Every choice of the run, from the request alone (the server's log is read here: a bad path fails first)."""
    request.check()
    joined = launch.from_environment()
    if joined is None:
        # Spawned ranks: refuse a count this machine cannot hold before the first one starts (a torchrun launch
        # has already started its processes).
        from ckptprof.run.capacity import check_spawn

        check_spawn(request.tp, request.devices)
    if request.check_predictions and joined is not None:
        # Only rank 0 holds the verdict whose flags are replayed: the other ranks could not follow.
        raise UsageError("--check-predictions runs with spawned ranks (--tp N), not under torchrun")
    if request.cache == COLD_THEN_WARM and joined is not None:
        # The warm pass is held against rank 0's cold one; a torchrun launch's ranks drop and warm per node.
        raise UsageError(f"--cache {COLD_THEN_WARM} runs with spawned ranks (--tp N), not under torchrun")
    server_log = read_server_log(request.server_log) if request.server_log else None
    engine = request.engine
    engine_from_log = False
    if engine is None:
        # A vLLM server's log (or a vLLM release asked for) means vLLM's loading, unless the request says otherwise.
        engine_from_log = server_log is not None and server_log.framework == "vllm"
        engine = "vllm" if engine_from_log or request.vllm_version else "sglang"
    if engine == "vllm":
        if request.sglang_version:
            raise UsageError("--sglang-version goes with --engine sglang")
        release = choose_vllm_release(request.vllm_version, request.server_log)
        release_from_log = request.server_log is not None and release != choose_vllm_release(
            request.vllm_version, None
        )
        default_spec = "vllm"
    else:
        release = choose_release(request.sglang_version, server_log)
        release_from_log = server_log is not None and release != choose_release(request.sglang_version, None)
        # A pickle checkpoint (--allow-pickle) has one replayed path, `sglang`'s torch.load; the release's
        # default multithread path reads safetensors only.
        default_spec = "sglang" if request.allow_pickle else default_strategy_spec(release)
    # The server's own load format, when its log shows one (a bar of runai_streamer, instanttensor, ...), is the
    # path to replay unless the request names one.
    logged_target, logged_draft = logged_load_formats(server_log, request.draft is not None)
    if server_log is not None and logged_target and not request.strategy:
        server_log = dataclasses.replace(server_log, strategy_from_log=logged_target)
    if server_log is not None and logged_draft and not request.draft_strategy:
        server_log = dataclasses.replace(server_log, draft_strategy_from_log=logged_draft)
    strategies = parse_strategies(request.strategy or logged_target or default_spec, request.verify)
    from_log: list[tuple[str, str]] = []
    if engine_from_log:
        from_log.append(("vLLM's loading", "--engine"))
    if release_from_log:
        name, flag = ("vLLM", "--vllm-version") if engine == "vllm" else ("SGLang", "--sglang-version")
        from_log.append((f"{name} profile {release.get('profile')} ({release.get('why')})", flag))
    if not request.strategy and (logged_target or (release_from_log and engine == "sglang")):
        # The load format the log shows, or the default path of the release it shows (vLLM's paths are chosen
        # later, by its prefetch rule on this checkpoint).
        from_log.append((f"strategy {spec_text(*strategies[-1])}", "--strategy"))
    if logged_draft and not request.draft_strategy:
        from_log.append((f"draft strategy {logged_draft}", "--draft-strategy"))
    return RunConfig(
        request=request,
        engine=engine,
        release=release,
        strategies=strategies,
        draft_spec=parse_draft_strategy(request.draft_strategy or logged_draft, request.draft, default_spec),
        server_log=server_log,
        order=request.order or release_order(release),
        engine_from_log=engine_from_log,
        joined=joined,
        from_log=tuple(from_log),
    )

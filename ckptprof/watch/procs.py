"""Which processes of a running server load the weights: its rank processes, found among the launcher's
descendants by the titles the engines give them, never guessed.

SGLang's launcher (the tokenizer manager) starts one scheduler process per TP rank, titled
``sglang::scheduler_TP0`` (``_DP1_TP0``, ``_PP0_TP1``, ``_TP0_EP0`` with other parallelisms), plus
``sglang::detokenizer`` (and ``sglang::data_parallel_controller`` with data parallelism); the draft model of
speculative decoding loads inside each scheduler. vLLM's API server starts ``VLLM::EngineCore`` (older releases:
``EngineCore_0`` / ``EngineCore_DP0``), which at TP > 1 starts one worker per rank (``VLLM::Worker_TP0``,
``VllmWorker-0``, ``VllmWorker rank=0``); at TP 1 the engine core loads the weights itself. ``ckptprof run``
spawns one process per rank and names it ``ckptprof:TP3`` (loader/ranks.py); the draft loads in the same process.

A title set with setproctitle shows in ``/proc/PID/cmdline``; ``/proc/PID/comm`` holds its first 15 bytes. Both
are read; the rank number comes from the full one. A title counts where an argument starts with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import psutil

from ckptprof.errors import CkptprofError

_SGLANG_SCHEDULER = re.compile(r"sglang::scheduler((?:_[A-Z]{2}\d+)*)")
_SGLANG_OTHER = re.compile(r"sglang::(detokenizer|data_parallel_controller|tokenizer\w*)")
_VLLM_WORKER = re.compile(
    r"(?:VLLM::|\b)(?:Worker((?:_[A-Z]{2}\d+)+)|VllmWorker(?:Process)?(?:[-_ ](?:rank=)?(\d+))?)"
)
_VLLM_ENGINE = re.compile(r"(?:VLLM::EngineCore(?:_DP(\d+))?|\bEngineCore_(?:DP)?(\d+))")
_VLLM_OTHER = re.compile(r"VLLM::(APIServer\w*)")
_CKPTPROF_RANK = re.compile(r"ckptprof:TP(\d+)")
_PARTS = re.compile(r"_([A-Z]{2})(\d+)")


class WatchTargetError(CkptprofError):
    """The pid is gone, or is not a server watch can follow; one line saying which (exit 2)."""


@dataclass(frozen=True)
class Role:
    """What one process of a server is."""

    engine: str  # sglang | vllm | ckptprof
    kind: str  # rank (loads weights) | engine-core | helper
    title: str  # the title it was recognised by ("sglang::scheduler_TP0")
    tp_rank: int | None = None
    parts: tuple[tuple[str, int], ...] = ()  # ("DP", 1), ("TP", 3), ...

    @property
    def label(self) -> str:
        """'TP0', 'DP1 TP3': how the engine's own log tags the rank."""
        if self.parts:
            return " ".join(f"{k}{v}" for k, v in self.parts)
        return self.title


def _parts(suffix: str) -> tuple[tuple[str, int], ...]:
    return tuple((k, int(v)) for k, v in _PARTS.findall(suffix))


def _find(pattern: re.Pattern[str], texts: Sequence[str]) -> re.Match[str] | None:
    """The first argument (or the name) that starts with the pattern: a title is a whole argument, and a shell's
    or a launcher's argument that merely mentions one (``bash -c '... sglang::scheduler_TP0 ...'``) is not one."""
    for text in texts:
        m = pattern.match(text.strip())
        if m:
            return m
    return None


def classify_process(name: str, cmdline: Sequence[str]) -> Role | None:
    """The role of a process from its comm name and its command line; None when it is no known server process."""
    texts = [*cmdline, name]
    m = _find(_CKPTPROF_RANK, texts)
    if m:
        tp = int(m.group(1))
        return Role("ckptprof", "rank", m.group(0), tp, (("TP", tp),))
    m = _find(_SGLANG_SCHEDULER, texts)
    if m:
        parts = _parts(m.group(1))
        tp = dict(parts).get("TP", 0)
        return Role("sglang", "rank", m.group(0), tp, parts or (("TP", tp),))
    m = _find(_SGLANG_OTHER, texts)
    if m:
        return Role("sglang", "helper", m.group(0))
    m = _find(_VLLM_WORKER, texts)
    if m:
        parts = _parts(m.group(1) or "")
        if not parts and m.group(2) is not None:
            parts = (("TP", int(m.group(2))),)
        return Role("vllm", "rank", m.group(0).strip(), dict(parts).get("TP"), parts)
    m = _find(_VLLM_ENGINE, texts)
    if m:
        dp = m.group(1) or m.group(2)
        return Role("vllm", "engine-core", m.group(0), None, (("DP", int(dp)),) if dp else ())
    m = _find(_VLLM_OTHER, texts)
    if m:
        return Role("vllm", "helper", m.group(0))
    return None


def launcher_engine(cmdline: Sequence[str]) -> str | None:
    """The engine a launcher's command line starts (``python -m sglang.launch_server``, ``vllm serve``), or None."""
    text = " ".join(cmdline)
    if re.search(r"\bsglang[./]launch_server\b|\bsglang\s+serve\b|sglang\.srt\.", text):
        return "sglang"
    if re.search(r"\bvllm\s+serve\b|vllm[./]entrypoints|/vllm\s+serve\b", text):
        return "vllm"
    if re.search(r"\bckptprof\s+run\b", text):
        return "ckptprof"
    return None


@dataclass(frozen=True)
class RankProcess:
    pid: int
    role: Role
    create_time: float  # psutil's: with the pid, tells a process from a later one that reuses the number
    # Its parent when found: the process that reaps it, into whose /proc/PID/io the kernel then adds its counters
    # (watch recovers a rank's last reads from there when it ends between two samples).
    ppid: int | None = None

    @property
    def label(self) -> str:
        return self.role.label


@dataclass
class Discovery:
    """What was found under the launcher at one look."""

    root_pid: int
    root_cmdline: list[str]
    engine: str | None
    ranks: list[RankProcess] = field(default_factory=list)
    helpers: list[tuple[int, Role]] = field(default_factory=list)


def _describe(proc: psutil.Process) -> tuple[str, list[str]]:
    try:
        name = proc.name()
    except (psutil.Error, OSError):
        name = ""
    try:
        cmdline = proc.cmdline()
    except (psutil.Error, OSError):
        cmdline = []
    return name, cmdline


def discover(root_pid: int) -> Discovery:
    """The rank processes under ``root_pid`` (itself included) now.

    Raises WatchTargetError when the pid does not exist. At TP 1 vLLM loads in the engine core: it stands as rank 0
    when no worker is found under it.
    """
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        raise WatchTargetError(f"pid {root_pid}: no such process") from None
    except psutil.AccessDenied:
        raise WatchTargetError(f"pid {root_pid}: permission denied reading its processes") from None
    _, root_cmdline = _describe(root)
    found = Discovery(root_pid, root_cmdline, launcher_engine(root_cmdline))
    engine_cores: list[RankProcess] = []
    for proc in procs:
        name, cmdline = _describe(proc)
        role = classify_process(name, cmdline)
        if role is None:
            continue
        try:
            created = proc.create_time()
            ppid: int | None = proc.ppid()
        except (psutil.Error, OSError):
            continue
        found.engine = found.engine or role.engine
        if role.kind == "rank":
            found.ranks.append(RankProcess(proc.pid, role, created, ppid))
        elif role.kind == "engine-core":
            engine_cores.append(RankProcess(proc.pid, role, created, ppid))
        else:
            found.helpers.append((proc.pid, role))
    # A rank's forked child keeps the rank's title (fork copies the memory setproctitle wrote: a compile worker or a
    # helper the engine forks while it loads): part of that rank, not one more. A real SGLang 0.5.23 engine tier run
    # once showed a third `ckptprof:TP1` this way.
    titles: dict[int | None, str] = {rank.pid: rank.role.title for rank in found.ranks}
    found.ranks = [rank for rank in found.ranks if titles.get(rank.ppid) != rank.role.title]
    if not found.ranks and engine_cores:
        found.ranks = [
            RankProcess(
                p.pid,
                Role("vllm", "rank", p.role.title, 0, (*p.role.parts, ("TP", 0))),
                p.create_time,
                p.ppid,
            )
            for p in engine_cores
        ]
    else:
        found.helpers += [(p.pid, p.role) for p in engine_cores]
    found.ranks.sort(key=lambda r: (r.role.parts, r.pid))
    return found


def not_a_server_message(found: Discovery) -> str:
    """One line for a pid under which no server process is seen."""
    what = " ".join(found.root_cmdline)[:80] or "?"
    return (
        f"pid {found.root_pid} ({what}) is not an SGLang or vLLM server: none of its processes is a scheduler, "
        "engine core or worker, and its command line starts no server; give the launcher's pid "
        "(or start the server under watch: ckptprof watch -- python -m sglang.launch_server ...)"
    )

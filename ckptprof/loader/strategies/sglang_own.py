"""The engine's own weight iterators, driven over the files when ``sglang`` (or, for ``run --engine vllm``,
``vllm``) is importable where ckptprof runs.

An operator usually runs ckptprof inside the serving container. There the faithful pass need not be a replica:
``sglang.srt.model_loader.weight_utils`` holds the very functions the server's ``DefaultModelLoader`` iterates
(``safetensors_weights_iterator``, ``buffered_multi_thread_safetensors_weights_iterator`` and, in older releases,
``multi_thread_safetensors_weights_iterator``). This strategy calls the one the replayed path stands for, with the
keyword arguments that path sets (only those the installed release's function accepts), and does what the model's
``weight_loader`` does with each yielded tensor: narrow it to the rank's slice and copy it into the parameter.

vLLM's the same way: ``vllm.model_executor.model_loader.weight_utils`` holds ``safetensors_weights_iterator``
(its lazy, eager and prefetch strategies) and ``multi_thread_safetensors_weights_iterator``. Its prefetch splits the
files by ``torch.distributed`` rank, and the replay's ranks have no process group: each prefetches every file.

Only the faithful pass uses it: the engines' functions cannot be decomposed into read / deserialise / copy phases
without changing them. Where the module does not import (the package absent, or installed without the rest of the
serving stack it imports: transformers, torchvision, ...), the replica runs and the session says why. One exception:
where SGLang's weight utilities fail to import only because its compiled kernel package (``sgl_kernel``) is absent,
an import-only stand-in takes that package's place (``loader/kernel_standin.py``; the iterators call none of its
kernels, and a call would fail the rank by name) and the session says so (``faithful_engine.stand_ins``).

The engine's import (seconds: it pulls in most of a serving stack) happens in ``prepare``, before the rank's
clock starts; the worker times it on its own (``RankResult.engine_import_s``). The engine's iterator opens the files itself, on its own
threads, so nothing it reads passes through a recorder's phase: the whole process's storage bytes and major faults
are booked on the shards as they close (the split between shards in flight together is approximate, the model's
total exact).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptprof.engines.versions import installed_version
from ckptprof.loader import kernel_standin
from ckptprof.loader.plan import ModelPlan, ReplayPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
from ckptprof.loader.strategies import engine_import_memo
from ckptprof.loader.strategies.base import LoadContext, Strategy, StrategyUnavailable
from ckptprof.session import ShardTiming

MODULE = "sglang.srt.model_loader.weight_utils"
VLLM_MODULE = "vllm.model_executor.model_loader.weight_utils"
_TITLES = {"sglang": "SGLang", "vllm": "vLLM"}
_VLLM_LOAD = {"vllm": "lazy", "vllm-eager": "eager", "vllm-prefetch": "prefetch"}
# How long the import check may take: the module imports most of SGLang's serving stack.
IMPORT_CHECK_TIMEOUT_S = 180


@dataclass(frozen=True)
class OwnCall:
    """Which of the engine's functions a replayed path stands for, and the keyword arguments it sets."""

    function: str
    kwargs: dict[str, Any]
    module: str = MODULE
    # Keywords whose string value selects a mode the function must know by name (its source names the value): an
    # older release takes the keyword and falls back to its plain path for a value it never heard of.
    modes: tuple[str, ...] = ()

    @property
    def package(self) -> str:
        return self.module.split(".")[0]


def own_call(strategy: str, params: dict[str, Any]) -> OwnCall | None:
    """SGLang's iterator for the replica ``strategy`` (with its parameters); None for paths it has no function for
    (prefetch, pipelined, the peers' formats): those keep the replica."""
    threads = int(params.get("num_threads", 8))
    if strategy == "sglang" and not params:
        return OwnCall("safetensors_weights_iterator", {})
    if strategy == "no-mmap" and not params:
        return OwnCall("safetensors_weights_iterator", {"disable_mmap": True})
    if strategy == "sglang-mt":
        return OwnCall("buffered_multi_thread_safetensors_weights_iterator", {"max_workers": threads})
    if strategy == "sglang-mt-completed":
        return OwnCall("multi_thread_safetensors_weights_iterator", {"max_workers": threads})
    if strategy == "prefetch" and int(params.get("block_mib", 16)) == 16:
        # --weight-loader-prefetch-checkpoints on a release whose prefetch turns multithread off (0.5.16 on): the
        # single-thread iterator with its own background prefetch (block size: SGLANG_PREFETCH_BLOCK_SIZE_MB).
        prefetch: dict[str, Any] = {
            "prefetch": True,
            "prefetch_num_threads": int(params.get("num_threads", 4)),
        }
        return OwnCall("safetensors_weights_iterator", prefetch)
    if strategy.startswith("vllm") and params.get("shuffle"):
        # 0.34's --shuffle-safetensors-files seeds its shuffle with torch.distributed's world rank, and the replay's
        # ranks have no process group: the replica shuffles as vLLM does, by the rank it knows.
        return None
    if strategy in _VLLM_LOAD and not params:
        load = _VLLM_LOAD[strategy]
        kwargs = {"use_tqdm_on_load": True, "safetensors_load_strategy": load}
        # "lazy" is the plain path every release falls back to; eager and prefetch must be known by name.
        modes = ("safetensors_load_strategy",) if load != "lazy" else ()
        return OwnCall("safetensors_weights_iterator", kwargs, VLLM_MODULE, modes)
    if strategy == "vllm-mt":
        kwargs = {"use_tqdm_on_load": True, "max_workers": threads}
        return OwnCall("multi_thread_safetensors_weights_iterator", kwargs, VLLM_MODULE)
    return None


@dataclass(frozen=True)
class EngineCheck:
    """Whether the faithful pass can drive the engine's own iterators here, the sentence the session records, and
    (when the import was tried) which package it is: name, version, module, the file it imported from."""

    ok: bool
    text: str
    identity: dict[str, Any] | None = None


def availability(plan: ReplayPlan) -> tuple[bool, str]:
    """(whether the faithful pass can drive the engine's own iterators here, the sentence the session records)."""
    check = check_engine(plan)
    return check.ok, check.text


def check_engine(plan: ReplayPlan, wanted_engine: bool = True) -> EngineCheck:
    """The import is tried in a child process: it imports most of a serving stack, which must not land in the
    process that spawns the ranks. ``wanted_engine`` False: the replica, as asked (``--no-engine-iterator``)."""
    calls = {role: own_call(*plan.strategy_for(role)) for role in (m.role for m in plan.models)}
    found = [call for call in calls.values() if call is not None]
    module = found[0].module if found else _module_for(plan.strategy)
    package = module.split(".")[0]
    title = _TITLES.get(package, package)
    if not wanted_engine:
        return EngineCheck(False, f"ckptprof's replica of {title}'s sequence (--no-engine-iterator)")
    if not installed(package):
        return EngineCheck(
            False, f"ckptprof's replica of {title}'s sequence ({package} is not installed here)"
        )
    release = installed_version(package)
    version = release or "of unknown version"
    wanted = {
        call.function: {"kwargs": dict(sorted(call.kwargs.items())), "modes": list(call.modes)}
        for call in found
        if call.module == module
    }
    if not wanted:
        return EngineCheck(
            False,
            f"ckptprof's replica: {package} {version} is installed, but the replayed path has no iterator "
            f"function of its own in {title}",
        )
    child = check_in_child(wanted, module)
    problem, refused, where = child.problem, child.refused, child.file
    identity: dict[str, Any] = {"package": package, "version": release, "module": module, "file": where}
    if child.reused:
        identity["import_check_reused"] = True
    if child.stand_ins:
        identity["stand_ins"] = child.stand_ins
    if problem is not None:
        return EngineCheck(
            False,
            f"ckptprof's replica: {package} {version} is installed but {module} does not import here ({problem})",
            identity,
        )
    reasons = sorted({why for why in refused.values() if why})
    if reasons:
        return EngineCheck(
            False, f"ckptprof's replica: {package} {version} has {'; '.join(reasons)}", identity
        )
    kept = [role for role, call in calls.items() if call is None or call.module != module]
    text = f"{title}'s own {', '.join(sorted(wanted))} ({package} {version}, installed here)"
    if child.stand_ins:
        text += (
            f"; {', '.join(child.stand_ins)} is not installed here: an import-only stand-in took its place "
            "(the weight iterators call none of its kernels)"
        )
    if kept:
        text += f"; the replica for the {', '.join(kept)} (its path has no {title} function of its own)"
    if any(
        call.kwargs.get("safetensors_load_strategy") == "prefetch" or call.kwargs.get("prefetch")
        for call in found
    ):
        text += "; its prefetch runs without a process group here: each rank prefetches every file"
    return EngineCheck(True, text, identity)


def installed(package: str) -> bool:
    """Whether ``package`` can be found here (its metadata and modules; nothing is imported)."""
    return importlib.util.find_spec(package) is not None


def _module_for(strategy: str) -> str:
    """The engine module a replica path would come from: vLLM's for its paths, SGLang's for the rest."""
    return VLLM_MODULE if strategy.startswith("vllm") else MODULE


# Run in a fresh interpreter: imports the engine's module and says what it found (the last line it prints).
_CHILD_CHECK = """
import json, sys
from ckptprof.loader.strategies.sglang_own import describe_module
print(json.dumps(describe_module(sys.argv[2], json.loads(sys.argv[1]))))
"""


def describe_module(module_name: str, wanted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Import ``module_name`` (with a kernel package stood in for where that alone is missing); per wanted function
    (``{"kwargs": {...}, "modes": [...]}``), why it cannot be called with its keywords (None: it can); the module's
    file; the packages stood in for."""
    module, stand_ins = kernel_standin.import_engine_module(module_name)
    functions = {
        name: refusal(module, name, call["kwargs"], tuple(call.get("modes") or ()))
        for name, call in wanted.items()
    }
    return {"functions": functions, "file": getattr(module, "__file__", None), "stand_ins": stand_ins}


def refusal(module: Any, name: str, kwargs: dict[str, Any], modes: tuple[str, ...] = ()) -> str | None:
    """Why ``module.name`` cannot be called with ``kwargs`` (None: it can). The value of a keyword in ``modes``
    (``safetensors_load_strategy="prefetch"``) must appear in the function's source: an older release takes the
    keyword and silently does something else with a value it never heard of."""
    function = getattr(module, name, None)
    if function is None:
        return f"no {name}"
    accepted = inspect.signature(function).parameters
    refused = [key for key in kwargs if key not in accepted]
    try:
        source: str | None = inspect.getsource(function)
    except (OSError, TypeError):
        source = None
    if source is not None:
        refused += [
            f"{key}={json.dumps(value)}"
            for key, value in kwargs.items()
            if key in accepted
            and key in modes
            and isinstance(value, str)
            and json.dumps(value) not in source
            and repr(value) not in source
        ]
    return f"no {name} taking {', '.join(refused)}" if refused else None


@dataclass(frozen=True)
class ChildCheck:
    """What importing the engine's module in a fresh interpreter found."""

    problem: str | None  # why the module does not import (None: it does)
    refused: dict[str, str | None]  # per function, why it cannot be called with its keywords (None: it can)
    file: str | None = None  # the module's file
    stand_ins: list[str] = field(default_factory=list)  # kernel packages stood in for (absent here)
    reused: bool = False  # the answer of an earlier run (engine_import_memo.py), not a child started now


def check_in_child(wanted: dict[str, dict[str, Any]], module: str = MODULE) -> ChildCheck:
    """Import ``module`` in a fresh interpreter and ask it whether the wanted functions take their keywords; the
    answer of an earlier run with the same installation and question is reused (engine_import_memo.py)."""
    import_path = os.pathsep.join(p for p in sys.path if p)
    digest = engine_import_memo.key(module, wanted, import_path, (__file__, str(kernel_standin.__file__)))
    answer = engine_import_memo.lookup(digest)
    fresh = answer is None
    if answer is None:
        try:
            done = subprocess.run(
                [sys.executable, "-c", _CHILD_CHECK, json.dumps(wanted), module],
                capture_output=True,
                text=True,
                timeout=IMPORT_CHECK_TIMEOUT_S,
                env={**os.environ, "PYTHONPATH": import_path},
            )
        except subprocess.TimeoutExpired:
            return ChildCheck(f"the import took more than {IMPORT_CHECK_TIMEOUT_S} s", {})
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            return ChildCheck(lines[-1] if lines else f"exit status {done.returncode}", {})
        try:
            answer = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return ChildCheck("the check printed no answer", {})
    try:
        functions = answer["functions"]
        check = ChildCheck(
            None,
            {str(k): (str(v) if v else None) for k, v in functions.items()},
            answer.get("file") or None,
            [str(name) for name in answer.get("stand_ins") or []],
            reused=not fresh,
        )
    except (KeyError, TypeError, AttributeError):
        return ChildCheck("the check printed no answer", {})
    if fresh:
        engine_import_memo.store(digest, answer)
    return check


def call_problem(call: OwnCall, module: Any = None) -> str | None:
    """Why the installed release's function cannot be called as the path needs (None: it can). Imports the
    call's module unless it is given."""
    if module is None:
        module, _ = kernel_standin.import_engine_module(call.module)
    return refusal(module, call.function, call.kwargs, call.modes)


class SGLangOwnIterator(Strategy):
    """The faithful pass through the engine's own iterator for the replayed path ``replica`` (a strategy name)."""

    name = "sglang-own"
    flags = "(SGLang's own weight iterator)"

    def __init__(self, replica: str, params: dict[str, Any]) -> None:
        call = own_call(replica, params)
        if call is None:
            raise ValueError(f"{replica} has no iterator of its own in SGLang or vLLM")
        self.call = call
        self.name = f"{call.package}-own"
        self.flags = f"({_TITLES.get(call.package, call.package)}'s own weight iterator)"
        self._resolved = False
        self._function: Any = None
        self._problem: str | None = None
        self.stand_ins: list[str] = []

    def prepare(self, ctx: LoadContext, plan: ReplayPlan) -> None:
        """Import the engine and find its function before the rank's clock starts: a server imports its code long
        before it loads weights, and the import (seconds) is no part of the load."""
        self._resolve()

    def _resolve(self) -> None:
        self._resolved = True
        module, self.stand_ins = kernel_standin.import_engine_module(self.call.module)
        self._problem = call_problem(self.call, module)
        self._function = getattr(module, self.call.function, None)

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        if not self._resolved:  # driven without prepare (a unit test): the import lands here
            self._resolve()
        if self._problem is not None:
            raise StrategyUnavailable(f"{self.call.package}: {self._problem}")
        readable = []
        for shard in model.shards:
            if shard.error is None and shard.tensors is not None:
                readable.append(shard)
            else:
                rec.close_shard(rec.open_shard(shard.name), UnreadableShard(shard.error or "unreadable"))
        owner = {name: shard.path for shard in readable for name in shard.tensors or {}}
        files = [shard.path for shard in readable]
        with _quiet_bars():
            self._consume(ctx, model.role, self._function(files, **self.call.kwargs), owner, rec)

    @staticmethod
    def _consume(
        ctx: LoadContext,
        role: str,
        weights: Iterator[tuple[str, Any]],
        owner: dict[str, str],
        rec: Recorder,
    ) -> None:
        """Each (name, tensor) as the model's weight_loader takes it: narrowed to the rank's slice and copied.

        A shard's wall runs from its first tensor to the next shard's first (SGLang yields file by file). What the
        process read from storage meanwhile, on any thread, is booked on the shard as it closes."""
        current: tuple[str, ShardTiming] | None = None
        counts = [0, 0, 0]  # bytes, h2d bytes, tensors of the current shard
        process = _ProcessTally(rec)
        try:
            for name, full in weights:
                path = owner.get(name, "")
                if current is None or current[0] != path:
                    if current is not None:
                        _close(rec, current[1], counts, process)
                    current = (path, rec.open_shard(Path(path).name if path else "(unknown file)"))
                    counts = [0, 0, 0]
                src = ctx.narrow(role, name, full)
                counts[0] += full.numel() * full.element_size()
                if src is not None:
                    counts[1] += src.numel() * src.element_size()
                    began = rec.copy_began()
                    ctx.copy(role, name, src)
                    rec.copy_ended(began)
                counts[2] += 1
        except Exception as exc:
            if current is not None:
                rec.add_counts(counts[0], counts[1], counts[2], shard=current[1])
                process.book(current[1])
                rec.close_shard(current[1], exc)
                current = None
            raise
        finally:
            if current is not None:
                _close(rec, current[1], counts, process)


class _ProcessTally:
    """The process's storage bytes and major faults since the engine's iterator began, booked shard by shard: each
    closing shard takes what no shard before it took (so the model's total is exactly the process's)."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.storage0 = rec.process_storage_bytes()
        self.faults0 = rec.process_major_faults()
        self.storage_booked = 0
        self.faults_booked = 0

    def book(self, shard: ShardTiming) -> None:
        storage = max(0, self.rec.process_storage_bytes() - self.storage0 - self.storage_booked)
        faults = max(0, self.rec.process_major_faults() - self.faults0 - self.faults_booked)
        self.storage_booked += storage
        self.faults_booked += faults
        self.rec.add_process_counts(shard, storage, faults)


def _close(rec: Recorder, shard: ShardTiming, counts: list[int], process: _ProcessTally) -> None:
    rec.add_counts(counts[0], counts[1], counts[2], shard=shard)
    process.book(shard)
    rec.close_shard(shard)


@contextlib.contextmanager
def _quiet_bars() -> Iterator[None]:
    """SGLang's tqdm bars go to a null device: they are drawn (their cost is SGLang's), not printed over ours."""
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        yield

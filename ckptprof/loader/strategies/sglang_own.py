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
serving stack it imports: transformers, torchvision, ...), the replica runs and the session says why.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptprof.engines.versions import installed_version
from ckptprof.loader.plan import ModelPlan, ReplayPlan, UnreadableShard
from ckptprof.loader.recorder import Recorder
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
    if strategy in _VLLM_LOAD and not params:
        kwargs = {"use_tqdm_on_load": True, "safetensors_load_strategy": _VLLM_LOAD[strategy]}
        return OwnCall("safetensors_weights_iterator", kwargs, VLLM_MODULE)
    if strategy == "vllm-mt":
        kwargs = {"use_tqdm_on_load": True, "max_workers": threads}
        return OwnCall("multi_thread_safetensors_weights_iterator", kwargs, VLLM_MODULE)
    return None


def availability(plan: ReplayPlan) -> tuple[bool, str]:
    """(whether the faithful pass can drive SGLang's own iterators here, the sentence the session records).

    The import is tried in a child process: it imports most of a serving stack, which must not land in the process
    that spawns the ranks."""
    calls = {role: own_call(*plan.strategy_for(role)) for role in (m.role for m in plan.models)}
    found = [call for call in calls.values() if call is not None]
    module = found[0].module if found else MODULE
    package = module.split(".")[0]
    title = _TITLES.get(package, package)
    if importlib.util.find_spec(package) is None:
        return False, f"ckptprof's replica of {title}'s sequence ({package} is not installed here)"
    version = installed_version(package) or "of unknown version"
    wanted = {call.function: sorted(call.kwargs) for call in found if call.module == module}
    if not wanted:
        return False, (
            f"ckptprof's replica: {package} {version} is installed, but the replayed path has no iterator "
            f"function of its own in {title}"
        )
    problem, refused = check_in_child(wanted, module)
    if problem is not None:
        return (
            False,
            f"ckptprof's replica: {package} {version} is installed but {module} does not import here ({problem})",
        )
    reasons = sorted({why for why in refused.values() if why})
    if reasons:
        return False, f"ckptprof's replica: {package} {version} has {'; '.join(reasons)}"
    kept = [role for role, call in calls.items() if call is None or call.module != module]
    text = f"{title}'s own {', '.join(sorted(wanted))} ({package} {version}, installed here)"
    if kept:
        text += f"; the replica for the {', '.join(kept)} (its path has no {title} function of its own)"
    if any(call.kwargs.get("safetensors_load_strategy") == "prefetch" for call in found):
        text += "; its prefetch runs without a process group here: each rank prefetches every file"
    return True, text


_CHILD_CHECK = """
import importlib, inspect, json, sys
module = importlib.import_module(sys.argv[2])
out = {}
for name, keywords in json.loads(sys.argv[1]).items():
    function = getattr(module, name, None)
    if function is None:
        out[name] = "no " + name
        continue
    accepted = inspect.signature(function).parameters
    refused = [k for k in keywords if k not in accepted]
    out[name] = ("no %s taking %s" % (name, ", ".join(refused))) if refused else None
print(json.dumps(out))
"""


def check_in_child(
    wanted: dict[str, list[str]], module: str = MODULE
) -> tuple[str | None, dict[str, str | None]]:
    """(why ``module`` does not import in a fresh interpreter, or None; per function, why it cannot be called with
    its keywords, or None)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD_CHECK, json.dumps(wanted), module],
            capture_output=True,
            text=True,
            timeout=IMPORT_CHECK_TIMEOUT_S,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
    except subprocess.TimeoutExpired:
        return f"the import took more than {IMPORT_CHECK_TIMEOUT_S} s", {}
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        return (lines[-1] if lines else f"exit status {done.returncode}"), {}
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "the check printed no answer", {}
    return None, {str(k): (str(v) if v else None) for k, v in answer.items()}


def call_problem(call: OwnCall) -> str | None:
    """Why the installed release's function cannot be called as the path needs (None: it can). Imports the
    call's module."""
    module = importlib.import_module(call.module)
    function = getattr(module, call.function, None)
    if function is None:
        return f"no {call.function}"
    accepted = inspect.signature(function).parameters
    refused = [name for name in call.kwargs if name not in accepted]
    if refused:
        return f"no {call.function} taking {', '.join(refused)}"
    return None


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

    def load_model(self, ctx: LoadContext, model: ModelPlan, rec: Recorder) -> None:
        problem = call_problem(self.call)
        if problem is not None:
            raise StrategyUnavailable(f"{self.call.package}: {problem}")
        function = getattr(importlib.import_module(self.call.module), self.call.function)
        readable = []
        for shard in model.shards:
            if shard.error is None and shard.tensors is not None:
                readable.append(shard)
            else:
                rec.close_shard(rec.open_shard(shard.name), UnreadableShard(shard.error or "unreadable"))
        owner = {name: shard.path for shard in readable for name in shard.tensors or {}}
        files = [shard.path for shard in readable]
        with _quiet_bars():
            self._consume(ctx, model.role, function(files, **self.call.kwargs), owner, rec)

    @staticmethod
    def _consume(
        ctx: LoadContext,
        role: str,
        weights: Iterator[tuple[str, Any]],
        owner: dict[str, str],
        rec: Recorder,
    ) -> None:
        """Each (name, tensor) as the model's weight_loader takes it: narrowed to the rank's slice and copied.

        A shard's wall runs from its first tensor to the next shard's first (SGLang yields file by file)."""
        current: tuple[str, ShardTiming] | None = None
        counts = [0, 0, 0]  # bytes, h2d bytes, tensors of the current shard
        try:
            for name, full in weights:
                path = owner.get(name, "")
                if current is None or current[0] != path:
                    if current is not None:
                        _close(rec, current[1], counts)
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
                rec.close_shard(current[1], exc)
                current = None
            raise
        finally:
            if current is not None:
                _close(rec, current[1], counts)


def _close(rec: Recorder, shard: ShardTiming, counts: list[int]) -> None:
    rec.add_counts(counts[0], counts[1], counts[2], shard=shard)
    rec.close_shard(shard)


@contextlib.contextmanager
def _quiet_bars() -> Iterator[None]:
    """SGLang's tqdm bars go to a null device: they are drawn (their cost is SGLang's), not printed over ours."""
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
        yield

"""The checkpoints a server loads, read off its command line (SGLang's and vLLM's flags, and ``ckptprof run``'s),
nothing guessed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

# flag -> the role of the model it names
_PATH_FLAGS = {
    "--model-path": "target",
    "--model": "target",
    "--speculative-draft-model-path": "draft",
    "--speculative-draft-model": "draft",
    "--speculative-model": "draft",  # vLLM before --speculative-config
}
# vLLM's `vllm serve MODEL`: the first positional after "serve".
_SERVE = "serve"
# `ckptprof run [TARGET] [-d DRAFT]`: the options of run that take a value, so that the positional TARGET is told
# from a value (tests/unit/test_watch_procs.py holds this list against run's own parser).
RUN_VALUE_FLAGS = frozenset(
    [
        "-d",
        "--draft",
        "-t",
        "--tp",
        "--devices",
        "-c",
        "--cache",
        "--order",
        "--synth-size",
        "--faithful-rounds",
        "--probe-sample",
        "--probe-max-age",
        "-s",
        "--strategy",
        "--draft-strategy",
        "--engine",
        "--vllm-version",
        "--sglang-version",
        "--rank-timeout",
        "--log",
        "--json",
        "-o",
        "--out",
        "--html",
        "--trace",
    ]
)


@dataclass(frozen=True)
class ModelArg:
    role: str  # target | draft
    path: str
    flag: str  # where it was found ("--model-path", "serve", "--speculative-config", "watch --model-path")


def _flag_value(args: Sequence[str], i: int) -> tuple[str, str | None]:
    arg = args[i]
    if "=" in arg:
        flag, value = arg.split("=", 1)
        return flag, value
    return arg, args[i + 1] if i + 1 < len(args) else None


def model_args(cmdline: Sequence[str]) -> list[ModelArg]:
    """Every model path the command line names, in the order given (a repeated flag: the last one counts, as
    argparse does)."""
    args = list(cmdline)
    run_at = _ckptprof_run(args)
    if run_at is not None:
        return _run_args(args[run_at + 1 :])
    found: dict[str, ModelArg] = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            flag, value = _flag_value(args, i)
            if value is None:
                continue
            if flag in _PATH_FLAGS:
                role = _PATH_FLAGS[flag]
                found[role] = ModelArg(role, value, flag)
            elif flag == "--speculative-config":
                draft = _speculative_model(value)
                if draft:
                    found["draft"] = ModelArg("draft", draft, flag)
        elif arg == _SERVE and i + 1 < len(args) and not args[i + 1].startswith("-"):
            found.setdefault("target", ModelArg("target", args[i + 1], _SERVE))
    return sorted(found.values(), key=lambda m: m.role != "target")


def _speculative_model(value: str) -> str | None:
    try:
        config = json.loads(value)
    except ValueError:
        return None
    model = config.get("model") if isinstance(config, dict) else None
    return model if isinstance(model, str) else None


def _ckptprof_run(args: list[str]) -> int | None:
    """Where ``run`` stands in ``ckptprof run ...`` / ``python -m ckptprof run ...``, or None."""
    for i, arg in enumerate(args[:-1]):
        if (arg == "ckptprof" or arg.endswith("/ckptprof")) and args[i + 1] == "run":
            return i + 1
    return None


def _run_args(args: list[str]) -> list[ModelArg]:
    """``ckptprof run``'s checkpoints: its positional TARGET and ``-d/--draft`` (without TARGET it loads its
    built-in synthetic draft, whose folder its command line does not name)."""
    found: dict[str, ModelArg] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            if i + 1 < len(args):
                found.setdefault("target", ModelArg("target", args[i + 1], "run TARGET"))
            break
        if arg.startswith("-") and arg != "-":
            flag, value = _flag_value(args, i)
            if flag in ("-d", "--draft") and value is not None:
                found["draft"] = ModelArg("draft", value, "run --draft")
            elif flag.startswith("-d") and not flag.startswith("--") and len(flag) > 2:
                found["draft"] = ModelArg("draft", flag[2:], "run --draft")  # -dDIR
            i += 2 if "=" not in arg and flag in RUN_VALUE_FLAGS else 1
            continue
        found.setdefault("target", ModelArg("target", arg, "run TARGET"))
        i += 1
    return sorted(found.values(), key=lambda m: m.role != "target")

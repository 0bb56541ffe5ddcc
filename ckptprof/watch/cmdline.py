"""The checkpoints a server loads, read off its command line (SGLang's and vLLM's flags), nothing guessed."""

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
    found: dict[str, ModelArg] = {}
    args = list(cmdline)
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

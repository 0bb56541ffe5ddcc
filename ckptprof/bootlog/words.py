"""The English of ``ckptprof log``: phase names, durations, rank lists and the sentences built from them.

Only strings live here, so that wording can change without touching the state machine, and the state machine's
rules can change without touching the wording.
"""

from __future__ import annotations

import re
from typing import TypeAlias

PhaseKey: TypeAlias = tuple[str, "str | None", "str | None"]  # (name, model, variant)

_RANK_NUMBER_RE = re.compile(r"\d+", re.ASCII)

_DOING = {
    "init-distributed": "initialising torch.distributed",
    "load-weights": "loading {model} weights",
    "kv-cache": "allocating the {model} KV cache",
    "cuda-graph": "capturing {model} CUDA graphs",
    "ready": "serving",
}
_DONE = {
    "init-distributed": "torch.distributed initialised",
    "load-weights": "{model} weights loaded",
    "kv-cache": "{model} KV cache allocated",
    "cuda-graph": "{model} CUDA graphs captured",
}


def rank_sort_key(label: str) -> tuple[tuple[int, ...], str]:
    return tuple(int(number) for number in _RANK_NUMBER_RE.findall(label)), label


def format_ranks(labels: list[str], limit: int = 8) -> str:
    shown = [label or "the main process" for label in labels[:limit]]
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(shown) + more


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def phase_label(key: PhaseKey | None) -> str:
    if key is None:
        return "boot"
    name, model, variant = key
    detail = " ".join(part for part in (model, variant) if part)
    return f"{name} ({detail})" if detail else name


def _model_words(key: PhaseKey) -> str:
    return " ".join(part for part in (key[1], key[2]) if part)


def doing_words(key: PhaseKey) -> str:
    template = _DOING.get(key[0], key[0])
    return " ".join(template.format(model=_model_words(key)).split())


def done_words(key: PhaseKey) -> str:
    template = _DONE.get(key[0], f"{key[0]} done")
    return " ".join(template.format(model=_model_words(key)).split())


def failed_sentence(phase: PhaseKey | None, step: str | None, who: str, error: str) -> str:
    if phase is not None:
        where = f"while {doing_words(phase)}"
    elif step is not None and step.startswith("after "):
        where = step
    elif step is not None:
        where = f"during {step}"
    else:
        where = "with no boot phase logged before it"
    if step is not None and phase is not None:
        where += f" ({step})"
    return f"failed {where}: {who or 'the main process'} logged {error}"


def boots_warning(boots: int, boot: int) -> str:
    which = "the last one" if boot == boots else f"boot {boot}"
    return f"the log holds {boots} boots; this report covers {which} (--boot N picks another)"


def stall_warning(
    desc: str, model: str | None, done: int, total: int, since: str | None, now: str | None, stuck_s: float
) -> str:
    return (
        f"stalled: '{desc}' ({model or 'unknown model'}) has been at {done}/{total} since {since} while the log "
        f"went on to {now} ({format_duration(stuck_s)} without progress)"
    )


def next_step_note(
    name: str, model: str | None, graph_models: list[str | None], speculative: bool | None
) -> str:
    """What has not happened yet, so nobody mistakes the current step for a later one."""
    if name in ("cuda-graph", "ready"):
        return ""
    if name == "init-distributed":
        return "no weights loaded yet"
    if not graph_models:
        return "CUDA graph capture has not started"
    if speculative and model == "draft" and all(other != "draft" for other in graph_models):
        return "target CUDA graphs are captured; draft CUDA graph capture has not started"
    return ""

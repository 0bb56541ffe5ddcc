"""Loading strategies: one module each. A strategy only loads, through the recorder it is handed."""

from __future__ import annotations

from ckptprof.replay.strategies.base import Strategy


def get_strategy(name: str) -> Strategy:
    from ckptprof.replay.strategies import sglang

    strategies: dict[str, Strategy] = {"sglang": sglang.SGLangMmap()}
    try:
        return strategies[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; available: {', '.join(sorted(strategies))}") from None


AVAILABLE = ("sglang",)

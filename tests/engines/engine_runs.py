"""What the engine tier's tests share: the engine under test and one ``ckptprof run`` as a user starts it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Engine:
    package: str  # sglang | vllm
    version: str
    title: str  # SGLang | vLLM

    def argv(self) -> list[str]:
        """The run arguments that replay this engine's default path as its release does."""
        if self.package == "vllm":
            # One side of vLLM's automatic-prefetch rule (the default replays both): the path on a local disk.
            return ["--engine", "vllm", "--strategy", "vllm"]
        return []


@dataclass
class Run:
    """One ``ckptprof run`` as a user starts it: its terminal output and the session it saved."""

    argv: list[str]
    stdout: str
    stderr: str
    session: dict[str, Any]

    def models(self, role: str) -> list[dict[str, Any]]:
        return [m for r in self.session["ranks"] for m in r["models"] if m["role"] == role]


RunFactory = Callable[..., Run]

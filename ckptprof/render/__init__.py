"""Renderers: one module per output format, each ``render(session) -> str`` reading only a Session.

``RENDERERS`` maps a ``--format`` name to its renderer. The modules are imported on first use, so asking for
the terminal table never imports the HTML or plotting code.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from ckptprof.session import Session

Renderer = Callable[[Session], str]


def _lazy(module: str) -> Renderer:
    def render(session: Session) -> str:
        fn: Renderer = import_module(f"ckptprof.render.{module}").render
        return fn(session)

    render.__name__ = f"render_{module}"
    return render


def _json(session: Session) -> str:
    return session.to_json() + "\n"


RENDERERS: dict[str, Renderer] = {
    "table": _lazy("table"),
    "md": _lazy("markdown"),
    "html": _lazy("html"),
    "json": _json,
    "perfetto": _lazy("perfetto"),
}
FORMATS = tuple(RENDERERS)

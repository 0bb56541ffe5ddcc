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
    """The session's JSON, with the figures the other formats derive from it that a script would want too:
    ``extra.server_vs_replay`` (docs/json-contract.md) where the run read the server's log."""
    from dataclasses import asdict

    from ckptprof.analysis.server_log import KEY, server_vs_replay
    from ckptprof.session import dumps_strict

    doc = session.to_dict()
    rows = server_vs_replay(session)
    if rows is not None:  # a session saved before the run wrote the rows itself gets them here
        doc.setdefault("extra", {}).setdefault(KEY, [asdict(r) for r in rows])
    return dumps_strict(doc, indent=1, sort_keys=False) + "\n"


RENDERERS: dict[str, Renderer] = {
    "table": _lazy("table"),
    "md": _lazy("markdown"),
    "html": _lazy("html"),
    "json": _json,
    "perfetto": _lazy("perfetto"),
}
FORMATS = tuple(RENDERERS)

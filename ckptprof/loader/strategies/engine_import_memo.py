"""What importing an engine's weight module in a fresh interpreter found, kept for the next run on this machine.

``sglang_own.check_in_child`` imports the engine's module in a child process (it pulls in most of a serving stack,
which must stay out of the process that starts the ranks) and asks whether the iterators the replay needs take their
keywords. That costs 8-15 s on a 2-core machine for SGLang 0.5.x and vLLM 0.x, and every `ckptprof run --faithful`
paid it again for the same answer: the answer depends only on what is installed and on the question.

The memo's key is therefore everything that answer depends on:
- the interpreter (its path and version) and the import path the child gets;
- the installed distributions, names and versions (a `pip install` or uninstall changes it);
- the engine module's own file and its package's ``__init__``, by path, size and modification time (an edit in place);
- the question (the module, the functions and their keywords) and the code that answers it (this package's checking
  modules, by content).

Only a check that imported the module is kept: a failed import may be a timeout or a half-installed environment,
and is tried again at the next run. ``CKPTPROF_ENGINE_CHECK=fresh`` skips the memo (it still stores what it finds).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckptprof.cachedir import cache_dir

FRESH_ENV = "CKPTPROF_ENGINE_CHECK"


def key(module: str, wanted: dict[str, dict[str, Any]], import_path: str, checkers: Sequence[str]) -> str:
    """The digest the answer for ``module`` and ``wanted`` is filed under (see the module's docstring);
    ``checkers`` are the files of the code that answers."""
    parts: dict[str, Any] = {
        "python": [sys.executable, sys.version],
        "import_path": import_path,
        "distributions": _distributions(),
        "module_files": _module_files(module),
        "question": [module, wanted],
        "checker": _files_digest(checkers),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def lookup(digest: str) -> dict[str, Any] | None:
    """The answer stored under ``digest``; None when there is none, it is unreadable, or a fresh check was asked."""
    if os.environ.get(FRESH_ENV, "") == "fresh":
        return None
    try:
        doc = json.loads(_path(digest).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != digest or not isinstance(doc.get("answer"), dict):
        return None
    answer: dict[str, Any] = doc["answer"]
    return answer


def store(digest: str, answer: dict[str, Any]) -> None:
    """Keep ``answer`` under ``digest``; a cache that cannot be written is only a slower next run."""
    path = _path(digest)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"key": digest, "answer": answer}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _path(digest: str) -> Path:
    return cache_dir() / "engine-checks" / f"{digest}.json"


def _distributions() -> list[tuple[str, str]]:
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        found.add((str(name or "?").lower(), str(dist.version)))
    return sorted(found)


def _module_files(module: str) -> list[list[Any]]:
    """Path, size and mtime of the module's file and its top package's ``__init__``, found without importing
    either (a submodule's spec would import its parents here, in the process that starts the ranks)."""
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    files = [spec.origin] if spec.origin else []
    for folder in spec.submodule_search_locations or []:
        base = Path(folder, *rest.split(".")) if rest else Path(folder)
        files += [str(base.with_suffix(".py")), str(base / "__init__.py")]
    out: list[list[Any]] = []
    for name in files:
        try:
            st = os.stat(name)
        except OSError:
            continue
        out.append([os.path.realpath(name), st.st_size, st.st_mtime_ns])
    return out


def _files_digest(files: Sequence[str]) -> str:
    """The checking code's content: a changed check must not reuse an answer an older one gave."""
    h = hashlib.sha256()
    for name in files:
        try:
            h.update(Path(name).read_bytes())
        except OSError:
            h.update(name.encode())
    return h.hexdigest()[:16]

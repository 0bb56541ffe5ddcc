"""Import-only stand-ins for an engine's compiled kernel package, put in place only where that package is absent.

On a CUDA host, SGLang's weight utilities import its quantisation and layer modules, and those import ``sgl_kernel``
(the ``sglang-kernel`` wheel, hundreds of MB of CUDA kernels) at module level. The weight iterators themselves call
none of its kernels: they open files and yield CPU tensors. Where the kernel package is not installed (a lean
profiling host, a machine the wheel cannot be carried to) the import of the weight utilities fails and ckptprof would
fall back to its replica. A serving host has the package, and there nothing here is used.

The stand-in is a meta-path finder that answers for the package and every submodule of it. Every name looked up in
it is an inert placeholder: it can be imported, subclassed, subscripted (in annotations) and looked into, but calling
one raises :class:`StandInCalled` and is logged in :data:`CALLS`, so a load that did reach a kernel fails loudly and
names it instead of running something else. Dunder names are absent (``hasattr(mod, "__version__")`` is False),
so code that probes for a feature sees none.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Any

# Which compiled packages an engine's weight utilities import without calling: only these may be stood in for.
STANDIN_PACKAGES: dict[str, tuple[str, ...]] = {"sglang": ("sgl_kernel",)}

# Every call of a placeholder, in order ("sgl_kernel.silu_and_mul"), in this process.
CALLS: list[str] = []


class StandInCalled(RuntimeError):
    """A placeholder of an absent kernel package was called: the engine reached code ckptprof cannot run here."""


class StandInNotEnough(ImportError):
    """The engine's module failed to import even with its absent kernel package stood in for (an older release
    registers fake implementations of the package's torch operators at import, which needs the real operators)."""


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class _Inert(type):
    """The metaclass of placeholders: each placeholder is a class, so that ``class X(placeholder)`` works too."""

    def __getattr__(cls, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        return placeholder(f"{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        CALLS.append(cls.__qualname__)
        raise StandInCalled(
            f"{cls.__qualname__} was called, but its package is not installed here: ckptprof put an import-only "
            "stand-in in its place (install the engine's kernel package to run this path)"
        )

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls


def placeholder(qualname: str) -> type:
    """An inert name: a class whose metaclass answers every lookup with another placeholder."""
    made = _Inert(qualname.rsplit(".", 1)[-1], (), {"__module__": qualname.rsplit(".", 1)[0]})
    made.__qualname__ = qualname
    return made


class _InertModule(types.ModuleType):
    """A stood-in module: every non-dunder attribute is a placeholder (kept once looked up, so it is stable)."""

    def __getattr__(self, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        value = placeholder(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``root`` and every ``root.x.y``; each is a package, so any submodule can be imported from it."""

    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.root and not fullname.startswith(self.root + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _InertModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []
        module.__ckptprof_standin__ = True  # type: ignore[attr-defined]


def is_standin(module: types.ModuleType) -> bool:
    return bool(getattr(module, "__ckptprof_standin__", False))


def install(root: str) -> None:
    """Put the stand-in for ``root`` in place (first in the finders: nothing real of that name exists here)."""
    if not any(isinstance(f, _Finder) and f.root == root for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(root))


def _forget(package: str) -> None:
    """Drop ``package``'s modules from this interpreter, so they import again with a stand-in in place (a failed
    import leaves the modules that did import behind, some holding what they found missing)."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


def import_engine_module(
    module_name: str, allowed: tuple[str, ...] | None = None
) -> tuple[types.ModuleType, list[str]]:
    """Import ``module_name`` (an engine's weight utilities); where it fails only because a kernel package that the
    engine imports without calling is absent (``allowed``; by default the engine's in :data:`STANDIN_PACKAGES`),
    import it again with a stand-in for that package.

    Returns the module and the packages stood in for (empty when the module imported as it is)."""
    package = module_name.split(".")[0]
    if allowed is None:
        allowed = STANDIN_PACKAGES.get(package, ())
    stood_in: list[str] = []
    while True:
        try:
            return importlib.import_module(module_name), stood_in
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if missing not in allowed or missing in stood_in or importlib.util.find_spec(missing) is not None:
                if stood_in:
                    raise _not_enough(stood_in, exc) from exc
                raise
        except Exception as exc:
            if stood_in:
                raise _not_enough(stood_in, exc) from exc
            raise
        _forget(package)
        install(missing)
        stood_in.append(missing)


def _not_enough(stood_in: list[str], exc: Exception) -> StandInNotEnough:
    names = ", ".join(stood_in)
    return StandInNotEnough(
        f"{names} is not installed here, and the import failed with an import-only stand-in in its place "
        f"({type(exc).__name__}: {exc})"
    )

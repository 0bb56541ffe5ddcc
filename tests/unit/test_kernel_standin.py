"""The import-only stand-in for an engine's absent kernel package: used only where that package alone is missing,
inert when imported, loud when called."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ckptprof.loader import kernel_standin
from ckptprof.loader.kernel_standin import StandInCalled, import_engine_module

# A stand-in engine whose weight utilities import a kernel package at module level the way SGLang's layers do:
# names from a submodule, a subclass of one, one in an annotation, and a feature probe on a dunder.
ENGINE = {
    "fakeengine/__init__.py": "",
    "fakeengine/weights.py": """
        from fakekernel import silu_and_mul
        from fakekernel.scalar_type import ScalarType, scalar_types

        class MyType(ScalarType):
            pass

        WIDE: ScalarType | None = scalar_types.uint4b8
        HAS_VERSION = hasattr(__import__("fakekernel"), "__version__")

        def iterate(names):
            for name in names:
                yield name, len(name)

        def activate(x):
            return silu_and_mul(x)
    """,
    "fakeengine/needs_other.py": "import notakernel\n",
    "fakeengine/plain.py": "VALUE = 3\n",
    # An installed kernel package that lacks a submodule: a real package is never stood in for.
    "realkernel/__init__.py": "",
    "fakeengine/needs_real_sub.py": "import realkernel.missing_part\n",
}


@pytest.fixture
def engine_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for rel, text in ENGINE.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(kernel_standin, "CALLS", [])
    yield tmp_path
    for name in [n for n in sys.modules if n.split(".")[0] in {"fakeengine", "fakekernel", "realkernel"}]:
        del sys.modules[name]


def test_a_missing_kernel_package_is_stood_in_and_the_module_imports(engine_on_path: Path) -> None:
    module, stood_in = import_engine_module("fakeengine.weights", ("fakekernel",))

    assert stood_in == ["fakekernel"]
    assert kernel_standin.is_standin(sys.modules["fakekernel"])
    assert kernel_standin.is_standin(sys.modules["fakekernel.scalar_type"])
    # What the engine's iterator does runs as it is; nothing of the kernel package was called.
    assert list(module.iterate(["a", "bc"])) == [("a", 1), ("bc", 2)]
    assert kernel_standin.CALLS == []
    # A probe for a feature finds none; a subclass of a placeholder is a class.
    assert module.HAS_VERSION is False
    assert issubclass(module.MyType, module.ScalarType)


def test_a_call_into_the_stand_in_fails_loudly_and_is_logged(engine_on_path: Path) -> None:
    module, _ = import_engine_module("fakeengine.weights", ("fakekernel",))

    with pytest.raises(
        StandInCalled, match=r"^fakekernel\.silu_and_mul was called, but its package is not installed"
    ):
        module.activate(1.0)
    with pytest.raises(StandInCalled, match=r"^fakekernel\.scalar_type\.ScalarType was called"):
        module.MyType.__mro__[1]()
    assert kernel_standin.CALLS == ["fakekernel.silu_and_mul", "fakekernel.scalar_type.ScalarType"]


def test_placeholders_are_stable_and_nest(engine_on_path: Path) -> None:
    import_engine_module("fakeengine.weights", ("fakekernel",))
    kernel = sys.modules["fakekernel"]

    assert kernel.silu_and_mul is kernel.silu_and_mul
    assert kernel.ops.quant.fp8.__qualname__ == "fakekernel.ops.quant.fp8"
    assert kernel.ScalarType[int] is kernel.ScalarType
    assert (kernel.ScalarType | None) is kernel.ScalarType
    with pytest.raises(AttributeError):
        _ = kernel.__file__


def test_a_module_that_imports_as_it_is_gets_no_stand_in(engine_on_path: Path) -> None:
    module, stood_in = import_engine_module("fakeengine.plain", ("fakekernel",))

    assert (module.VALUE, stood_in) == (3, [])
    assert "fakekernel" not in sys.modules


def test_a_missing_package_that_is_not_a_known_kernel_package_is_not_stood_in(engine_on_path: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="notakernel"):
        import_engine_module("fakeengine.needs_other", ("fakekernel",))
    assert "notakernel" not in sys.modules


def test_an_installed_kernel_package_is_never_replaced(engine_on_path: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match=r"realkernel\.missing_part"):
        import_engine_module("fakeengine.needs_real_sub", ("realkernel",))
    assert not kernel_standin.is_standin(sys.modules["realkernel"])


def test_only_sglangs_kernel_package_is_stood_in_by_default(engine_on_path: Path) -> None:
    # fakeengine has no entry: its missing kernel package is an error like any other.
    with pytest.raises(ModuleNotFoundError, match="fakekernel"):
        import_engine_module("fakeengine.weights")
    assert kernel_standin.STANDIN_PACKAGES == {"sglang": ("sgl_kernel",)}


def test_a_module_that_needs_the_real_package_even_so_says_what_was_stood_in(
    engine_on_path: Path,
) -> None:
    # Like an older release that registers fake kernels for the package's torch operators as it imports.
    (engine_on_path / "fakeengine" / "registers.py").write_text(
        "import fakekernel\nraise RuntimeError('operator fakekernel::quant does not exist')\n"
    )
    with pytest.raises(
        kernel_standin.StandInNotEnough,
        match=r"^fakekernel is not installed here, and the import failed with an import-only stand-in in its "
        r"place \(RuntimeError: operator fakekernel::quant does not exist\)$",
    ):
        import_engine_module("fakeengine.registers", ("fakekernel",))

"""Ceilings: what the storage, the page cache, host memory and the PCIe links can do on this machine.

``measure_ceilings`` (in ``run_probes``) runs them all and returns the dict that ``ckptprof run`` stores as
``session.ceilings``. Submodules are imported on first use, so ``ckptprof.probe.transfer`` can be used
without the storage probe's dependencies and the other way round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptprof.probe.run_probes import measure_ceilings, parse_device_spec

__all__ = ["measure_ceilings", "parse_device_spec"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ckptprof.probe import run_probes

        return getattr(run_probes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The replay: plan, rank processes, recorder and loading strategies.

``ckptprof.replay(target, draft=None, tp=1, devices="cpu", cache="warm", ...) -> Session`` is also the Python
API: this package is callable (it forwards to :func:`ckptprof.api.replay`), so the documented one-liner works
while the stages keep their own modules.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ckptprof.api import replay

        return replay(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

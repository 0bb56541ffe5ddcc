"""Which compiled patterns of the reader take the time: every module-level pattern of ckptprof.bootlog is wrapped in a
timer, FILE is read once to warm the memos, then once more with the clocks running. The wrapper adds about a third of
a microsecond a call, so patterns called often read dearer than they are; the order is what this is for. Patterns
held elsewhere (the rare needles' searches in a tuple, the word gates' patterns) are not timed.

    python pattern_times.py TREE FILE
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

sys.path.insert(0, sys.argv[1])
import ckptprof.bootlog as bootlog  # noqa: E402

assert bootlog.__file__ is not None and bootlog.__file__.startswith(sys.argv[1])
SECONDS: Counter[str] = Counter()
CALLS: Counter[str] = Counter()
TIMED = ("match", "search", "fullmatch", "sub", "subn", "findall", "split")


class Timed:
    def __init__(self, pattern: re.Pattern[Any], name: str) -> None:
        self._pattern, self._name = pattern, name

    def __getattr__(self, attribute: str) -> Any:
        method = getattr(self._pattern, attribute)
        if attribute in TIMED:
            return self._timed(method, listed=False)
        if attribute == "finditer":
            return self._timed(method, listed=True)
        return method

    def _timed(self, method: Callable[..., Any], listed: bool) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            result = method(*args, **kwargs)
            if listed:
                result = iter(list(result))  # the matches found now, on the clock
            SECONDS[self._name] += time.perf_counter() - started
            CALLS[self._name] += 1
            return result

        return call


for info in pkgutil.iter_modules(bootlog.__path__):
    module = importlib.import_module(f"ckptprof.bootlog.{info.name}")
    for key, value in list(vars(module).items()):
        if isinstance(value, re.Pattern):
            setattr(module, key, Timed(value, f"{info.name}.{key}"))

from ckptprof.bootlog.phases import analyze_path  # noqa: E402

analyze_path(sys.argv[2])
SECONDS.clear()
CALLS.clear()
started = time.perf_counter()
analyze_path(sys.argv[2])
print(f"the read, with the timers: {(time.perf_counter() - started) * 1000:.0f} ms")
for name, seconds in SECONDS.most_common(20):
    print(f"{seconds * 1000:7.1f} ms {CALLS[name]:8d} calls  {name}")

"""Optional (``watch --py-spy``): each rank's Python stack now and then, read with ``py-spy dump --nonblocking`` -
py-spy reads the process's memory without stopping it, so the server never pauses for it. One dump per rank every
few seconds: a dump costs py-spy tens of milliseconds of CPU, so sampling faster would cost the load what the
/proc sampling saves it.

Where py-spy may not attach (ptrace not permitted), the first failure is kept as one line with the fix
(profiling.pyspy.ptrace_hint) and the rank's stacks are left out; the /proc figures go on regardless.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ckptprof.profiling.pyspy import ptrace_hint

EVERY_S = 2.0
DUMP_TIMEOUT_S = 5.0
_THREAD = re.compile(r'^Thread (?:0x)?([0-9a-fA-F]+) \(([^)]*)\)(?:: "(.*)")?\s*$')


@dataclass(frozen=True)
class ThreadStack:
    tid: str
    state: str  # py-spy's: "active", "idle", "active+gil", ...
    name: str
    frames: tuple[str, ...]  # innermost first: "get_tensor (safetensors/torch.py:313)"


def parse_dump(text: str) -> list[ThreadStack]:
    """The threads of one ``py-spy dump``; the header (which holds the process's command line, possibly on several
    lines) is skipped up to the first thread."""
    threads: list[ThreadStack] = []
    current: tuple[str, str, str] | None = None
    frames: list[str] = []
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            if current is not None:
                threads.append(ThreadStack(*current, tuple(frames)))
            current, frames = (m.group(1), m.group(2), m.group(3) or ""), []
        elif current is not None and line.startswith("    ") and line.strip():
            frames.append(line.strip())
    if current is not None:
        threads.append(ThreadStack(*current, tuple(frames)))
    return threads


@dataclass
class RankStacks:
    dumps: int = 0
    frames: Counter[str] = field(default_factory=Counter)  # the main thread's innermost frame, per dump
    last: str | None = None
    error: str | None = None

    def top(self, n: int = 5) -> list[tuple[str, int]]:
        return self.frames.most_common(n)


class StackSampler:
    """Dumps every pid ``pids()`` returns, one after the other, every ``every_s``, from a daemon thread."""

    def __init__(
        self, pids: Callable[[], list[int]], every_s: float = EVERY_S, exe: str | None = None
    ) -> None:
        self.exe = exe or shutil.which("py-spy")
        self.stacks: dict[int, RankStacks] = {}
        self.note: str | None = None
        self._pids = pids
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ckptprof-watch-py-spy", daemon=True)
        if self.exe is None:
            self.note = "--py-spy: py-spy is not installed (pip install 'ckptprof[spy]'); stacks left out"

    def start(self) -> None:
        if self.exe is not None:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=DUMP_TIMEOUT_S + 1)

    def dump(self, pid: int) -> None:
        assert self.exe is not None
        seen = self.stacks.setdefault(pid, RankStacks())
        if seen.error is not None:
            return
        try:
            done = subprocess.run(
                [self.exe, "dump", "--nonblocking", "--pid", str(pid)],
                capture_output=True,
                text=True,
                timeout=DUMP_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return
        if done.returncode != 0:
            err = done.stderr + done.stdout
            if "Permission denied" in err or "Operation not permitted" in err:
                seen.error = ptrace_hint()
                self.note = self.note or seen.error
            return  # the process may have just ended: the next dump says
        threads = parse_dump(done.stdout)
        if threads and threads[0].frames:
            seen.dumps += 1
            seen.last = threads[0].frames[0]
            seen.frames[seen.last] += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._pids():
                if self._stop.is_set():
                    break
                self.dump(pid)
            self._stop.wait(self._every_s)

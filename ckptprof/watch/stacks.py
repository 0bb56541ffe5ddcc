"""Optional (``watch --py-spy``): each rank's Python stack now and then, read with ``py-spy dump --nonblocking`` -
py-spy reads the process's memory without stopping it, so the server never pauses for it. One dump per rank every
few seconds: a dump costs py-spy tens of milliseconds of CPU, so sampling faster would cost the load what the
/proc sampling saves it.

Each thread's stack in each dump is classified into read / deserialize / copy / other by the run's own py-spy
classifier (ckptprof.analysis.stacks.phase_of: the innermost frame that names a loading step decides, by function name
and file, so a real server's frames count - SGLang's and vLLM's weight iterators, weight_loaders, parameter loaders
and load_weights plumbing, safetensors' and torch's Python layers - as well as ckptprof's own; its ``h2d`` is called
``copy`` here, since a server's copy need not be host to device); a stack that names none is counted apart
(``unclassified``: a thread that is not loading), as the run's classifier leaves such samples out.

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

from ckptprof.analysis.stacks import phase_of as run_phase
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


# The run's classifier's phases, in watch's words.
CLASS_NAMES = {"read": "read", "deserialize": "deserialize", "h2d": "copy", "other": "other"}
CLASSES = ("read", "deserialize", "copy", "other")


def frame_name(frame: str) -> str:
    """``load (safetensors/torch.py:386)`` -> ``load``; ``Layer.weight_loader (x.py:7)`` -> ``Layer.weight_loader``."""
    return frame.split(" (", 1)[0].strip()


def frame_file(frame: str) -> str:
    """``load (safetensors/torch.py:386)`` -> ``safetensors/torch.py`` (py-spy writes the path from the package
    down, or whole with --full-filenames); ``""`` where the line names none."""
    if " (" not in frame or not frame.endswith(")"):
        return ""
    where = frame.rsplit(" (", 1)[1][:-1]
    head, sep, line = where.rpartition(":")
    return head if sep and line.isdigit() else where


def classify(stack: ThreadStack) -> str | None:
    """read / deserialize / copy / other by the run's py-spy classifier, or None where no frame names a step."""
    root_first = list(reversed(stack.frames))  # the rule reads root to leaf; a dump lists the innermost first
    phase = run_phase([frame_name(f) for f in root_first], [frame_file(f) for f in root_first])
    return None if phase is None else CLASS_NAMES.get(phase, "other")


@dataclass
class RankStacks:
    dumps: int = 0
    frames: Counter[str] = field(default_factory=Counter)  # the main thread's innermost frame, per dump
    last: str | None = None
    error: str | None = None
    classes: Counter[str] = field(default_factory=Counter)  # thread stacks per class, over all dumps
    unclassified: int = 0  # thread stacks no frame of which names a loading step

    def top(self, n: int = 5) -> list[tuple[str, int]]:
        return self.frames.most_common(n)

    def add(self, threads: list[ThreadStack]) -> None:
        """One dump's threads: the main thread's innermost frame counted, every thread's stack classified."""
        if not threads or not threads[0].frames:
            return
        self.dumps += 1
        self.last = threads[0].frames[0]
        self.frames[self.last] += 1
        for thread in threads:
            if not thread.frames:
                continue
            cls = classify(thread)
            if cls is None:
                self.unclassified += 1
            else:
                self.classes[cls] += 1

    def shares(self) -> dict[str, float]:
        """Each class's share of the classified thread stacks (the unclassified left out, as the run does)."""
        total = sum(self.classes.values())
        return {c: round(self.classes[c] / total, 3) for c in CLASSES if self.classes[c]} if total else {}


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
        seen.add(parse_dump(done.stdout))

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._pids():
                if self._stop.is_set():
                    break
                self.dump(pid)
            self._stop.wait(self._every_s)

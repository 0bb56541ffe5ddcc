"""Optional (``watch --py-spy``): each rank's Python stack now and then, read with ``py-spy dump --nonblocking`` -
py-spy reads the process's memory without stopping it, so the server never pauses for it. One dump per rank every
few seconds: a dump costs py-spy tens of milliseconds of CPU, so sampling faster would cost the load what the
/proc sampling saves it. The dump asks for whole paths (--full-filenames) so that each frame's source line can be
read (through /proc/PID/root); paths are then shortened as py-spy itself would, and a py-spy without the flag is
asked without it.

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

import linecache
import os
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
    frames: tuple[str, ...]  # innermost first: "load (safetensors/torch.py:386)"
    lines: tuple[str, ...] = ()  # the source text of each frame's current line, where it could be read


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


def frame_line(frame: str) -> int:
    """``load (safetensors/torch.py:386)`` -> 386; 0 where the line names none."""
    where = frame.rsplit(" (", 1)[-1].rstrip(")")
    number = where.rpartition(":")[2]
    return int(number) if number.isdigit() else 0


def short_file(path: str, root: str = "") -> str:
    """A whole path as py-spy writes it without --full-filenames: from the outermost of the folders above it that
    hold an __init__.py (SGLang 0.5.23's sglang/srt/layers/linear.py is "linear.py": srt/ and layers/ have none).
    ``root`` prefixes the checks (/proc/PID/root: the server may run in a container)."""
    if not path.startswith("/"):
        return path  # "<frozen importlib._bootstrap>", or already short
    if not os.path.exists(f"{root}{path}"):
        return path  # not visible from here: the whole path (the rule reads those too)
    top = os.path.dirname(path)
    while top not in ("/", "") and os.path.exists(f"{root}{top}/__init__.py"):
        top = os.path.dirname(top)
    return os.path.relpath(path, top) if top else path


def shorten(threads: list[ThreadStack], root: str = "") -> list[ThreadStack]:
    """Threads of a ``--full-filenames`` dump with each frame's file shortened as py-spy would (what is shown and
    kept), and the source text of each frame's line read from the whole path (what the rule looks at: a whole-file
    read() on an iterator's line is the read step)."""
    out = []
    for t in threads:
        frames, lines = [], []
        for f in t.frames:
            file, number = frame_file(f), frame_line(f)
            # Through the server's root where this process may look there, else as the path reads here.
            at = root if root and os.path.exists(f"{root}{file}") else ""
            text = linecache.getline(f"{at}{file}", number).strip() if file.startswith("/") and number else ""
            frames.append(f.replace(f"({file}:", f"({short_file(file, at)}:", 1) if file else f)
            lines.append(text)
        out.append(ThreadStack(t.tid, t.state, t.name, tuple(frames), tuple(lines)))
    return out


def classify(stack: ThreadStack) -> str | None:
    """read / deserialize / copy / other by the run's py-spy classifier, or None where no frame names a step."""
    root_first = list(reversed(stack.frames))  # the rule reads root to leaf; a dump lists the innermost first
    lines = list(reversed(stack.lines)) if stack.lines else None
    phase = run_phase([frame_name(f) for f in root_first], [frame_file(f) for f in root_first], lines)
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
        self._full_filenames = True
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
        # Whole paths, so that each frame's source line can be read (the rule tells a whole-file read() on an
        # iterator's line by it); they are shortened back as py-spy would before anything is kept.
        full = ["--full-filenames"] if self._full_filenames else []
        try:
            done = subprocess.run(
                [self.exe, "dump", "--nonblocking", *full, "--pid", str(pid)],
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
            elif full and "full-filenames" in err:  # a py-spy older than the flag: short paths, no lines
                self._full_filenames = False
            return  # the process may have just ended: the next dump says
        threads = parse_dump(done.stdout)
        seen.add(shorten(threads, f"/proc/{pid}/root") if full else threads)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self._pids():
                if self._stop.is_set():
                    break
                self.dump(pid)
            self._stop.wait(self._every_s)

"""Record every rank with py-spy while it replays: one speedscope profile per rank, saved beside the session.

py-spy attaches to a running process with ptrace. Where that is not allowed (an unprivileged container, Yama's
ptrace_scope >= 2) it says so on stderr and exits; we turn that into one line telling what to enable.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ckptprof.errors import CkptprofError

RATE_HZ = 100


class PySpyUnavailable(CkptprofError):
    pass


def ptrace_hint() -> str:
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    value = scope.read_text().strip() if scope.exists() else "?"
    return (
        f"py-spy could not attach (ptrace not permitted; kernel.yama.ptrace_scope={value}): run as root, or "
        "`sudo sysctl kernel.yama.ptrace_scope=0`, or start the container with --cap-add SYS_PTRACE"
    )


def check_available() -> str:
    exe = shutil.which("py-spy")
    if exe is None:
        raise PySpyUnavailable("--py-spy: py-spy is not installed (pip install 'ckptprof[spy]')")
    return exe


@dataclass
class PySpySession:
    """py-spy processes attached to rank processes, writing speedscope files into ``out_dir``."""

    out_dir: Path
    native: bool = True
    exe: str = field(default_factory=check_available)
    procs: dict[int, tuple[subprocess.Popen[bytes], Path]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)

    def attach(self, rank: int, pid: int) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        out = self.out_dir / f"py-spy-rank{rank}.speedscope.json"
        cmd = [self.exe, "record", "--pid", str(pid), "--format", "speedscope", "--output", str(out)]
        # --idle: a thread blocked in a page fault or a read counts. --native (C/C++ frames such as the copy
        # kernels) needs py-spy to pause the rank for each sample; without it, --nonblocking avoids the pauses.
        cmd += ["--idle", "--rate", str(RATE_HZ), "--native" if self.native else "--nonblocking"]
        self.procs[rank] = (
            subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True),
            out,
        )

    def finish(self, timeout: float = 20.0) -> dict[int, str]:
        """Wait for every recorder (each stops when its rank exits); returns rank -> profile path."""
        paths: dict[int, str] = {}
        for rank, (proc, out) in sorted(self.procs.items()):
            try:
                _, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            text = err.decode(errors="replace")
            if out.exists() and out.stat().st_size > 0:
                paths[rank] = str(out)
            elif "Permission denied" in text or "Operation not permitted" in text:
                self.errors[rank] = ptrace_hint()
            elif self.native and "native" in text.lower():
                self.errors[rank] = f"py-spy --native is not supported here: {text.strip().splitlines()[-1]}"
            else:
                last = text.strip().splitlines()[-1] if text.strip() else f"exit code {proc.returncode}"
                self.errors[rank] = f"py-spy recorded nothing for rank {rank}: {last}"
        return paths

    def stop(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # py-spy writes its profile on Ctrl-C, not on SIGTERM


def native_supported() -> bool:
    """py-spy's --native needs libunwind support in its build: x86_64 and aarch64 Linux."""
    return os.uname().machine in ("x86_64", "aarch64")

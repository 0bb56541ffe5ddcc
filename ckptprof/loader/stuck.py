"""What a rank that stopped making progress is doing, read from outside it.

A rank stuck on a network file system that stopped answering waits in the kernel, often uninterruptibly (a FUSE
request already handed to its daemon is waited out even after SIGKILL). Its own code cannot say where it is, so
the parent reads it: each thread's kernel wait (``/proc/PID/task/TID/wchan`` and ``stack``), the system call it is
in with the file and byte range that call names (``syscall``, the fd's link and ``fdinfo``), the mappings of the
checkpoint's files, and the Python stack (``py-spy dump --nonblocking``: the blocking dump first stops the process,
which a process in an uninterruptible wait never does, so it returns nothing).

Nothing here touches the checkpoint's files (a stat on a frozen mount would hang the parent too), and every read
of the rank's /proc entries runs under a deadline: some of them take the rank's memory-map lock, which a stuck
fault can hold.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

from ckptprof.fstypes import is_network_fs
from ckptprof.results import StuckRank

# System call numbers by machine: the calls a loading rank makes on its files, and which argument names the file.
_SYSCALLS: dict[str, dict[int, str]] = {
    "x86_64": {
        0: "read", 2: "open", 3: "close", 4: "stat", 5: "fstat", 6: "lstat", 9: "mmap", 17: "pread64",
        19: "readv", 27: "mincore", 28: "madvise", 217: "getdents64", 221: "fadvise64", 257: "openat",
        262: "newfstatat", 295: "preadv", 332: "statx",
    },
    "aarch64": {
        56: "openat", 57: "close", 61: "getdents64", 63: "read", 65: "readv", 67: "pread64", 69: "preadv",
        79: "newfstatat", 80: "fstat", 222: "mmap", 223: "fadvise64", 232: "mincore", 233: "madvise", 291: "statx",
    },
}  # fmt: skip
# Which argument is the file descriptor, or the path pointer.
_FD_ARG = {"read": 0, "pread64": 0, "readv": 0, "preadv": 0, "fstat": 0, "close": 0, "getdents64": 0,
           "fadvise64": 0, "mmap": 4}  # fmt: skip
_PATH_ARG = {"open": 0, "stat": 0, "lstat": 0, "openat": 1, "newfstatat": 1, "statx": 1}
_PHASES = {
    "read": "read", "pread64": "read", "readv": "read", "preadv": "read", "open": "open", "openat": "open",
    "stat": "stat", "lstat": "stat", "newfstatat": "stat", "statx": "stat", "fstat": "stat", "mmap": "mmap",
    "madvise": "populating a mapping (madvise)", "mincore": "page-cache residency (mincore)",
    "fadvise64": "fadvise", "close": "close", "getdents64": "listing a directory",
}  # fmt: skip
# Kernel functions whose wait is a file system's: the thread of a rank that waits there is the stuck one.
_FS_WAITS = (
    "fuse",
    "nfs",
    "rpc",
    "folio",
    "page",
    "filemap",
    "request_wait",
    "cifs",
    "smb",
    "ceph",
    "9p",
    "p9",
)
_STATES = {"D": "D (uninterruptible wait)", "S": "S (sleeping)", "R": "R (running)", "T": "T (stopped)",
           "t": "t (traced)", "Z": "Z (zombie)"}  # fmt: skip
# py-spy may itself hang on a rank whose memory-map lock is held: it gets this long, then is left.
PY_SPY_TIMEOUT_S = 8.0
PROC_TIMEOUT_S = 3.0
_MAX_KERNEL_FRAMES = 16
_MAX_PY_FRAMES = 24


@dataclass
class _Thread:
    tid: int
    state: str = "?"
    wchan: str | None = None
    stack: list[str] = field(default_factory=list)
    syscall: str | None = None
    args: list[int] = field(default_factory=list)
    in_fault: bool = False

    @property
    def fs_wait(self) -> bool:
        text = " ".join([self.wchan or "", *self.stack]).lower()
        return any(word in text for word in _FS_WAITS)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _thread(pid: int, tid: int, table: dict[int, str]) -> _Thread:
    base = f"/proc/{pid}/task/{tid}"
    t = _Thread(tid)
    stat = _read(f"{base}/stat") or ""
    # "tid (comm) S ...": the comm may hold spaces and parentheses, the state follows the last ')'.
    tail = stat.rsplit(")", 1)[-1].split()
    t.state = tail[0] if tail else "?"
    wchan = (_read(f"{base}/wchan") or "").strip()
    t.wchan = wchan if wchan and wchan != "0" else None
    stack = _read(f"{base}/stack") or ""  # root only; elsewhere empty
    t.stack = [_frame_name(line) for line in stack.splitlines() if line.strip()][:_MAX_KERNEL_FRAMES]
    syscall = (_read(f"{base}/syscall") or "").split()
    if syscall and syscall[0].lstrip("-").isdigit():
        nr = int(syscall[0])
        if nr < 0:
            t.in_fault = t.state == "D"  # blocked outside any system call: a page fault
        else:
            t.syscall = table.get(nr, f"syscall {nr}")
            t.args = [int(a, 16) for a in syscall[1:7]]
    return t


def _frame_name(line: str) -> str:
    """'[<0>] request_wait_answer+0x1d8/0x280' -> 'request_wait_answer'."""
    text = line.split("]", 1)[-1].strip()
    return text.split("+", 1)[0]


def _fd_path(pid: int, fd: int) -> str | None:
    try:
        return os.readlink(
            f"/proc/{pid}/fd/{fd}"
        )  # the kernel's name for it: no call reaches the file system
    except OSError:
        return None


def _fd_pos(pid: int, fd: int) -> int | None:
    text = _read(f"/proc/{pid}/fdinfo/{fd}") or ""
    found = re.search(r"^pos:\s*(\d+)", text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _user_string(pid: int, address: int) -> str | None:
    """A NUL-terminated path at ``address`` in the rank's memory (the path argument of an open or a stat)."""
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(address)
            raw = mem.read(4096)
    except (OSError, ValueError, OverflowError):
        return None
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace") or None


def _mapped_files(pid: int, wanted: set[str]) -> list[str]:
    """The checkpoint files the rank has mapped (a page fault is in one of them)."""
    out: list[str] = []
    for line in (_read(f"/proc/{pid}/maps") or "").splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5] in wanted and parts[5] not in out:
            out.append(parts[5])
    return out


def _where(
    pid: int, t: _Thread, shard_paths: set[str]
) -> tuple[str | None, int | None, int | None, str | None]:
    """(file, offset, length, how the file is known) for the thread's call."""
    if t.syscall in _FD_ARG and t.args:
        fd = t.args[_FD_ARG[t.syscall]]
        path = _fd_path(pid, fd)
        if t.syscall == "pread64":
            return path, t.args[3], t.args[2], "system call"
        if t.syscall == "read":
            return path, _fd_pos(pid, fd), t.args[2], "system call"
        if t.syscall in ("preadv", "readv"):
            return path, t.args[3] if t.syscall == "preadv" else _fd_pos(pid, fd), None, "system call"
        if t.syscall == "mmap":
            return path, t.args[5], t.args[1], "system call"
        return path, None, None, "system call"
    if t.syscall in _PATH_ARG and t.args:
        return _user_string(pid, t.args[_PATH_ARG[t.syscall]]), None, None, "system call"
    if t.in_fault or t.syscall in ("madvise", "mincore"):
        mapped = _mapped_files(pid, shard_paths)
        if len(mapped) == 1:
            return mapped[0], None, None, "its only mapped shard"
        if mapped:
            return (
                None,
                None,
                None,
                f"one of its mapped shards: {', '.join(os.path.basename(m) for m in mapped)}",
            )
    return None, None, None, None


def python_stack(pid: int, timeout: float = PY_SPY_TIMEOUT_S) -> tuple[list[str], str | None]:
    """The rank's Python frames, innermost first, from ``py-spy dump --nonblocking``; (frames, why none)."""
    exe = shutil.which("py-spy")
    if exe is None:
        return [], "py-spy is not installed (pip install py-spy)"
    try:
        proc = subprocess.Popen(
            [exe, "dump", "--nonblocking", "--pid", str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except OSError as exc:
        return [], f"py-spy could not start: {exc.strerror}"
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # not waited for: a py-spy stuck on the rank's memory would hang this process too
        return [], f"py-spy did not answer within {timeout:g} s"
    frames = _py_frames(out)
    if not frames:
        said = (err or out).strip().splitlines()
        return [], f"py-spy read no frame ({said[-1] if said else 'no output'})"
    return frames, None


def _py_frames(out: str) -> list[str]:
    """The first thread that holds a ckptprof or torch frame (the loading one), else the first thread."""
    threads: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith("Thread "):
            threads.append([])
        elif line.startswith("    ") and threads:
            threads[-1].append(line.strip())
    loading = [t for t in threads if any("ckptprof" in f or "safetensors" in f for f in t)]
    chosen = (loading or threads or [[]])[0]
    return chosen[:_MAX_PY_FRAMES]


def mount_of(path: str) -> tuple[str | None, str | None]:
    """(mount point, type) of the mount whose point is the longest prefix of ``path``, from the mount table
    alone (never a stat or a realpath, which would wait on a frozen mount)."""
    norm = os.path.normpath(path)
    best: tuple[str | None, str | None] = (None, None)
    best_len = -1
    try:
        partitions = psutil.disk_partitions(all=True)
    except OSError:
        return best
    for part in partitions:
        mount = part.mountpoint.rstrip("/") or "/"
        under = norm.startswith("/") if mount == "/" else (norm == mount or norm.startswith(mount + "/"))
        if under and len(mount) >= best_len:
            best, best_len = (part.mountpoint, part.fstype or None), len(mount)
    return best


def _inspect(pid: int, shard_paths: set[str], fallback_file: str | None, with_python: bool) -> StuckRank:
    table = _SYSCALLS.get(platform.machine(), {})
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return StuckRank(pid=pid, state="gone")
    threads = [_thread(pid, tid, table) for tid in tids]
    # The stuck thread: one waiting on a file system, in an uninterruptible wait first, else the main thread.
    ranked = sorted(
        threads, key=lambda t: (not t.fs_wait, t.state != "D", t.syscall is None and not t.in_fault)
    )
    t = ranked[0]
    file, offset, length, source = _where(pid, t, shard_paths)
    if file is None and fallback_file is not None:
        file, source = fallback_file, source or "the next shard it had not reported"
    phase = "page fault in a mapped file" if t.in_fault else _PHASES.get(t.syscall or "", t.syscall)
    mount_point, fs_type = mount_of(file) if file else (None, None)
    frames, why = python_stack(pid) if with_python else ([], None)
    return StuckRank(
        pid=pid,
        tid=t.tid,
        state=_STATES.get(t.state, t.state),
        phase=phase,
        syscall=t.syscall,
        file=file,
        file_source=source,
        offset=offset,
        length=length,
        wchan=t.wchan,
        kernel_stack=tuple(t.stack),
        python_stack=tuple(frames),
        python_stack_note=why,
        mount_point=mount_point,
        fs_type=fs_type,
        threads_in_kernel_wait=sum(1 for x in threads if x.state == "D"),
    )


def inspect(
    pid: int,
    shard_paths: Iterable[str] = (),
    fallback_file: str | None = None,
    with_python: bool = True,
    timeout: float = PY_SPY_TIMEOUT_S + PROC_TIMEOUT_S,
) -> StuckRank:
    """Where rank process ``pid`` is stuck; never blocks for longer than ``timeout`` (what was read by then is
    lost: a rank whose /proc entries hang is reported with its pid alone)."""
    box: list[StuckRank] = []
    paths = set(shard_paths)
    worker = threading.Thread(
        target=lambda: box.append(_inspect(pid, paths, fallback_file, with_python)),
        name=f"ckptprof-inspect-{pid}",
        daemon=True,  # one that hangs on the rank's locks must not keep ckptprof from exiting
    )
    began = time.monotonic()
    worker.start()
    worker.join(timeout)
    if box:
        return box[0]
    return StuckRank(
        pid=pid,
        state="unknown",
        python_stack_note=f"its /proc entries did not answer within {time.monotonic() - began:.0f} s",
    )


def state_now(pid: int, tid: int | None) -> str | None:
    """The thread's state now ("D (uninterruptible wait)" ...); None once it is gone."""
    stat = _read(f"/proc/{pid}/task/{tid or pid}/stat")
    if stat is None:
        return None
    tail = stat.rsplit(")", 1)[-1].split()
    return _STATES.get(tail[0], tail[0]) if tail else None


def in_kernel_wait(pid: int) -> bool:
    """Whether any thread of ``pid`` sits in an uninterruptible wait (state D): no signal ends it."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        stat = _read(f"/proc/{pid}/task/{tid}/stat") or ""
        tail = stat.rsplit(")", 1)[-1].split()
        if tail and tail[0] == "D":
            return True
    return False


def network_mounts(paths: Iterable[str]) -> list[tuple[str, str]]:
    """(mount point, type) of each network or FUSE mount under ``paths``, once each."""
    out: list[tuple[str, str]] = []
    for p in paths:
        mount, fs_type = mount_of(p)
        if mount and fs_type and is_network_fs(fs_type) and (mount, fs_type) not in out:
            out.append((mount, fs_type))
    return out

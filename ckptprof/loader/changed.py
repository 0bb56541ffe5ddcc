"""Shard files that changed under a running replay: truncated, replaced by a shorter or longer file, or removed.

A memory-mapped file that shrinks leaves its mapping pointing past the new end: the kernel answers a touch of
those pages with SIGBUS (the rank dies, naming nothing) and ``madvise`` with EFAULT (a raw errno). A file
rewritten with other tensors (larger, or the same size) no longer fits the plan made from its old header: torch
fails the copy with a raw shape mismatch. None of these says anything a user can act on, so whoever sees the
failure - the rank for a shard error, the parent for a rank killed by a signal - compares each planned shard's
size and modification time with what is on disk now and names the file.

A network file system that loses its server is not a changed file: a FUSE mount whose daemon exits (sshfs when the
connection drops) goes away, and its paths then name the empty directory below it (ENOENT, which would read as a
removed file), while descriptors opened before answer ENOTCONN; NFS answers ESTALE, EIO or ETIMEDOUT. Those are
told first, with the errno and what it means for that file system.
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass

from ckptprof.fstypes import is_network_fs
from ckptprof.loader.plan import ModelPlan, ReplayPlan
from ckptprof.loader.stuck import mount_of
from ckptprof.units import human_bytes

# What an errno means on a network file system, in words a user can act on.
_NETWORK_ERRNOS = {
    errno.ENOTCONN: "the connection to the server is gone (the file system's daemon exited or was disconnected)",
    errno.ECONNABORTED: "the connection to the server was dropped",
    errno.ECONNRESET: "the connection to the server was reset",
    errno.EIO: "the server or the connection to it failed the read (an I/O error passed on by the file system)",
    errno.ESTALE: "the file handle went stale (the server restarted or re-exported the file system)",
    errno.ETIMEDOUT: "the server did not answer in time",
    errno.EHOSTDOWN: "the server is down",
    errno.EHOSTUNREACH: "the server cannot be reached",
    errno.ENETUNREACH: "the server's network cannot be reached",
    errno.ENODEV: "the file system is gone",
}
# The mounts under each model when the run started (model path -> (mount point, type)): a mount that went away
# is named by where it was.
_MOUNTS_AT_START: dict[str, tuple[str | None, str | None]] = {}


@dataclass(frozen=True)
class ChangedFile:
    path: str
    planned_bytes: int
    now_bytes: int | None  # None: the file is gone
    planned_mtime_ns: int | None = None  # None: not known (the plan could not stat it)
    now_mtime_ns: int | None = None

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def shrunk(self) -> bool:
        """Gone or shorter than planned: the only changes that leave a mapping past the end (SIGBUS, EFAULT)."""
        return self.now_bytes is None or self.now_bytes < self.planned_bytes

    def cause(self) -> str:
        """'the file shrank while it was read (16.00 MB when the run started, 8.00 MB now)'."""
        if self.now_bytes is None:
            return f"the file was removed while it was read ({human_bytes(self.planned_bytes)} when the run started)"
        if self.shrunk:
            return (
                f"the file shrank while it was read ({human_bytes(self.planned_bytes)} when the run started, "
                f"{human_bytes(self.now_bytes)} now)"
            )
        return (
            f"the file changed since the run started ({human_bytes(self.planned_bytes)}, "
            f"modified {_when(self.planned_mtime_ns)} when the run started; {human_bytes(self.now_bytes)}, "
            f"modified {_when(self.now_mtime_ns)} now)"
        )


def _when(mtime_ns: int | None) -> str:
    """A local time to the millisecond: two writes within a second must still read as different."""
    if mtime_ns is None:
        return "at an unknown time"
    seconds, ns = divmod(mtime_ns, 10**9)
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(seconds))}.{ns // 10**6:03d}"


def changed_file(path: str, planned_bytes: int, planned_mtime_ns: int | None = None) -> ChangedFile | None:
    """The file if it is now gone, of another size, or (mtime known) rewritten; None while it is as planned."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ChangedFile(path, planned_bytes, None, planned_mtime_ns)
    except OSError:
        return None  # unreadable now for another reason: the original error says more than a guess
    rewritten = planned_mtime_ns is not None and st.st_mtime_ns != planned_mtime_ns
    if st.st_size != planned_bytes or rewritten:
        return ChangedFile(path, planned_bytes, st.st_size, planned_mtime_ns, st.st_mtime_ns)
    return None


def changed_files(plan: ReplayPlan) -> list[ChangedFile]:
    """Every planned shard that shrank, vanished or was rewritten since the plan was made, in plan order."""
    out: list[ChangedFile] = []
    for model in plan.models:
        for shard in model.shards:
            if shard.error is not None:
                continue  # unusable from the start (missing, invalid): nothing changed under the run
            changed = changed_file(shard.path, shard.bytes, shard.mtime_ns)
            if changed is not None:
                out.append(changed)
    return out


def remember_mounts(plan: ReplayPlan) -> None:
    """Note the mount under each model now, while it is there (read from the mount table: no call on the files)."""
    for model in plan.models:
        _MOUNTS_AT_START.setdefault(model.path, mount_of(model.path))


def errno_in(error: str) -> int | None:
    """The errno a message carries: Python's '[Errno 107] ...' or Rust's '... (os error 107)'."""
    found = re.search(r"\[Errno (\d+)\]|\(os error (\d+)\)", error)
    return int(found.group(1) or found.group(2)) if found else None


def _errno_name(code: int) -> str:
    return f"{errno.errorcode.get(code, f'errno {code}')} ({os.strerror(code)})"


def lost_mount(model: ModelPlan, error: str) -> str | None:
    """The cause when a model's network file system went away or stopped serving it, else None. ``error`` is what
    the read met: a message carrying an errno, or "SIGBUS" for a mapped page that could not be read."""
    if not is_network_fs(model.fs_type):
        return None
    code = errno_in(error)
    if code is None and "SIGBUS" in error:
        code = _errno_of_path(model.path)  # a signal carries no errno: the mount's own answer now does
    was_point, _ = _MOUNTS_AT_START.get(model.path, (None, None))
    now_point, now_type = mount_of(model.path)
    if now_type is not None and now_type != model.fs_type:
        where = f"at {was_point}" if was_point else f"holding {model.path}"
        return (
            f"the {model.fs_type} mount {where} went away while it was read: its server stopped or the connection "
            f"to it dropped ({model.path} now lies on {now_type} at {now_point}{_met(code, error)})"
        )
    if code in _NETWORK_ERRNOS:
        return f"{_errno_name(code)} from the {model.fs_type} mount at {now_point}: {_NETWORK_ERRNOS[code]}"
    return None


def _met(code: int | None, error: str) -> str:
    """What the read met, said as what it means once the mount is gone."""
    if code in (
        errno.ENOENT,
        errno.EFAULT,
    ):  # the path now names the directory below; the mapping lost its pages
        return f"; {_errno_name(code)} here is the mount gone, not a missing file or a bad address"
    if code in _NETWORK_ERRNOS:
        return f"; the read met {_errno_name(code)}: {_NETWORK_ERRNOS[code]}"
    if "SIGBUS" in error:
        return "; SIGBUS here is a mapped page the vanished mount could not supply"
    return ""


def _errno_of_path(path: str) -> int | None:
    """The network errno a stat of ``path`` meets now (only asked after a SIGBUS: a read failed, it did not hang)."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno if exc.errno in _NETWORK_ERRNOS else None
    return None


def explain_shard_error(plan: ReplayPlan, file: str, error: str) -> str:
    """A failed shard's error, led by the cause when its network file system went away, or when that shard's file
    shrank, vanished or was rewritten."""
    for model in plan.models:
        for shard in model.shards:
            if shard.name == file and shard.error is None:
                lost = lost_mount(model, error)
                if lost is not None:
                    return f"{lost}: {error}"
                changed = changed_file(shard.path, shard.bytes, shard.mtime_ns)
                if changed is not None and not error.startswith("the file "):
                    return f"{changed.cause()}: {error}"
    return error


def explain_signal_death(plan: ReplayPlan, reason: str, signal_name: str) -> str:
    """A rank killed by SIGBUS: name the shard whose file shrank (the usual cause), or say what SIGBUS means."""
    if signal_name != "SIGBUS":
        return reason
    lost = next((cause for m in plan.models if (cause := lost_mount(m, signal_name)) is not None), None)
    if lost is not None:  # a mapping of a file on a mount that went away: the fault is the mount's
        return f"{reason} reading a memory-mapped shard: {lost}"
    # A file that grew or was rewritten in place leaves no mapping past its end: not a cause of SIGBUS.
    changed = [c for c in changed_files(plan) if c.shrunk]
    if changed:
        files = "; ".join(f"{c.path}: {c.cause()}" for c in changed[:3])
        more = f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""
        return f"{reason} reading a memory-mapped shard: {files}{more}"
    return (
        f"{reason}: a memory-mapped page could not be read (a storage I/O error, or a shard truncated or "
        "replaced while it was mapped and restored since)"
    )

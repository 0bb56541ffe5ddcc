"""A real network file system for the tests: a private sshd and an sshfs (FUSE) mount of a temp directory.

``sshfs_mount`` starts sshd with its own host key and authorized key, mounts an empty source directory over
sshfs and yields an :class:`SshfsMount` (``mount, source = sshfs_mount`` also works). Put files in
``source`` and read them through ``mount``. As root, the server runs in a network namespace behind a veth pair
whose server side is capped with a tbf qdisc (``CKPTPROF_SSHFS_RATE_MBIT``, default 800 Mbit/s = 100 MB/s,
0 = no cap), so the mount behaves like a slow network file system and its throughput is stable; where the
namespace cannot be made the server listens on loopback, uncapped. ``capped_sshfs_mount`` insists on the cap,
for tests that compare rates within a tolerance; ``independent_read(paths, direct)`` reads files with dd
(not ckptprof's code) and returns GB/s, to compare a probe against.

When sshfs, sshd or FUSE is missing the tests skip, except with CI=true, where they fail: CI must run them.
"""

from __future__ import annotations

import contextlib
import getpass
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import psutil
import pytest

DEFAULT_RATE_MBIT = 800
_START_TIMEOUT_S = 15.0


@dataclass
class SshfsMount:
    mount: Path  # read through here (fuse.sshfs)
    source: Path  # the server's directory behind the mount (local disk)
    rate_cap_bytes_per_s: float | None  # the tbf cap on the server's link, None when uncapped
    how: str  # "netns+tbf N mbit" or "loopback" (and why), for test messages
    server_pid: int | None = None  # sshd, whose session processes serve the mount

    def __iter__(self) -> Iterator[Path]:
        yield self.mount
        yield self.source

    def server_processes(self) -> list[psutil.Process]:
        """sshd and every process it started (the session that serves this mount's sftp requests)."""
        if self.server_pid is None:
            return []
        try:
            server = psutil.Process(self.server_pid)
            return [server, *server.children(recursive=True)]
        except psutil.Error:
            return []

    def _signal_server(self, signum: int) -> None:
        for proc in self.server_processes():
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signum)

    def freeze_server(self) -> None:
        """SIGSTOP the server: the mount stays, and every request on it waits for an answer that does not come.
        The fixture's teardown continues it (``thaw_server``) before unmounting, so no reader stays stuck."""
        self._signal_server(signal.SIGSTOP)

    def thaw_server(self) -> None:
        self._signal_server(signal.SIGCONT)

    def kill_server(self) -> None:
        """SIGKILL the server: sshfs loses its connection, exits, and the mount goes away under its readers."""
        self._signal_server(signal.SIGKILL)


def unavailable(reason: str) -> NoReturn:
    """Skip locally, fail in CI (CI=true): the sshfs tests are required there."""
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"sshfs test cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _tool(name: str, *extra_dirs: str) -> str:
    found = shutil.which(name) or next(
        (str(Path(d) / name) for d in extra_dirs if (Path(d) / name).exists()), None
    )
    if not found:
        unavailable(f"{name} not found (apt-get install sshfs openssh-server)")
    return found


def _check_fuse() -> None:
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
    except OSError as exc:
        unavailable(f"/dev/fuse is not usable ({exc.strerror}): FUSE is needed for sshfs")
    else:
        os.close(fd)


def _scratch_dir(prefix: str) -> Path:
    # /var/tmp is on the machine's disk where /tmp may be tmpfs: the served files should live on real storage.
    base = "/var/tmp" if os.access("/var/tmp", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=30, check=False)


@dataclass
class _Netns:
    name: str
    host_if: str
    server_ip: str


_mount_counter = itertools.count()


def _make_netns(rate_mbit: int) -> tuple[_Netns | None, str]:
    """A namespace for the server, a veth pair to it, and a tbf cap on the server's sending side."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return None, "loopback (netns needs root, ip and tc)"
    # Names and addresses unique per mount, not just per process: a deleted namespace's veth pair goes
    # away asynchronously, so reusing a name right after teardown can meet "File exists".
    k = next(_mount_counter)
    tag = f"{os.getpid() % 100000}x{k}"
    name, host_if, ns_if = f"ckpns{tag}", f"ckph{tag}", f"ckpn{tag}"
    octet3, octet4 = 1 + os.getpid() % 250, 4 * (k % 63)
    host_ip, server_ip = f"10.213.{octet3}.{octet4 + 1}", f"10.213.{octet3}.{octet4 + 2}"
    steps = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if],
        ["ip", "link", "set", ns_if, "netns", name],
        ["ip", "addr", "add", f"{host_ip}/30", "dev", host_if],
        ["ip", "link", "set", host_if, "up"],
        ["ip", "-n", name, "addr", "add", f"{server_ip}/30", "dev", ns_if],
        ["ip", "-n", name, "link", "set", ns_if, "up"],
        ["ip", "-n", name, "link", "set", "lo", "up"],
        # burst >= rate/HZ and a generous latency, else tbf drops packets and the rate goes erratic.
        ["tc", "-n", name, "qdisc", "add", "dev", ns_if, "root", "tbf", "rate", f"{rate_mbit}mbit",
         "burst", "1mb", "latency", "100ms"],
    ]  # fmt: skip
    for cmd in steps:
        res = _run(cmd)
        if res.returncode != 0:
            _run(["ip", "netns", "del", name])
            _run(["ip", "link", "del", host_if])
            return None, f"loopback (netns setup failed: {' '.join(cmd)}: {res.stderr.strip()})"
    return _Netns(name, host_if, server_ip), f"netns+tbf {rate_mbit} mbit"


def _write_sshd_config(work: Path, address: str, port: int) -> Path:
    config = work / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"ListenAddress {address}",
                f"Port {port}",
                f"HostKey {work / 'host_key'}",
                f"AuthorizedKeysFile {work / 'authorized_keys'}",
                f"PidFile {work / 'sshd.pid'}",
                "StrictModes no",  # the temp dir's modes would otherwise be refused
                "UsePAM no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "Subsystem sftp internal-sftp",
                "LogLevel ERROR",
                "",
            ]
        )
    )
    return config


def _wait_listening(proc: subprocess.Popen[bytes], address: str, port: int, log: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            unavailable(
                f"sshd exited with {proc.returncode}: {log.read_text(errors='replace').strip()[-500:]}"
            )
        with contextlib.suppress(OSError), socket.create_connection((address, port), timeout=0.5):
            return
        time.sleep(0.1)
    unavailable(f"sshd did not listen on {address}:{port} within {_START_TIMEOUT_S:.0f} s")


def _wait_mounted(proc: subprocess.Popen[bytes], mount: Path, log: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if os.path.ismount(mount):
            return
        if proc.poll() is not None:
            unavailable(
                f"sshfs exited with {proc.returncode}: {log.read_text(errors='replace').strip()[-500:]}"
            )
        time.sleep(0.1)
    unavailable(f"sshfs did not mount {mount} within {_START_TIMEOUT_S:.0f} s")


def _unmount(fusermount: str, mount: Path) -> None:
    if not os.path.ismount(mount):
        return
    if _run([fusermount, "-u", str(mount)]).returncode != 0:
        # Busy (a test left a file open): detach lazily so teardown never hangs or leaks the mount.
        _run([fusermount, "-u", "-z", str(mount)])


def _descendants(proc: subprocess.Popen[bytes] | None) -> list[psutil.Process]:
    if proc is None or proc.poll() is not None:
        return []
    try:
        return list(psutil.Process(proc.pid).children(recursive=True))
    except psutil.Error:
        return []


def _stop(proc: subprocess.Popen[bytes] | None, descendants: Sequence[psutil.Process] = ()) -> None:
    """Stop a process we started and the children it started (sshfs's ssh, sshd's session processes).

    Those children can outlive their parent: once the link into the namespace is gone, a closing ssh waits
    for a TCP peer that no longer exists.
    """
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _gone, alive = psutil.wait_procs(list(descendants), timeout=5)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


@contextlib.contextmanager
def sshfs_mounted(rate_mbit: int = DEFAULT_RATE_MBIT) -> Iterator[SshfsMount]:
    """Context manager behind the fixture (usable directly for other scopes)."""
    sshfs = _tool("sshfs")
    sshd = _tool("sshd", "/usr/sbin", "/usr/local/sbin")
    keygen = _tool("ssh-keygen")
    fusermount = shutil.which("fusermount3") or _tool("fusermount")
    _check_fuse()

    work = _scratch_dir("ckptprof-sshfs-")
    source, mount = work / "src", work / "mnt"
    source.mkdir()
    mount.mkdir()
    netns: _Netns | None = None
    sshd_proc: subprocess.Popen[bytes] | None = None
    sshfs_proc: subprocess.Popen[bytes] | None = None
    try:
        for key in ("host_key", "client_key"):
            res = _run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(work / key)])
            if res.returncode != 0:
                unavailable(f"ssh-keygen failed: {res.stderr.strip()}")
        shutil.copy(work / "client_key.pub", work / "authorized_keys")
        if os.geteuid() == 0:
            # sshd refuses to start without its privilege-separation directory (normally made by systemd).
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

        netns, how = _make_netns(rate_mbit) if rate_mbit > 0 else (None, "loopback (no cap asked)")
        address = netns.server_ip if netns else "127.0.0.1"
        port = 2222 if netns else _free_port()
        config = _write_sshd_config(work, address, port)
        prefix = ["ip", "netns", "exec", netns.name] if netns else []
        sshd_log = work / "sshd.log"
        with open(sshd_log, "wb") as log:
            sshd_proc = subprocess.Popen(
                [*prefix, sshd, "-D", "-e", "-f", str(config)], stdout=log, stderr=log
            )
        # The host reaches the namespace through the veth pair, so one connect test serves both cases.
        _wait_listening(sshd_proc, address, port, sshd_log)

        options = ",".join(
            [
                f"IdentityFile={work / 'client_key'}",
                "StrictHostKeyChecking=no",
                "UserKnownHostsFile=/dev/null",
                "BatchMode=yes",
                "LogLevel=ERROR",
            ]
        )
        sshfs_log = work / "sshfs.log"
        with open(sshfs_log, "wb") as log:
            sshfs_proc = subprocess.Popen(
                [sshfs, "-f", "-F", "/dev/null", "-p", str(port), "-o", options,
                 f"{getpass.getuser()}@{address}:{source}", str(mount)],
                stdout=log, stderr=log,
            )  # fmt: skip
        _wait_mounted(sshfs_proc, mount, sshfs_log)
        cap = rate_mbit * 1e6 / 8 if netns else None
        yield SshfsMount(
            mount=mount, source=source, rate_cap_bytes_per_s=cap, how=how, server_pid=sshd_proc.pid
        )
    finally:
        # Collected before anything stops: once a parent exits its children are re-parented and lost.
        sshfs_children, sshd_children = _descendants(sshfs_proc), _descendants(sshd_proc)
        # A test may have stopped the server: continue it first, so that the requests waiting on it are answered
        # (their readers leave the kernel's uninterruptible wait) and the unmount below cannot wait on it.
        for proc in [
            *([psutil.Process(sshd_proc.pid)] if sshd_proc and sshd_proc.poll() is None else []),
            *sshd_children,
        ]:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGCONT)
        _unmount(fusermount, mount)
        _stop(sshfs_proc, sshfs_children)
        _stop(sshd_proc, sshd_children)
        if netns:
            _run(["ip", "link", "del", netns.host_if])  # synchronous, unlike the namespace's own cleanup
            _run(["ip", "netns", "del", netns.name])
        shutil.rmtree(work, ignore_errors=True)


def _rate_from_env() -> int:
    text = os.environ.get("CKPTPROF_SSHFS_RATE_MBIT", "").strip()
    return int(text) if text else DEFAULT_RATE_MBIT


@pytest.fixture
def sshfs_mount() -> Iterator[SshfsMount]:
    """An sshfs mount of an empty temp directory; unmounted, sshd stopped and namespace removed afterwards."""
    with sshfs_mounted(_rate_from_env()) as m:
        yield m


@pytest.fixture
def capped_sshfs_mount() -> Iterator[SshfsMount]:
    """Like ``sshfs_mount``, but the link must be capped (a network namespace with tbf), else skip / fail in CI.

    Use it for comparisons with a tolerance: uncapped, the loopback link is bound by ssh's encryption on the
    CPU and drifts by +-30% from run to run on a small machine, whatever reads it.
    """
    with sshfs_mounted(_rate_from_env()) as m:
        if not m.rate_cap_bytes_per_s:
            unavailable(f"this test needs the tbf-capped link (root, iproute2, veth, sch_tbf); got {m.how}")
        yield m


def independent_read_gbps(paths: Sequence[Path], direct: bool) -> float:
    """Best of one sequential reader and one reader per file in parallel, with dd (not ckptprof's code).

    ``direct`` uses O_DIRECT (iflag=direct), to compare like with like against an O_DIRECT probe.
    """
    dd = shutil.which("dd")
    assert dd, "dd (coreutils) is needed for the independent read"
    flags = ["iflag=direct"] if direct else []
    total = sum(p.stat().st_size for p in paths)

    def cmd(p: Path) -> list[str]:
        return [dd, f"if={p}", "of=/dev/null", "bs=16M", "status=none", *flags]

    t0 = time.perf_counter()
    for p in paths:
        subprocess.run(cmd(p), check=True)
    sequential = total / (time.perf_counter() - t0) / 1e9
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd(p)) for p in paths]
    for proc in procs:
        assert proc.wait() == 0
    parallel = total / (time.perf_counter() - t0) / 1e9
    return max(sequential, parallel)


@pytest.fixture
def independent_read() -> Callable[[Sequence[Path], bool], float]:
    """``independent_read(paths, direct) -> GB/s``: a dd read of the files to check a probe against."""
    return independent_read_gbps

"""`ckptprof run` reuses a recent probe of the same file system and devices, says how old it is, and measures
again when asked (--reprobe), when the probe is too old, when the sample or devices differ, or when the kept probe
cannot be trusted (corrupt, from the future)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from ckptprof import inprogress
from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main
from ckptprof.probe import reuse
from ckptprof.session import Session

if TYPE_CHECKING:
    from conftest import SshfsMount


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Reuse on (the test suite turns it off everywhere else), kept in this test's own cache directory."""
    path = tmp_path / "cache"
    monkeypatch.setenv("CKPTPROF_CACHE", str(path))
    monkeypatch.delenv("CKPTPROF_PROBE_MAX_AGE_S")
    return path


def run(ckpt: Path, out: Path, *extra: str) -> tuple[Session, str]:
    argv = ["run", str(ckpt), "--devices", "cpu", "-q", "-o", str(out), "--strategy", "sglang"]
    argv += ["--probe-sample", "4MB", *extra]
    code = main(argv)
    assert code == 0
    return Session.load(out / "session.json"), (out / "session.json").read_text()


def kept_probes(cache: Path) -> list[Path]:
    return sorted((cache / "probes").glob("*.json"))


def test_a_second_run_reuses_the_probe_and_prints_its_age(
    small_draft: Path, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a first run, which probes and keeps the result
    first, _ = run(small_draft, tmp_path / "a")
    assert first.ceilings.reused is None
    assert "ceiling (measured this run)" in capsys.readouterr().out
    assert len(kept_probes(cache)) == 1
    # WHEN a second run starts within the hour
    second, _ = run(small_draft, tmp_path / "b")
    printed = capsys.readouterr().out
    # THEN it holds the first run's ceilings, says they were reused and how old they are, and did not probe
    reused = second.ceilings.reused
    assert reused is not None
    assert 0 <= reused["age_s"] < 600 and reused["max_age_s"] == reuse.DEFAULT_MAX_AGE_S
    assert replace(second.ceilings, reused=None) == first.ceilings
    assert "ceiling (reused: measured" in printed
    assert any(
        n.startswith("ceilings reused, not measured in this run") and "--reprobe" in n for n in second.notes
    )
    assert not any("the storage probe drops and re-reads a sample" in n for n in second.notes)


def test_reprobe_a_different_sample_or_an_old_probe_measure_again(
    small_draft: Path, tmp_path: Path, cache: Path
) -> None:
    run(small_draft, tmp_path / "a")
    again, _ = run(small_draft, tmp_path / "b", "--reprobe")
    assert again.ceilings.reused is None
    other_sample, _ = run(small_draft, tmp_path / "c", "--probe-sample", "2MB")
    assert other_sample.ceilings.reused is None
    assert len(kept_probes(cache)) == 2  # one per sample size
    never, _ = run(small_draft, tmp_path / "d", "--probe-max-age", "0")
    assert never.ceilings.reused is None
    # a kept probe older than the maximum age is measured again
    for path in kept_probes(cache):
        doc = json.loads(path.read_text())
        doc["measured_unix"] -= 7200
        path.write_text(json.dumps(doc))
    old, _ = run(small_draft, tmp_path / "e")
    assert old.ceilings.reused is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda doc: "{not json",
        lambda doc: json.dumps({**doc, "measured_unix": doc["measured_unix"] + 3600}),  # from the future
        lambda doc: json.dumps({**doc, "ceilings": {**doc["ceilings"], "memcpy_GBps": -1}}),
        lambda doc: json.dumps({**doc, "key": {**doc["key"], "host": "elsewhere"}}),
    ],
    ids=["corrupt", "future", "negative-rate", "other-host"],
)
def test_a_kept_probe_that_cannot_be_trusted_is_measured_again(
    small_draft: Path, tmp_path: Path, cache: Path, damage: object
) -> None:
    run(small_draft, tmp_path / "a")
    (path,) = kept_probes(cache)
    assert callable(damage)
    path.write_text(damage(json.loads(path.read_text())))
    session, _ = run(small_draft, tmp_path / "b")
    assert session.ceilings.reused is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_an_unwritable_cache_directory_only_costs_the_reuse(
    small_draft: Path, tmp_path: Path, cache: Path
) -> None:
    cache.mkdir()
    cache.chmod(0o500)
    try:
        first, _ = run(small_draft, tmp_path / "a")
        second, _ = run(small_draft, tmp_path / "b")
    finally:
        cache.chmod(0o700)
    assert first.ceilings.reused is None and second.ceilings.reused is None


def test_a_cache_path_that_is_a_file_only_costs_the_reuse(
    small_draft: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "cache-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("CKPTPROF_CACHE", str(blocker))
    monkeypatch.delenv("CKPTPROF_PROBE_MAX_AGE_S")
    first, _ = run(small_draft, tmp_path / "a")
    second, _ = run(small_draft, tmp_path / "b")
    assert first.ceilings.reused is None and second.ceilings.reused is None


@pytest.mark.parametrize("fails_in", ["write", "rename"])
def test_a_full_cache_disk_leaves_no_temp_file_and_the_run_goes_on(
    small_draft: Path, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, fails_in: str
) -> None:
    import errno

    # GIVEN a cache disk that is full: writing a probe's temp file stops part-way, or (its data already in the page
    # cache) the rename that publishes it fails - only for the probe cache, the session still goes to its own disk
    real_write, real_replace = Path.write_text, os.replace

    def in_probes(path: str | os.PathLike[str]) -> bool:
        return Path(path).parent == cache / "probes"

    def write_text(self: Path, data: str, *args: object, **kwargs: object) -> int:
        if fails_in == "write" and in_probes(self):
            real_write(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write(self, data, *args, **kwargs)  # type: ignore[arg-type]

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str], **kwargs: object) -> None:
        if fails_in == "rename" and in_probes(dst):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        real_replace(src, dst, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", write_text)
    monkeypatch.setattr(os, "replace", replace)
    # WHEN two runs probe and try to keep the result
    first, _ = run(small_draft, tmp_path / "a")
    second, _ = run(small_draft, tmp_path / "b")
    # THEN both ran to the end (run() checks exit 0) and measured (reuse is best-effort), and no temp file was
    # left behind: one per run would pile up in the full directory
    assert first.ceilings.reused is None and second.ceilings.reused is None
    assert sorted(p.name for p in (cache / "probes").iterdir()) == []


def test_the_key_names_the_file_systems_and_devices(small_draft: Path) -> None:
    files = sorted(small_draft.glob("*.safetensors"))
    key = reuse.probe_key(files, ["cpu"], 4_000_000)
    assert key["devices"] == ["cpu"] and key["sample_bytes"] == 4_000_000
    assert key["filesystems"] == [[os.stat(files[0]).st_dev, key["filesystems"][0][1]]]
    assert reuse.probe_key(files, ["cuda:0"], 4_000_000) != key


# -- a probe stands only for what it measured (#31 item 4, #32 item 6) -------------------------------------------


def _remount(mount: Path) -> subprocess.Popen[bytes]:
    """Unmount an sshfs mount and mount the same server directory at the same mount point again, with the same
    command line (a new mount: the server may now be slower). Returns the new sshfs process (the caller stops it)."""
    (sshfs,) = [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "sshfs" and str(mount) in p.info["cmdline"]
    ]
    argv = list(sshfs.info["cmdline"])
    subprocess.run(["fusermount", "-u", str(mount)], check=True, timeout=30)
    sshfs.wait(timeout=10)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while not os.path.ismount(mount):
        assert proc.poll() is None and time.monotonic() < deadline, "sshfs did not mount again"
        time.sleep(0.1)
    return proc


@pytest.mark.sshfs
def test_a_new_mount_at_the_same_mount_point_is_probed_again(
    small_draft: Path, tmp_path: Path, cache: Path, sshfs_mount: SshfsMount
) -> None:
    # GIVEN a checkpoint on an sshfs mount, probed by a first run
    shutil.copytree(small_draft, sshfs_mount.source / "ckpt")
    ckpt = sshfs_mount.mount / "ckpt"
    first, _ = run(ckpt, tmp_path / "a")
    assert first.ceilings.reused is None
    # WHEN the mount is replaced by a new one at the same mount point (what a remount after a network change does:
    # the device number can be the same, the storage behind it is not the one probed)
    proc = _remount(sshfs_mount.mount)
    try:
        second, _ = run(ckpt, tmp_path / "b")
    finally:
        subprocess.run(["fusermount", "-u", str(sshfs_mount.mount)], check=False, timeout=30)
        proc.wait(timeout=10)
    # THEN the second run measured its own ceilings: the first probe was of another mount
    assert second.ceilings.reused is None


def test_a_probe_taken_while_another_run_was_in_progress_is_not_reused(
    small_draft: Path, small_verifier: Path, tmp_path: Path, cache: Path
) -> None:
    # GIVEN another ckptprof run in progress (replaying a checkpoint again and again) while this one probes
    other = subprocess.Popen(
        [sys.executable, "-m", "ckptprof", "run", str(small_verifier), "--devices", "cpu", "-q", "--no-probe",
         "-o", str(tmp_path / "other"), "--faithful-rounds", "200"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not any(e.pid == other.pid and e.live for e in inprogress.others(base=cache)):
            assert other.poll() is None and time.monotonic() < deadline, "the other run never started"
            time.sleep(0.1)
        contended, _ = run(small_draft, tmp_path / "a")
        assert other.poll() is None, "the other run ended before this one had probed: the test proves nothing"
    finally:
        other.kill()
        other.wait()
    # THEN that run says its probe was taken under contention and is not kept, and a later run alone measures again
    assert any("contention" in note for note in contended.notes), contended.notes
    alone, _ = run(small_draft, tmp_path / "b")
    assert alone.ceilings.reused is None


def test_a_probe_of_a_smaller_sample_or_another_checkpoint_cold_is_not_reused(
    small_draft: Path, small_verifier: Path, tmp_path: Path, cache: Path
) -> None:
    # GIVEN a probe of the 16 MB draft, all of it read (a sample of 16 MB)
    run(small_draft, tmp_path / "a", "--probe-sample", "16MB")
    # WHEN a 24 MB checkpoint on the same file system is run with the same settings, its sample is larger (24 MB):
    # THEN the 16 MB probe does not stand for it
    bigger, _ = run(small_verifier, tmp_path / "b", "--probe-sample", "16MB")
    assert bigger.ceilings.reused is None
    # WHEN a cold load of another checkpoint of the same size class follows a cold probe
    twin = tmp_path / "twin"
    synthesize(twin, preset="eagle3-draft", shards=8, size=16_000_000, seed=7)
    run(small_draft, tmp_path / "c", "--probe-sample", "16MB", "--cache", "cold")
    cold_twin, _ = run(twin, tmp_path / "d", "--probe-sample", "16MB", "--cache", "cold")
    # THEN it is measured on its own files
    assert cold_twin.ceilings.reused is None
    # AND a reuse says how old the probe is and where it came from, never that it was measured in this run
    again, _ = run(twin, tmp_path / "e", "--probe-sample", "16MB", "--cache", "cold")
    assert again.ceilings.reused is not None
    (note,) = [n for n in again.notes if n.startswith("ceilings reused")]
    assert "not measured in this run" in note and str(twin) in note and " ago" in note, note

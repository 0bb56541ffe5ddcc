"""`ckptprof run --py-spy` records every rank with py-spy (needs ptrace; CI runs as root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main
from ckptprof.session import Session


def test_py_spy_profiles_every_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("py-spy") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("py-spy must be installed in CI (pip install -e '.[spy]')")
        pytest.skip("py-spy is not installed")
    # Large enough, and cold, for a load of some tenths of a second: py-spy samples at 100 Hz, and the 16 MB test
    # checkpoint loaded in a sample or two, so a rank's profile could hold no sample inside a phase at all.
    ckpt = tmp_path / "eagle3"
    synthesize(ckpt, preset="eagle3-draft", shards=16, size=192_000_000, seed=7)
    out = tmp_path / "run"
    code = main(
        [
            "run",
            str(ckpt),
            "--cache",
            "cold",
            "--tp",
            "2",
            "--no-probe",
            "-q",
            "--py-spy",
            "-o",
            str(out),
            "--devices",
            "cpu",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    session = Session.load(out / "session.json")
    profiles = session.artifacts["py_spy"]
    assert set(profiles) == {"0", "1"}, session.notes
    for path in profiles.values():
        doc = json.loads(Path(path).read_text())
        assert doc["profiles"] and doc["shared"]["frames"]
        assert Path(path).parent == out
    tops = session.extra["py_spy_top_frames"]
    assert any(phases for phases in tops.values())
    assert "py-spy: top frames per phase" in captured.out


def test_missing_py_spy_is_one_line(
    small_draft: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["run", str(small_draft), "--no-probe", "-q", "--py-spy"]) == 2
    err = capsys.readouterr().err
    assert "py-spy is not installed" in err and "Traceback" not in err


ITERATOR = """\
import sys
import time


def safetensors_weights_iterator(path, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with open(path, "rb") as shard:
            data = shard.read()  # the whole file: an engine's eager read, on the iterator's own line
        yield len(data)


for _ in safetensors_weights_iterator(sys.argv[1], float(sys.argv[2])):
    pass
"""


def test_a_whole_file_read_on_an_iterator_line_counts_as_read_with_the_runs_source_lines(
    tmp_path: Path,
) -> None:
    """A real py-spy recording of a weight iterator that reads whole files on its own line (SGLang's
    --weight-loader-disable-mmap, vLLM's eager strategy): read() is C, so the iterator is the innermost frame. With
    the source lines the run passes (local_source_line), those samples are read; without them, deserialize."""
    if shutil.which("py-spy") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("py-spy must be installed in CI (pip install -e '.[spy]')")
        pytest.skip("py-spy is not installed")
    from ckptprof.analysis.stacks import top_frames
    from ckptprof.run.passes import collect_py_spy, local_source_line

    script = tmp_path / "weight_utils.py"
    script.write_text(ITERATOR)
    shard = tmp_path / "model-00001-of-00001.safetensors"
    shard.write_bytes(os.urandom(1 << 20) * 48)  # 48 MiB: each read() takes milliseconds, from the page cache
    profile = tmp_path / "profile.json"
    record = [
        shutil.which("py-spy") or "py-spy",
        "record",
        "--format",
        "speedscope",
        "--output",
        str(profile),
    ]
    record += [
        "--idle",
        "--rate",
        "100",
        "--nonblocking",
        "--",
        sys.executable,
        str(script),
        str(shard),
        "1.5",
    ]
    done = subprocess.run(record, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0 and ("Permission denied" in done.stderr or "not permitted" in done.stderr):
        if os.environ.get("CI") == "true":
            pytest.fail(f"py-spy must be able to trace in CI: {done.stderr.strip()}")
        pytest.skip("py-spy may not trace here (ptrace)")
    assert done.returncode == 0, done.stderr
    doc = json.loads(profile.read_text())
    read_line = ITERATOR.splitlines().index(
        "            data = shard.read()  # the whole file: an engine's eager read, on the iterator's own line"
    )
    leaf = f"safetensors_weights_iterator (weight_utils.py:{read_line + 1})"

    # The run's own path: its py-spy session hands over the profile, collect_py_spy summarises it.
    class Recorded:
        def __init__(self) -> None:
            self.errors: dict[int, str] = {}

        def finish(self) -> dict[int, str]:
            return {0: str(profile)}

    session = Session()
    collect_py_spy(session, Recorded())  # type: ignore[arg-type]
    tops = session.extra.py_spy_top_frames
    assert tops is not None
    with_lines = tops["0"]
    assert with_lines == top_frames(doc, source_line=local_source_line)
    without = top_frames(doc)

    read = dict(with_lines.get("read", []))
    assert leaf in read, with_lines
    assert leaf not in dict(with_lines.get("deserialize", [])), with_lines
    assert "read" not in without and leaf in dict(without["deserialize"]), without
    assert read[leaf] == dict(without["deserialize"])[leaf]  # the same samples, in the other phase


def test_local_source_line_reads_only_absolute_paths(tmp_path: Path) -> None:
    from ckptprof.run.passes import local_source_line

    source = tmp_path / "loader.py"
    source.write_text("first\n        state = load(f.read())\n")
    assert local_source_line(str(source), 2).strip() == "state = load(f.read())"
    assert local_source_line("loader.py", 2) == ""  # a bare name is not looked up along sys.path
    assert local_source_line("<frozen abc>", 107) == ""
    assert local_source_line(str(tmp_path / "gone.py"), 1) == ""

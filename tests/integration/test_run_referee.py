"""`ckptprof run --cache cold,warm`: the same load cold and then warm in one run, and what storage cost the cold load
(cold minus warm) printed beside the attribution's storage share; refused in one line where the load cannot be cold."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

import ckptprof
from ckptprof.analysis.attribution import load_wall
from ckptprof.checkpoint import fs
from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main
from ckptprof.errors import UsageError
from ckptprof.session import Session

SIZE = "4MB"  # the built-in checkpoint, small: 64 shards of ~62 kB
FIELDS = {
    "pass",
    "cold_wall_s",
    "warm_wall_s",
    "storage_cost_s",
    "storage_share",
    "attributed_storage_share",
    "warm_attributed_storage_share",
    "warm_cache_notes",
    "incomplete",
}


def droppable(folder: Path) -> bool:
    """Whether this file system lets a file's pages be dropped and the drop be seen."""
    probe = folder / "drop-probe"
    probe.write_bytes(os.urandom(1 << 20))
    try:
        return fs.drop_cache([probe]).ok
    finally:
        probe.unlink()


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("CKPTPROF_CACHE", str(cache))
    if not droppable(cache):
        pytest.skip(f"the page cache of {cache} cannot be dropped here: no cold load to referee")
    return cache


def test_the_command_line_loads_cold_then_warm_and_prints_storages_cost(
    own_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the built-in checkpoint, small, and a run asked to load it cold and then warm
    out = tmp_path / "run"
    argv = [
        "run",
        "--synth-size",
        SIZE,
        "--cache",
        "cold,warm",
        "--no-probe",
        "--devices",
        "cpu",
        "-q",
        "-o",
        str(out),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    session = Session.load(out / "session.json")
    # THEN the session is the cold load's, and it holds the warm one's figures as its referee
    assert session.config["cache"] == "cold"
    referee = session.extra["cache_referee"]
    assert set(referee) == FIELDS and referee["pass"] == "decomposed" and referee["incomplete"] == []
    assert referee["cold_wall_s"] == pytest.approx(load_wall(session), abs=1e-4)
    assert referee["warm_wall_s"] > 0 and all(n.startswith("warmed") for n in referee["warm_cache_notes"])
    cost = referee["cold_wall_s"] - referee["warm_wall_s"]
    assert referee["storage_cost_s"] == pytest.approx(cost, abs=2e-4)
    # The share is of the unrounded walls, the walls are kept to 0.1 ms: recomputed from them, the share may differ by
    # the cost's rounding (1e-4 s) and the cold wall's (5e-5 s) over a cold wall of a few ms, plus its own rounding.
    rounding = (1e-4 + 5e-5 * abs(referee["storage_share"])) / referee["cold_wall_s"] + 5e-5
    assert referee["storage_share"] == pytest.approx(cost / referee["cold_wall_s"], abs=max(1e-3, rounding))
    decomposed = referee["attributed_storage_share"]["decomposed"]
    assert decomposed == pytest.approx(session.verdict.shares["storage"], abs=1e-4)
    # AND the terminal says so: cold wall, warm wall, storage's cost and its share, beside the attribution's
    line = (
        rf"cold vs warm \(decomposed\): cold {referee['cold_wall_s']:.2f} s, warm {referee['warm_wall_s']:.2f} s: "
        rf"storage cost {referee['storage_cost_s']:.2f} s, {referee['storage_share']:.0%} of the cold load\n"
        rf"  storage's share by the attribution: cold load {decomposed:.0%} decomposed; warm load \d+% decomposed\n"
    )
    assert re.search(line, printed), printed
    # AND the note of a cold run no longer promises a cold page cache to the next server
    assert any("its warm pass then read them in again" in n for n in session.notes)


def test_the_api_gives_the_same_referee(own_cache: Path) -> None:
    session = ckptprof.replay(synth_size=4_000_000, cache="cold,warm", probe=False, devices="cpu")
    referee = session.extra["cache_referee"]
    assert set(referee) == FIELDS and referee["cold_wall_s"] > 0 and referee["warm_wall_s"] > 0
    assert session.config["cache"] == "cold"


def test_a_run_whose_load_cannot_be_cold_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no /dev/shm here: no file system whose pages cannot be dropped")
    # GIVEN a checkpoint in memory (tmpfs: there is no storage behind it to read cold)
    with tempfile.TemporaryDirectory(dir=shm) as folder:
        ckpt = Path(folder) / "ckpt"
        synthesize(ckpt, preset="eagle3-draft", shards=4, size=8_000_000, seed=1)
        out = tmp_path / "run"
        code = main(
            ["run", str(ckpt), "--cache", "cold,warm", "--no-probe", "--devices", "cpu", "-o", str(out)]
        )
        err = capsys.readouterr().err
        # THEN it is refused before anything runs, in one line that says why, and leaves no run directory
        assert code == 2
        assert len(err.strip().splitlines()) == 1, err
        assert "--cache cold,warm: the checkpoint cannot be loaded cold here" in err and "tmpfs" in err
        assert not out.exists()
        with pytest.raises(
            UsageError, match=r"^--cache cold,warm: the checkpoint cannot be loaded cold here"
        ):
            ckptprof.replay(ckpt, cache="cold,warm", probe=False, devices="cpu")

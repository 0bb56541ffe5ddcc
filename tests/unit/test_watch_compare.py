"""`ckptprof compare WATCH RUN` (either order): the watch session held against a run session of the same checkpoint
through watch.against_run's table; two watch sessions, mismatched checkpoints and a gate refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ckptprof.cli.main import main
from ckptprof.session import ModelInfo, RankModel, RankResult, Session, ShardInfo, ShardTiming, dumps_strict
from tests.unit.test_watch_report import STORAGE_BOUND, save, watch_session

SHARDS = (("model-00001-of-00002.safetensors", 4_000_000), ("model-00002-of-00002.safetensors", 4_000_000))


def run_session(shards: tuple[tuple[str, int], ...] = SHARDS) -> Session:
    """The run of the watched load: TP2, rank r (pid 100 + r, as watch saw them) loading shard r."""
    ranks = []
    for r, (file, size) in enumerate(shards):
        shard = ShardTiming(file=file, bytes=size, storage_bytes=size, wall_s=1.0, read_s=0.5)
        ranks.append(
            RankResult(
                rank=r,
                device="cpu",
                pid=100 + r,
                models=[RankModel(role="target", wall_s=1.0, shards=[shard])],
            )
        )
    return Session(
        config={"tp": 2, "cache": "cold"},
        models=[
            ModelInfo(
                role="target",
                path="/data/m",
                fs_type="ext4",
                total_bytes=sum(b for _, b in shards),
                shards=[ShardInfo(f, b) for f, b in shards],
            )
        ],
        ranks=ranks,
    )


def save_run(tmp_path: Path, session: Session, name: str = "run.json") -> str:
    path = tmp_path / name
    path.write_text(dumps_strict(session.to_dict(), indent=1), encoding="utf-8")
    return str(path)


def one_line(err: str) -> str:
    line = err.strip()
    assert line.count("\n") == 0 and "Traceback" not in line, err
    return line


@pytest.fixture
def watch_dir(tmp_path: Path) -> str:
    return str(save(tmp_path, watch_session(STORAGE_BOUND)))


def test_a_watch_session_is_held_against_the_run_in_either_order(
    watch_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = save_run(tmp_path, run_session())
    assert main(["compare", watch_dir, run]) == 0
    first = capsys.readouterr().out
    assert main(["compare", run, watch_dir]) == 0
    assert capsys.readouterr().out == first
    # the against_run table: each rank's process matched by the pid the run saved, watch's bytes beside the run's
    assert "watch read" in first and "run storage" in first and "what each side measures" in first
    assert main(["compare", run, watch_dir, "--format", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert [(row["watch"]["pids"], row["watch"]["matched_by"]) for row in data["ranks"]] == [
        ([100], "pid"),
        ([101], "pid"),
    ]
    assert [row["watch"]["read_bytes"] for row in data["ranks"]] == [4_000_000, 8_000_000]
    assert [row["run"]["storage_bytes"] for row in data["ranks"]] == [4_000_000, 4_000_000]
    assert main(["compare", watch_dir, run, "--format", "md"]) == 0
    assert capsys.readouterr().out.startswith("### ckptprof watch against ckptprof run")


def test_two_watch_sessions_are_refused_in_one_line(
    watch_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", watch_dir, watch_dir]) == 2
    assert "both watch sessions" in one_line(capsys.readouterr().err)


def test_a_run_of_another_checkpoint_is_refused_in_one_line(
    watch_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = save_run(tmp_path, run_session((("model-00001-of-00001.safetensors", 8_000_000),)))
    assert main(["compare", watch_dir, other]) == 2
    line = one_line(capsys.readouterr().err)
    assert "different checkpoints" in line and "the target differs" in line


def test_a_gate_on_a_watch_session_is_refused(
    watch_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = save_run(tmp_path, run_session())
    assert main(["compare", run, watch_dir, "--fail-above", "10"]) == 2
    assert "no load wall to gate" in one_line(capsys.readouterr().err)

"""Pickle checkpoints: refused by default, loaded only through torch.load(weights_only=True) when asked."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from ckptprof.cli.main import main
from ckptprof.session import Session


def _bin_checkpoint(d: Path) -> dict[str, torch.Tensor]:
    d.mkdir()
    state = {
        "model.layers.0.self_attn.q_proj.weight": torch.randn(64, 32, dtype=torch.bfloat16),
        "model.layers.0.self_attn.o_proj.weight": torch.randn(32, 64),
        "model.norm.weight": torch.randn(32),
    }
    torch.save(state, d / "pytorch_model.bin")
    return state


class _Payload:
    """Unpickling this would create a file: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.marker),))  # type: ignore[return-value]


def test_pickle_is_refused_without_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _bin_checkpoint(tmp_path / "c")
    assert main(["run", str(tmp_path / "c"), "--no-probe", "-q", "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--allow-pickle" in err and "never unpickles" in err
    assert len(err.strip().splitlines()) == 1


def test_allow_pickle_replays_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = _bin_checkpoint(tmp_path / "c")
    code = main(
        [
            "run",
            str(tmp_path / "c"),
            "--allow-pickle",
            "--tp",
            "2",
            "--no-probe",
            "-q",
            "-o",
            str(tmp_path / "o"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    session = Session.load(tmp_path / "o" / "session.json")
    shards = [s for r in session.ranks for m in r.models for s in m.shards]
    assert all(s.status == "ok" for s in shards)
    assert sum(s.tensors for s in shards) == 2 * len(state)


def test_hostile_pickle_never_runs_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "c"
    ckpt.mkdir()
    marker = tmp_path / "pwned"
    with open(ckpt / "pytorch_model.bin", "wb") as fh:
        pickle.dump({"w": _Payload(marker)}, fh)
    code = main(["run", str(ckpt), "--allow-pickle", "--no-probe", "-q", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert "weights_only" in err or "cannot load" in err
    assert not marker.exists()
    assert "Traceback" not in err

"""`ckptprof run --engine vllm`: vLLM's paths replayed per rank, its automatic-prefetch rule applied to the
checkpoint's real file system and this machine's RAM, on local disk and on sshfs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ckptprof.checkpoint import fs
from ckptprof.checkpoint.synth import synthesize
from ckptprof.cli.main import main
from ckptprof.render import markdown
from ckptprof.session import Session

if TYPE_CHECKING:
    from conftest import EnginePackage


def _sessions(out: Path) -> dict[str, dict]:
    return {
        json.loads(p.read_text())["config"]["strategy"]: json.loads(p.read_text())
        for p in out.glob("session*.json")
    }


def test_engine_vllm_on_local_disk_replays_both_sides_of_the_rule_with_sglangs_values(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a checkpoint on local disk WHEN `run --engine vllm --verify --cache cold` THEN vLLM's lazy path (what
    it takes here: no network file system) and its prefetch path are replayed, both load sglang's values, and the
    note says vLLM would not prefetch here and what prefetching measured."""
    out = tmp_path / "run"
    argv = [
        "run",
        str(small_draft),
        "--engine",
        "vllm",
        "--tp",
        "2",
        "--verify",
        "--cache",
        "cold",
        "--no-probe",
    ]
    assert main([*argv, "-o", str(out)]) == 0
    printed = capsys.readouterr()
    sessions = _sessions(out)
    assert set(sessions) == {"sglang", "vllm", "vllm-prefetch"}
    first = json.loads((out / "session.json").read_text())
    release = first["config"]["vllm_release"]
    assert release["engine"] == "vllm" and release["profile"] == "0.34 and later"
    decision = release["prefetch_decision"]
    assert decision["fs_type"] == fs.fs_type(small_draft)
    assert decision["prefetch"] is False
    assert decision["checkpoint_bytes"] == sum(f.stat().st_size for f in small_draft.glob("*.safetensors"))
    rows = {r["strategy"]: r for r in first["extra"]["strategies"]["rows"]}
    assert rows["vllm"]["verify"] == rows["vllm-prefetch"]["verify"] == "equal"
    assert rows["vllm-prefetch"]["flags"] == "--safetensors-load-strategy prefetch"
    notes = " ".join(first["notes"])
    assert "vLLM 0.34 and later would not prefetch this checkpoint on its own here" in notes
    assert "measured here (cold cache), prefetching" in notes
    assert "vLLM flags" in printed.out and "SGLang flags" not in printed.out
    # vLLM's files in natural order, and no SGLang flag sold to a vLLM server
    assert sessions["vllm"]["config"]["order"] == "natural"
    assert sessions["vllm"]["verdict"]["recommendations"] == []  # --no-probe: nothing to price them from
    assert "priced as SGLang's equivalents are" in sessions["vllm"]["verdict"]["engine_note"]
    md = markdown.render(Session.load(out / "session.json"))
    assert "vLLM profile 0.34 and later" in md and "| vLLM flags" in md


def test_an_older_release_and_a_named_strategy(small_draft: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = [
        "run",
        str(small_draft),
        "--engine",
        "vllm",
        "--vllm-version",
        "0.15.0",
        "--strategy",
        "vllm-eager",
    ]
    assert main([*argv, "--no-probe", "-q", "-o", str(out)]) == 0
    session = json.loads((out / "session.json").read_text())
    assert session["config"]["strategy"] == "vllm-eager"
    assert session["config"]["order"] == "glob"  # before 0.17 vLLM took the files in the directory's order
    assert session["config"]["vllm_release"]["profile"] == "0.10.2 - 0.16"
    assert any("never prefetches unless asked" in n for n in session["notes"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine", "sglang", "--vllm-version", "0.20.0"], "--vllm-version goes with --engine vllm"),
        (["--engine", "vllm", "--sglang-version", "0.5.23"], "--sglang-version goes with --engine sglang"),
        (
            ["--engine", "vllm", "--vllm-version", "newest"],
            "--vllm-version: 'newest' is not a release number",
        ),
    ],
)
def test_engine_flags_that_do_not_fit_are_refused(
    argv: list[str], message: str, small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(small_draft), *argv, "--no-probe", "-o", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.sshfs
def test_on_sshfs_vllm_does_not_prefetch_a_fuse_file_system(sshfs_mount, tmp_path: Path) -> None:
    """sshfs is a network file system to a user, but not to vLLM's rule (NFS and Lustre only): no prefetch, and
    the note says so naming FUSE.SSHFS."""
    mount, source = sshfs_mount
    synthesize(source / "draft", preset="eagle3-draft", shards=4, size=8_000_000, seed=5)
    out = tmp_path / "run"
    argv = ["run", str(mount / "draft"), "--engine", "vllm", "--strategy", "vllm", "--no-probe", "-q"]
    assert main([*argv, "-o", str(out)]) == 0
    session = json.loads((out / "session.json").read_text())
    decision = session["config"]["vllm_release"]["prefetch_decision"]
    assert decision["fs_type"] == "fuse.sshfs"
    assert decision["prefetch"] is False
    assert any("the file system (FUSE.SSHFS) is not one vLLM prefetches on" in n for n in session["notes"])


def test_check_predictions_replays_vllms_own_flags(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a cold vLLM run with ceilings WHEN --check-predictions THEN each priced vLLM flag is replayed as its
    vLLM strategy (never an SGLang one) and its measured wall set beside the predicted one."""
    argv = ["run", str(small_draft), "--engine", "vllm", "--strategy", "vllm", "-q", "--cache", "cold"]
    argv += ["--probe-sample", "16MB", "--check-predictions", "--json", "-", "-o", str(tmp_path / "a")]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    predicted = [p for p in data["verdict"]["predictions"] if p["predicted_s"] is not None and p["strategy"]]
    assert all(p["strategy"].startswith("vllm-") for p in predicted), predicted
    assert all(
        "--safetensors-load-strategy" in p["flags"] or "enable_multithread_load" in p["flags"]
        for p in predicted
    )
    checks = data["extra"].get("prediction_check") or []
    assert [c["strategy"] for c in checks] == [p["strategy"] for p in predicted]
    for check in checks:  # a 16 MB cold read on a fast disk may leave nothing storage-bound to price
        assert check["status"] == "ok" and check["measured_s"] > 0, check


@pytest.mark.engine
def test_faithful_drives_the_installed_vllms_own_iterator(
    small_draft: Path, tmp_path: Path, vllm_package: EnginePackage
) -> None:
    """GIVEN an importable vllm (a stand-in with 0.33.0's iterator functions, or in the engine tier the real
    release) WHEN run --engine vllm --faithful THEN the installed release picks the profile and the faithful pass
    goes through vLLM's own function."""
    import subprocess
    import sys

    calls = tmp_path / "calls.jsonl"
    argv = ["run", str(small_draft), "--engine", "vllm", "--strategy", "vllm", "--tp", "2", "--no-probe"]
    argv += ["--faithful", "-q", "-o", str(tmp_path / "s"), "--json", str(tmp_path / "s.json")]
    done = subprocess.run(
        [sys.executable, "-m", "ckptprof", *argv],
        capture_output=True,
        text=True,
        env=vllm_package.env(calls),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    session = json.loads((tmp_path / "s.json").read_text())
    assert session["config"]["vllm_release"]["version"] == vllm_package.version
    assert session["config"]["faithful_source"] == (
        f"vLLM's own safetensors_weights_iterator (vllm {vllm_package.version}, installed here)"
    )
    made = vllm_package.calls(calls)
    assert made is None or (
        made
        == [{"function": "safetensors_weights_iterator", "files": 8, "safetensors_load_strategy": "lazy"}] * 2
    )
    for rank in session["ranks"]:
        (model,) = rank["models"]
        assert model["faithful_wall_s"] > 0 and rank["status"] == "ok"


def test_a_vllm_servers_log_picks_the_engine_and_the_release(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a real vLLM server's boot log (vLLM 0.19.0) and no --engine WHEN run --log THEN vLLM's loading is
    replayed, as that release does, and the run says why; an SGLang server's log keeps SGLang's loading."""
    logs = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
    out = tmp_path / "run"
    argv = ["run", str(small_draft), "--strategy", "vllm", "--no-probe", "-o", str(out)]
    assert main([*argv, "--log", str(logs / "real" / "vllm-agentic-ai-eks-qwen72b-tp4.log")]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("ckptprof run: --log ") and "chose what is replayed: vLLM's loading;" in first
    assert "--engine/--vllm-version" in first
    release = json.loads((out / "session.json").read_text())["config"]["vllm_release"]
    assert (release["profile"], release["version"]) == ("0.19", "0.19.0")
    assert release["why"] == "the vLLM release the server's log names (0.19.0)"
    sglang_log = logs / "sglang_tp8_eagle3_cut_loading_draft.log"
    argv = ["run", str(small_draft), "--log", str(sglang_log), "--no-probe", "-q", "-o", str(tmp_path / "s")]
    assert main(argv) == 0
    config = json.loads((tmp_path / "s" / "session.json").read_text())["config"]
    assert "sglang_release" in config and "vllm_release" not in config

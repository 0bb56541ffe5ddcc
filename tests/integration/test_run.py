"""End-to-end `ckptprof run` on small synthetic checkpoints, with real rank processes (CPU)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ckptprof import api
from ckptprof.analysis.attribution import model_totals
from ckptprof.analysis.verdict import BOTTLENECKS
from ckptprof.cli.main import main
from ckptprof.engines.sglang import profile_for_version
from ckptprof.loader.strategies.sglang_own import OwnCall, own_call
from ckptprof.run.faithful import FETCHED_NOTHING
from ckptprof.session import Session

if TYPE_CHECKING:
    from conftest import EnginePackage


def digest(d: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.iterdir()) if f.is_file()}


def test_run_tp3_on_one_device_with_draft(
    small_verifier: Path, small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = digest(small_verifier) | digest(small_draft)
    out = tmp_path / "run"
    code = main(
        [
            "run",
            str(small_verifier),
            "--draft",
            str(small_draft),
            "--tp",
            "3",
            "--devices",
            "cpu",
            "--no-probe",
            "-q",
            "-o",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    session = Session.load(out / "session.json")
    assert [r.rank for r in session.ranks] == [0, 1, 2]
    assert all(r.status == "ok" for r in session.ranks)
    assert session.config["ranks_share_devices"] is True
    for r in session.ranks:
        assert [m.role for m in r.models] == ["target", "draft"]  # target first, like SGLang
        target, draft = r.models
        assert draft.start_s >= target.start_s + target.wall_s - 1e-6
        assert [s.file for s in draft.shards] == [s.file for s in session.models[1].shards]
        assert sum(s.bytes for s in draft.shards) > 0
    # every rank materialises every full tensor (SGLang narrows after get_tensor): 3x read amplification
    assert session.verdict.read_amplification == pytest.approx(3.0, rel=0.02)
    # each rank copies only its slice: the ranks' h2d bytes add up to about one checkpoint (plus replicated)
    total = sum(m.total_bytes for m in session.models)
    h2d = sum(s.h2d_bytes for r in session.ranks for m in r.models for s in m.shards)
    assert total * 0.95 < h2d < total * 1.6
    assert "ranks shared" in captured.out and "verdict:" in captured.out
    assert digest(small_verifier) | digest(small_draft) == before  # nothing written to the checkpoint


def test_decomposed_phases_sum_close_to_wall(small_draft: Path) -> None:
    session = api.replay(small_draft, tp=1, devices="cpu", cache="warm", probe=False, faithful=True)
    for r in session.ranks:
        for m in r.models:
            phases = sum(s.read_s + s.deserialize_s + s.h2d_s for s in m.shards)
            assert 0 < phases <= m.wall_s
            assert m.faithful_wall_s is not None and m.faithful_wall_s > 0
    assert session.verdict.faithful_delta is not None


def test_faithful_rounds_alternate_passes_and_compare_medians(small_draft: Path) -> None:
    session = api.replay(small_draft, tp=2, devices="cpu", cache="cold", probe=False, faithful_rounds=3)
    assert session.config["faithful"] and session.config["faithful_rounds"] == 3
    decomposed, faithful = 0.0, 0.0
    for r in session.ranks:
        (m,) = r.models
        assert m.faithful_walls is not None and len(m.faithful_walls) == 3
        assert m.decomposed_walls is not None and len(m.decomposed_walls) == 3
        assert m.decomposed_walls[0] == m.wall_s  # the pass with the per-shard data is the first of them
        assert m.faithful_wall_s == sorted(m.faithful_walls)[1]
        decomposed += sorted(m.decomposed_walls)[1]
        faithful += sorted(m.faithful_walls)[1]
    assert session.verdict.faithful_delta == pytest.approx((decomposed - faithful) / faithful, abs=1e-4)
    with pytest.raises(ValueError, match="faithful_rounds must be at least 1"):
        api.replay(small_draft, devices="cpu", probe=False, faithful_rounds=0)
    assert main(["run", str(small_draft), "--faithful-rounds", "0", "--no-probe", "-q"]) == 2


def test_a_cold_faithful_pass_fetches_from_storage_like_the_decomposed_one(small_draft: Path) -> None:
    # The faithful check compares two passes: both must start cold, or the comparison flatters SGLang's path.
    session = api.replay(small_draft, tp=1, devices="cpu", cache="cold", probe=False, faithful=True)
    (model,) = session.ranks[0].models
    decomposed = sum(s.storage_bytes for s in model.shards)
    assert model.faithful_storage_bytes is not None
    if decomposed < 0.5 * session.models[0].total_bytes:
        pytest.skip("the kernel does not count this file system's reads here")
    assert model.faithful_storage_bytes > 0.5 * session.models[0].total_bytes


def test_a_faithful_pass_on_a_block_device_records_how_long_it_was_busy(small_draft: Path) -> None:
    from ckptprof.checkpoint import diskstats

    if diskstats.device_for(small_draft) is None:
        pytest.skip("no block device under the checkpoint (tmpfs or overlay)")
    session = api.replay(small_draft, tp=1, devices="cpu", cache="cold", probe=False, faithful_rounds=2)
    (model,) = session.ranks[0].models
    assert model.disk == diskstats.device_for(small_draft)
    assert model.disk_busy_s is not None and model.disk_read_bytes is not None
    assert model.faithful_wall_s is not None and model.faithful_disk_busy_s is not None
    # Device-wide busy time, scaled to the faithful wall: never more than it.
    assert 0 <= model.faithful_disk_busy_s <= model.faithful_wall_s + 1e-9
    # The larger of the two storage figures wins; which one depends on the machine (CI's disk is often idle-fast).
    decomposed_storage = model_totals(model).storage_read_s
    source = session.verdict.path_storage_source
    if decomposed_storage > model.faithful_disk_busy_s:
        busy_share = model.faithful_disk_busy_s / model.faithful_wall_s
        assert source == (
            f"decomposed storage time, more than the io_ticks of {model.disk} ({busy_share:.0%} of the faithful wall)"
        )
    else:
        assert source == f"io_ticks of {model.disk}"


def test_bad_shard_is_marked_failed_others_measured(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = tmp_path / "c"
    shutil.copytree(small_draft, ckpt)
    victim = sorted(ckpt.glob("*.safetensors"))[1]
    victim.write_bytes(struct.pack("<Q", 2**40) + victim.read_bytes()[8:])
    before = digest(ckpt)
    code = main(
        [
            "run",
            str(ckpt),
            "--no-probe",
            "-q",
            "--devices",
            "cpu",
            "-o",
            str(tmp_path / "out"),
            "--json",
            str(tmp_path / "s.json"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    session = Session.load(tmp_path / "s.json")
    shards = session.ranks[0].models[0].shards
    failed = [s for s in shards if s.status == "failed"]
    assert [s.file for s in failed] == [victim.name]
    # (the problem's own words: a bare "cap" could be satisfied by a folder name in the path)
    assert (failed[0].error or "").endswith(
        f"header length {2**40} exceeds the 100000000-byte cap (corrupt or hostile)"
    ), failed[0].error
    assert sum(1 for s in shards if s.status == "ok") == len(shards) - 1
    assert "Traceback" not in err
    assert digest(ckpt) == before


def test_cold_cache_is_recorded(small_draft: Path) -> None:
    session = api.replay(small_draft, tp=1, devices="cpu", cache="cold", probe=False)
    model = session.models[0]
    assert model.resident_bytes_before is not None
    assert model.cache_note
    assert any("dropped the checkpoint's pages" in n for n in session.notes)
    # AND one rank reading a dropped checkpoint fetches it from storage once, as the kernel counted it: each
    # shard books only the bytes read while it was open (a shard that booked the thread's running total
    # instead would make this 4-6x)
    v = session.verdict
    assert v is not None and v.storage_amplification is not None
    if not v.storage_amplification_source.startswith("kernel"):
        pytest.skip(
            f"the kernel does not count this file system's reads here ({v.storage_amplification_source})"
        )
    assert 0.95 <= v.storage_amplification <= 1.10, [
        s.storage_bytes for s in session.ranks[0].models[0].shards
    ]


def test_json_dash_prints_the_session(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(small_draft), "--no-probe", "-q", "--json", "-", "-o", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 1
    assert data["verdict"]["bottleneck"] in BOTTLENECKS


def test_bad_usage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["run", str(tmp_path / "missing"), "--no-probe"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["run", str(tmp_path), "--tp", "0"]) == 2
    assert main(["run", str(tmp_path), "--devices", "cuda:99", "--no-probe"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_torchrun_two_ranks_on_cpu(small_draft: Path, tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        "29517",
        "-m",
        "ckptprof",
        "run",
        str(small_draft),
        "--devices",
        "cpu",
        "--no-probe",
        "--faithful-rounds",  # every rank takes part in the faithful passes too (they meet at barriers)
        "2",
        "-q",
        "-o",
        str(tmp_path / "tr"),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    session = Session.load(tmp_path / "tr" / "session.json")
    assert session.config["launcher"] == "torchrun"
    assert [r.rank for r in session.ranks] == [0, 1]
    assert all(r.status == "ok" for r in session.ranks)
    assert session.ranks[0].pid != session.ranks[1].pid
    for r in session.ranks:
        (m,) = r.models
        assert m.faithful_walls is not None and len(m.faithful_walls) == 2 and m.faithful_wall_s


def test_torchrun_replays_several_strategies_in_one_launch(small_draft: Path, tmp_path: Path) -> None:
    """`--strategy a,b` under torchrun: one process group serves every replay (re-creating it between them raced
    the ranks' reconnection to rank 0)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29519"]
    cmd += ["-m", "ckptprof", "run", str(small_draft), "--devices", "cpu", "--no-probe", "-q"]
    cmd += ["--strategy", "sglang,no-mmap,pipelined", "--verify", "-o", str(tmp_path / "trs")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    session = Session.load(tmp_path / "trs" / "session.json")
    assert session.strategies is not None
    rows = {row.strategy: row for row in session.strategies.rows}
    assert set(rows) == {"sglang", "no-mmap", "pipelined"}
    assert all(row.status == "ok" for row in rows.values())
    assert rows["no-mmap"].verify == rows["pipelined"].verify == "equal"


def test_python_api_is_ckptprof_replay(small_draft: Path) -> None:
    # the machinery imported first must not shadow the API (the package was once named `replay` too)
    import ckptprof
    import ckptprof.loader.plan

    session = ckptprof.replay(small_draft, tp=1, devices="cpu", cache="warm", probe=False)
    assert isinstance(session, Session)
    assert session.verdict.bottleneck in BOTTLENECKS


def test_server_log_is_put_next_to_the_replay(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = Path(__file__).parent.parent / "fixtures" / "logs" / "sglang_tp8_eagle3_newer_ready.log"
    code = main(["run", str(small_draft), "--no-probe", "-q", "--log", str(log), "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    session = Session.load(tmp_path / "session.json")
    assert session.server_log is not None
    phases = session.server_log.load_weights
    assert [p.model for p in phases] == ["target", "draft"]
    assert (phases[0].seconds or 0) > 0
    # the JSON keeps it where scripts have read it
    saved = json.loads((tmp_path / "session.json").read_text())
    assert [p["model"] for p in saved["extra"]["server_log"]["load_weights"]] == ["target", "draft"]
    assert "server load s" in out
    assert main(["run", str(small_draft), "--no-probe", "-q", "--log", str(tmp_path / "nope.log")]) == 2
    assert "nope.log" in capsys.readouterr().err


def test_a_server_log_that_shows_a_load_format_sets_the_replayed_path(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a vLLM boot log a user posted, whose server loaded with --load-format runai_streamer (its bar says so)
    pytest.importorskip("runai_model_streamer")
    log = Path(__file__).parent.parent / "fixtures" / "logs" / "real" / "vllm-cr7258-runai-local.log"
    # WHEN ckptprof replays with that log and no --strategy
    code = main(["run", str(small_draft), "--no-probe", "-q", "--log", str(log), "-o", str(tmp_path)])
    out = capsys.readouterr().out
    # THEN it replays the server's own path and says the log chose it
    assert code == 0
    session = Session.load(tmp_path / "session.json")
    assert session.config["strategy"] == "runai-streamer"
    assert session.server_log is not None and session.server_log.loaders == {"target": "runai_streamer"}
    assert "the log set the path: target replayed with runai-streamer" in out
    # AND a --strategy the user gives still wins
    assert (
        main(
            [
                "run",
                str(small_draft),
                "--no-probe",
                "-q",
                "--log",
                str(log),
                "-o",
                str(tmp_path / "b"),
                "--strategy",
                "sglang",
            ]
        )
        == 0
    )
    assert Session.load(tmp_path / "b" / "session.json").config["strategy"] == "sglang"


@pytest.mark.parametrize(
    ("loaders", "has_draft", "expected"),
    [
        ({"target": "multithread"}, False, (None, None)),  # the release profile covers the default paths
        ({"target": "instanttensor", "draft": "instanttensor"}, True, ("instanttensor", None)),
        ({"target": "multithread", "draft": "runai_streamer"}, True, (None, "runai-streamer")),
        ({"target": "fastsafetensors", "draft": "multithread"}, True, ("fastsafetensors", "auto")),
        (
            {"target": "multithread", "draft": "runai_streamer"},
            False,
            (None, None),
        ),  # no --draft to give it to
    ],
)
def test_the_logged_loaders_pick_each_models_path(
    loaders: dict[str, str], has_draft: bool, expected: tuple[str | None, str | None]
) -> None:
    from ckptprof.results import ServerLog
    from ckptprof.run.policy import logged_load_formats

    logged = ServerLog(path="boot.log", framework="sglang", state="ready", loaders=loaders)
    assert logged_load_formats(logged, has_draft) == expected


def test_the_api_runs_from_a_script_read_from_standard_input(small_draft: Path) -> None:
    # A spawned rank re-imports the parent's __main__ from its __file__, and `python - <<EOF` names '<stdin>'.
    script = (
        "from ckptprof import api\n"
        f"s = api.replay({str(small_draft)!r}, tp=2, devices='cpu', probe=False)\n"
        "print('ranks', [(r.rank, r.status, len(r.models)) for r in s.ranks])\n"
        "import __main__; print('main file', __main__.__file__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-"], input=script, capture_output=True, text=True, timeout=240, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ranks [(0, 'ok', 1), (1, 'ok', 1)]" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert "main file <stdin>" in proc.stdout  # given back to the script once the ranks started


def test_the_default_replay_is_the_sglang_releases_own_path(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN no --strategy WHEN the release is named THEN its default path is replayed and the summary says which
    profile and why; an unparseable release is one line and exit 2."""
    assert (
        main(["run", str(small_draft), "--no-probe", "-q", "--sglang-version", "0.5.4", "--json", "-"]) == 0
    )
    old = json.loads(capsys.readouterr().out)
    assert old["config"]["strategy"] == "sglang"
    assert old["config"]["sglang_release"]["profile"] == "0.5.1 - 0.5.8"
    assert old["config"]["sglang_release"]["why"] == "--sglang-version 0.5.4"
    assert old["config"]["order"] == "glob"  # 0.5.4 does not sort the files it globs
    assert (
        main(["run", str(small_draft), "--no-probe", "-q", "--sglang-version", "0.5.23", "-o", str(tmp_path)])
        == 0
    )
    out = capsys.readouterr().out
    assert "strategy=sglang-mt" in out
    assert "replaying SGLang 0.5.16 and later: multithread loader by default (8 threads" in out
    assert "(profile chosen by --sglang-version 0.5.23)" in out
    assert main(["run", str(small_draft), "--no-probe", "-q", "--sglang-version", "newest"]) == 2
    assert "--sglang-version: 'newest' is not a release number" in capsys.readouterr().err


def test_check_predictions_replays_each_recommended_flag_set(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN a cold run with ceilings WHEN --check-predictions THEN every recommendation that has a prediction and
    a replayable strategy is replayed, its measured wall set beside the predicted one."""
    argv = ["run", str(small_draft), "-q", "--cache", "cold", "--probe-sample", "16MB", "--check-predictions"]
    code = main([*argv, "--json", "-", "-o", str(tmp_path / "a")])
    data = json.loads(capsys.readouterr().out)
    predicted = [p for p in data["verdict"]["predictions"] if p["predicted_s"] is not None and p["strategy"]]
    checks = data["extra"].get("prediction_check") or []
    assert [c["strategy"] for c in checks] == [p["strategy"] for p in predicted]
    # a check asked for that found nothing to replay is not a success
    assert code == (0 if predicted else 1)
    if not checks:
        # A 16 MB cold read on a fast disk can leave no storage-bound share, hence no prediction to replay; the
        # replaying itself is checked deterministically in tests/unit/test_predictions_check.py.
        assert not predicted
        return
    for check in checks:
        assert check["status"] == "ok" and check["measured_s"] > 0, check
        # predicted_s is rounded to the millisecond, so on a 0.1 s CPU load the recomputed error moves by ~1%
        assert check["error"] == pytest.approx(check["predicted_s"] / check["measured_s"] - 1, abs=0.02)
        assert check["within_tolerance"] == (abs(check["error"]) <= 0.2)
    # the terminal summary prints the checks (a second cold run on this noisy VM may earn no prediction to check)
    second_code = main([*argv, "-o", str(tmp_path / "b")])
    printed = capsys.readouterr().out
    second = Session.load(tmp_path / "b" / "session.json")
    assert second_code == (0 if second.extra.get("prediction_check") else 1)
    heading = "predictions checked: each recommended flag set replayed in the same cache mode"
    assert (heading in printed) == bool(second.extra.get("prediction_check")), printed


def test_check_predictions_with_nothing_to_check_says_why_and_is_not_a_success(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN --check-predictions without a probe (so the verdict prices no flag) THEN the run says that nothing was
    checked and why, in the terminal and in the session's notes, and exits 1 instead of 0."""
    out = tmp_path / "run"
    argv = [
        "run",
        str(small_draft),
        "-q",
        "--no-probe",
        "--devices",
        "cpu",
        "--check-predictions",
        "-o",
        str(out),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    why = "--check-predictions: nothing was checked: no ceilings were measured (--no-probe), so the verdict priced no flag"
    assert f"ckptprof run: {why}\n" in err
    session = Session.load(out / "session.json")
    assert why in session.notes
    assert "prediction_check" not in session.extra


def test_a_strategy_whose_package_is_missing_is_unavailable_not_failed(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN fastsafetensors not installed WHEN it is compared with sglang THEN exit 0, one line saying it is
    unavailable and why, and its reason printed whole (the table cell used to cut it mid-word)."""
    if importlib.util.find_spec("fastsafetensors") is not None:
        pytest.skip("fastsafetensors is installed here: the strategy is available")
    argv = [
        "run",
        str(small_draft),
        "--no-probe",
        "-q",
        "--strategy",
        "sglang,fastsafetensors",
        "-o",
        str(tmp_path),
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert (
        "ckptprof run: fastsafetensors is unavailable here: fastsafetensors is not installed" in captured.err
    )
    assert (
        "fastsafetensors unavailable: fastsafetensors is not installed (pip install fastsafetensors)"
        in captured.out
    )


def test_the_readme_api_line_works_after_a_plain_import(small_draft: Path) -> None:
    """`import ckptprof; ckptprof.replay(...)`, as the README writes it (it raised AttributeError unless the
    replay subpackage had been imported first), and `import ckptprof` alone still leaves torch unimported."""
    code = (
        "import sys, ckptprof\n"
        "assert 'torch' not in sys.modules\n"
        f"session = ckptprof.replay({str(small_draft)!r}, devices='cpu', probe=False)\n"
        "print(session.verdict.bottleneck)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in BOTTLENECKS


def _run_with(package: EnginePackage, argv: list[str], calls: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckptprof", *argv],
        capture_output=True,
        text=True,
        env=package.env(calls),
        timeout=600,
    )


@pytest.mark.engine
def test_faithful_drives_the_installed_sglangs_own_iterator(
    small_draft: Path, tmp_path: Path, sglang_package: EnginePackage
) -> None:
    """GIVEN an importable sglang (a stand-in with 0.5.23's iterator functions, or in the engine tier the real
    release) WHEN run --faithful THEN the faithful pass goes through SGLang's own function with the profile's
    keywords, and the session and summary say so."""
    calls = tmp_path / "calls.jsonl"
    argv = ["run", str(small_draft), "--tp", "2", "--no-probe", "--faithful", "-o", str(tmp_path / "s")]
    done = _run_with(sglang_package, [*argv, "--json", str(tmp_path / "s.json")], calls)
    assert done.returncode == 0, done.stderr
    session = json.loads((tmp_path / "s.json").read_text())
    # the installed release picked the profile, and the function of its default path ran once per rank
    version = sglang_package.version
    assert session["config"]["sglang_release"]["version"] == version
    profile = profile_for_version(version)
    call = own_call(profile.default_strategy, dict(profile.default_params))
    assert call is not None
    assert session["config"]["faithful_source"] == (
        f"SGLang's own {call.function} (sglang {version}, installed here)"
    )
    made = sglang_package.calls(calls)
    assert made is None or made == [{"function": call.function, "files": 8, **call.kwargs}] * 2
    assert f"faithful pass: SGLang's own {call.function}" in done.stdout
    # every rank has the faithful wall of that pass beside its decomposed one
    for rank in session["ranks"]:
        (model,) = rank["models"]
        assert model["faithful_wall_s"] > 0 and rank["status"] == "ok"
    # a path the release has no function for keeps the replica, and says which function is missing
    if calls.exists():
        calls.unlink()
    done = _run_with(
        sglang_package,
        [
            *argv[:-1],
            str(tmp_path / "t"),
            "--strategy",
            "sglang-mt-completed",
            "--json",
            str(tmp_path / "t.json"),
        ],
        calls,
    )
    assert done.returncode == 0, done.stderr
    source = json.loads((tmp_path / "t.json").read_text())["config"]["faithful_source"]
    completed = own_call("sglang-mt-completed", {})
    assert completed is not None
    # 0.5.23 (and its stand-in) has no such function any more; a release that still has it drives it
    if sglang_package.real and call_problem_here(completed) is None:
        assert source.startswith(f"SGLang's own {completed.function}"), source
    else:
        assert (
            source == f"ckptprof's replica: sglang {version} has no multi_thread_safetensors_weights_iterator"
        )
        assert not calls.exists()


def call_problem_here(call: OwnCall) -> str | None:
    """What the installed release lacks for ``call`` (imports the engine in this process)."""
    from ckptprof.loader.strategies.sglang_own import call_problem

    return call_problem(call)


@pytest.mark.engine
def test_faithful_says_the_replica_ran_when_sglang_is_not_importable(
    small_draft: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a host without sglang (whether or not this one has it: the engine tier runs this test beside the real one)
    from ckptprof.loader.strategies import sglang_own

    monkeypatch.setattr(sglang_own, "installed", lambda package: False)
    assert main(["run", str(small_draft), "--no-probe", "--faithful", "-o", str(tmp_path / "s")]) == 0
    assert "faithful pass: ckptprof's replica of SGLang's sequence (sglang is not installed here)" in (
        capsys.readouterr().out
    )


def test_sample_threads_gives_shares_of_sglangs_own_load(small_draft: Path, tmp_path: Path) -> None:
    """GIVEN --sample-threads WHEN a cold TP2 replay runs its faithful pass THEN each rank's model holds the shares of
    that pass's wall sampled from the kernel, and the summary prints them."""
    from ckptprof.render import rows

    argv = ["run", str(small_draft), "--tp", "2", "--cache", "cold", "--no-probe", "--sample-threads", "-q"]
    assert main([*argv, "-o", str(tmp_path)]) == 0
    session = Session.load(tmp_path / "session.json")
    assert session.config["faithful_rounds"] == 1 and session.config["sample_threads"] is True
    for rank in session.ranks:
        assert rank.started_monotonic is not None
        (model,) = rank.models
        shares = model.faithful_sampled_shares
        assert shares is not None and set(shares) == {"storage", "page_cache", "cpu", "waiting"}
        assert abs(sum(shares.values()) - 1.0) < 1e-3
        # the faithful pass timed its own copies: a part of its wall, and the ticks inside them a part of each share
        assert model.faithful_copy_s is not None and model.faithful_wall_s is not None
        assert 0.0 < model.faithful_copy_s <= model.faithful_wall_s
        in_copies = model.faithful_sampled_copy_shares
        assert in_copies is not None and set(in_copies) == set(shares)
        assert all(in_copies[k] <= shares[k] + 1e-3 for k in shares), (in_copies, shares)
    # AND a warm load, whose faithful pass the kernel saw read nothing from the device, has no storage share
    warm = tmp_path / "warm"
    assert (
        main(
            [
                "run",
                str(small_draft),
                "--tp",
                "2",
                "--cache",
                "warm",
                "--no-probe",
                "--sample-threads",
                "-q",
                "-o",
                str(warm),
            ]
        )
        == 0
    )
    for rank in Session.load(warm / "session.json").ranks:
        for model in rank.models:
            loaded = sum(shard.bytes for shard in model.shards)
            if model.disk and (model.faithful_storage_bytes or 0) <= FETCHED_NOTHING * loaded:
                assert (
                    model.faithful_sampled_shares is not None
                    and model.faithful_sampled_shares["storage"] == 0.0
                )
    # the verdict names the bottleneck from the sampled shares of SGLang's own wall
    assert session.verdict is not None and session.verdict.sampled_shares is not None
    assert "(its threads sampled)" in session.verdict.summary or session.verdict.bottleneck in (
        "mixed",
        "rank-skew",
    )
    labels = [label for label, _ in rows.key_metrics(session)]
    assert any("threads sampled in the kernel" in label for label in labels)

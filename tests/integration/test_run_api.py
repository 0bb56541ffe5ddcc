"""`ckptprof.replay()` and `ckptprof run` are one run: the same request gives the same session, defaults included
(the release profile and its path, the file order, the page cache left as it is, the rank timeout)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ckptprof
from ckptprof.cli.main import main
from ckptprof.errors import UsageError
from ckptprof.run import RunRequest, resolve
from ckptprof.run.execute import rank_timeout_s
from ckptprof.run.policy import release_order
from ckptprof.session import Session

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def comparable(session: Session) -> dict[str, Any]:
    """What a request decides, without what each pass measures (walls, pids, residency percentages, the memory
    available when vLLM's prefetch rule was applied)."""
    config = json.loads(json.dumps(session.to_dict()["config"]))  # as saved, whatever type holds it in memory
    decision = (config.get("vllm_release") or {}).get("prefetch_decision")
    if decision is not None:
        assert decision.pop("available_bytes") > 0
    return {
        "config": config,
        "models": [
            (m.role, m.path, [(s.file, s.bytes, s.tensors) for s in m.shards]) for m in session.models
        ],
        "ranks": [
            (r.rank, r.device, r.status, [(m.role, [s.file for s in m.shards]) for m in r.models])
            for r in session.ranks
        ],
        "server_log": None if session.server_log is None else session.server_log.to_dict(),
        "strategies": None
        if session.strategies is None
        else [row.strategy for row in session.strategies.rows],
    }


def cli_session(tmp_path: Path, argv: list[str]) -> Session:
    out = tmp_path / "cli-run"
    code = main(["run", *argv, "--no-probe", "--devices", "cpu", "-q", "-o", str(out)])
    assert code == 0
    return Session.load(out / "session.json")


@pytest.mark.parametrize(
    ("argv", "fields"),
    [
        # every default left to the policy: the release's path (sglang-mt, 8 threads), sorted order, as-is cache
        ([], {}),
        (
            ["--tp", "2", "--cache", "warm", "--strategy", "sglang,no-mmap"],
            {"tp": 2, "cache": "warm", "strategy": "sglang,no-mmap"},
        ),
        # a vLLM server's log: vLLM's loading, both sides of its prefetch rule, the log's phases in the session
        (["--log", str(LOGS / "vllm_tp4_ready.log")], {"server_log": str(LOGS / "vllm_tp4_ready.log")}),
    ],
    ids=["defaults", "two-strategies", "vllm-log"],
)
def test_the_api_and_the_command_line_give_the_same_session(
    small_draft: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    fields: dict[str, Any],
) -> None:
    monkeypatch.delenv("CKPTPROF_RANK_TIMEOUT_S", raising=False)
    by_cli = cli_session(tmp_path, [str(small_draft), *argv])
    by_api = ckptprof.replay(small_draft, probe=False, devices="cpu", **fields)
    assert comparable(by_api) == comparable(by_cli)
    # the comparison is not empty: the policy's choices are in the config both carry
    release = by_api.config["sglang_release" if by_api.server_log is None else "vllm_release"]
    assert release["why"] and by_api.config["order"] == release_order(release)


def test_the_api_defaults_are_the_command_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CKPTPROF_RANK_TIMEOUT_S", raising=False)
    assert rank_timeout_s(RunRequest()) == 1800.0  # a hung NFS server ends an API run too
    assert rank_timeout_s(RunRequest(rank_timeout_s=0)) == 0
    config = resolve(RunRequest(target="unused"))
    release = config.release
    assert config.engine == "sglang"
    assert config.order == ("sorted" if release["sorted_files"] else "glob")
    params = release.get("default_params") or {}
    assert config.strategies == [(release["default_strategy"], params)]
    assert RunRequest().cache == "as-is" and RunRequest().devices is None


def test_a_request_is_refused_before_anything_runs() -> None:
    with pytest.raises(UsageError, match=r"^--tp must be at least 1$"):
        resolve(RunRequest(tp=0))
    with pytest.raises(UsageError, match=r"^--vllm-version goes with --engine vllm$"):
        resolve(RunRequest(engine="sglang", vllm_version="0.33.0"))
    with pytest.raises(
        UsageError, match=r"^--cache lukewarm: choose one of cold, warm, as-is, or cold,warm for both"
    ):
        resolve(RunRequest(cache="lukewarm"))
    with pytest.raises(TypeError, match=r"^unknown run field\(s\): tp_size$"):
        RunRequest().with_fields(tp_size=8)
    with pytest.raises(UsageError, match=r"^--draft-strategy: there is no draft"):
        resolve(RunRequest(draft_strategy="auto"))

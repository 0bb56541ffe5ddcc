"""ckptprof watch's process classifier, command-line reader and /proc parsers, on the titles and files the engines
and the kernel really produce."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from ckptprof.watch import procs
from ckptprof.watch.cmdline import model_args
from ckptprof.watch.counters import ProcessReader, parse_io, parse_stat


@pytest.mark.parametrize(
    ("name", "cmdline", "engine", "kind", "label"),
    [
        ("sglang::schedul", ["sglang::scheduler_TP3"], "sglang", "rank", "TP3"),
        ("sglang::schedul", ["sglang::scheduler_DP1_TP3"], "sglang", "rank", "DP1 TP3"),
        ("sglang::schedul", ["sglang::scheduler_PP1_TP0"], "sglang", "rank", "PP1 TP0"),
        ("sglang::schedul", ["sglang::scheduler"], "sglang", "rank", "TP0"),
        ("sglang::detoken", ["sglang::detokenizer"], "sglang", "helper", "sglang::detokenizer"),
        ("VLLM::Worker_TP", ["VLLM::Worker_TP5"], "vllm", "rank", "TP5"),
        ("VLLM::Worker_PP", ["VLLM::Worker_PP1_TP2"], "vllm", "rank", "PP1 TP2"),
        ("VllmWorker-2", ["VllmWorker-2"], "vllm", "rank", "TP2"),
        ("VLLM::EngineCor", ["VLLM::EngineCore"], "vllm", "engine-core", "VLLM::EngineCore"),
        # ckptprof run's spawned rank: multiprocessing's command line, the title in comm (loader/ranks.py)
        (
            "ckptprof:TP3",
            [
                "python",
                "-c",
                "from multiprocessing.spawn import spawn_main; spawn_main()",
                "--multiprocessing-fork",
            ],
            "ckptprof",
            "rank",
            "TP3",
        ),
        (
            "python",
            ["python", "-m", "vllm.entrypoints.cli.main", "EngineCore_DP1"],
            "vllm",
            "engine-core",
            "DP1",
        ),
    ],
)
def test_the_engines_titles_are_recognised(
    name: str, cmdline: list[str], engine: str, kind: str, label: str
) -> None:
    role = procs.classify_process(name, cmdline)
    assert role is not None
    assert (role.engine, role.kind, role.label) == (engine, kind, label)


@pytest.mark.parametrize(
    "cmdline",
    [
        ["sleep", "30"],
        ["python", "train.py", "--model-path", "/data/x"],  # names a checkpoint, but no server process
        ["bash", "-c", "echo Worker"],
        ["python", "-m", "sglang.launch_server", "--model-path", "/m"],  # the launcher itself loads nothing
    ],
)
def test_other_processes_are_not_ranks(cmdline: list[str]) -> None:
    role = procs.classify_process(cmdline[0], cmdline)
    assert role is None or role.kind != "rank"


def test_a_launcher_command_names_its_engine() -> None:
    assert procs.launcher_engine(["python3", "-m", "sglang.launch_server", "--tp", "8"]) == "sglang"
    assert procs.launcher_engine(["/usr/bin/vllm", "serve", "/m"]) == "vllm"
    assert procs.launcher_engine(["python", "-m", "vllm.entrypoints.openai.api_server"]) == "vllm"
    assert procs.launcher_engine(["python", "-m", "ckptprof", "run", "/m", "--tp", "8"]) == "ckptprof"
    assert procs.launcher_engine(["sleep", "30"]) is None


def test_ckptprof_runs_rank_title_is_the_one_watch_recognises() -> None:
    from ckptprof.loader.ranks import RANK_TITLE

    title = RANK_TITLE.format(rank=12)
    assert len(title) <= 15  # comm keeps 15 bytes: the rank number must survive
    role = procs.classify_process(title, ["python"])
    assert role is not None and (role.engine, role.kind, role.tp_rank) == ("ckptprof", "rank", 12)


def test_ckptprof_runs_checkpoints_come_from_its_positional_and_draft() -> None:
    run = [
        "python",
        "-m",
        "ckptprof",
        "run",
        "--tp",
        "8",
        "--devices",
        "cuda:0",
        "/v",
        "-d",
        "/d",
        "-o",
        "/out",
    ]
    assert [(m.role, m.path, m.flag) for m in model_args(run)] == [
        ("target", "/v", "run TARGET"),
        ("draft", "/d", "run --draft"),
    ]
    # --model is not run's flag; the built-in draft (no TARGET) names no folder
    assert model_args(["/usr/bin/ckptprof", "run", "--cache=cold", "--faithful", "--draft=/d2"]) == [
        model_args(["ckptprof", "run", "--draft", "/d2"])[0]
    ]
    assert model_args(["ckptprof", "run", "--synth-size", "64MB", "-q"]) == []


def test_the_run_flags_that_take_a_value_are_all_known_to_watch() -> None:
    import argparse

    from ckptprof.cli.run_cmd import RunCommand
    from ckptprof.watch.cmdline import RUN_VALUE_FLAGS

    parser = argparse.ArgumentParser()
    RunCommand().prepare_parser(parser)
    takes_value = {s for a in parser._actions if a.option_strings and a.nargs != 0 for s in a.option_strings}
    assert takes_value == RUN_VALUE_FLAGS


def test_model_paths_come_from_the_flags_each_engine_spells() -> None:
    sglang = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/v",
        "--speculative-draft-model-path=/d",
    ]
    assert [(m.role, m.path, m.flag) for m in model_args(sglang)] == [
        ("target", "/v", "--model-path"),
        ("draft", "/d", "--speculative-draft-model-path"),
    ]
    vllm = ["vllm", "serve", "/v", "--speculative-config", '{"model": "/d", "num_speculative_tokens": 3}']
    assert [(m.role, m.path) for m in model_args(vllm)] == [("target", "/v"), ("draft", "/d")]
    assert [(m.role, m.path) for m in model_args(["python", "x.py", "--model", "/a", "--model", "/b"])] == [
        ("target", "/b")
    ]
    assert model_args(["vllm", "serve", "--help"]) == []


def test_stat_and_io_are_parsed_field_by_field() -> None:
    # A command name with spaces and parentheses, as a process may title itself.
    stat = (
        "42 (a (b) c) S 1 42 42 0 -1 4194560 500 0 7 0 150 30 0 0 20 0 12 0 99 1000 2560 18446744073709551615"
    )
    majflt, user_s, system_s, threads, rss = parse_stat(stat)
    ticks = os.sysconf("SC_CLK_TCK")
    assert (majflt, threads) == (7, 12)
    assert (user_s, system_s) == (150 / ticks, 30 / ticks)
    assert rss == 2560 * os.sysconf("SC_PAGE_SIZE")
    io = parse_io("rchar: 10\nwchar: 0\nsyscr: 3\nsyscw: 0\nread_bytes: 4096\nwrite_bytes: 0\n")
    assert (io["read_bytes"], io["syscr"], io["rchar"]) == (4096, 3, 10)


def test_a_live_process_is_read_and_a_gone_one_is_none(tmp_path: object) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(50_000_000); time.sleep(30)"])
    try:
        reader = ProcessReader(proc.pid)
        deadline = time.monotonic() + 10
        counters = reader.read(time.monotonic())
        while counters is not None and counters.rss_bytes < 50_000_000 and time.monotonic() < deadline:
            time.sleep(0.05)
            counters = reader.read(time.monotonic())
        assert counters is not None
        assert counters.rss_bytes >= 50_000_000
        assert counters.threads >= 1 and counters.read_bytes is not None
        assert sum(counters.thread_classes.values()) == counters.threads
    finally:
        proc.kill()
        proc.wait()
    assert reader.read(time.monotonic()) is None


def test_a_pid_that_does_not_exist_is_said_in_one_line() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(procs.WatchTargetError, match=rf"pid {proc.pid}: no such process"):
        procs.discover(proc.pid)


def _tree(shell: str) -> subprocess.Popen[bytes]:
    """A process tree whose processes carry the engines' titles as their argv[0] (bash's exec -a), as setproctitle
    leaves them."""
    return subprocess.Popen(["bash", "-c", shell], start_new_session=True)


def _discover_when(pid: int, ranks: int, helpers: int) -> procs.Discovery:
    """Discovery once every process of the tree has taken its title (a forked subshell keeps the shell's command line
    until it execs)."""
    deadline = time.monotonic() + 10
    found = procs.discover(pid)
    while (len(found.ranks), len(found.helpers)) != (ranks, helpers) and time.monotonic() < deadline:
        time.sleep(0.05)
        found = procs.discover(pid)
    return found


@pytest.mark.parametrize(
    ("shell", "expected", "helpers"),
    [
        (  # vLLM at TP2: API server -> engine core -> one worker per rank
            "(exec -a VLLM::EngineCore bash -c '(exec -a VLLM::Worker_TP0 sleep 30) & "
            "(exec -a VLLM::Worker_TP1 sleep 30) & wait') & wait",
            [("vllm", "TP0"), ("vllm", "TP1")],
            ["VLLM::EngineCore"],
        ),
        (  # vLLM at TP1: the engine core loads the weights itself
            "(exec -a VLLM::EngineCore sleep 30) & wait",
            [("vllm", "TP0")],
            [],
        ),
        (  # SGLang: launcher -> one scheduler per rank + the detokenizer
            "(exec -a sglang::scheduler_TP1 sleep 30) & (exec -a sglang::scheduler_TP0 sleep 30) & "
            "(exec -a sglang::detokenizer sleep 30) & wait",
            [("sglang", "TP0"), ("sglang", "TP1")],
            ["sglang::detokenizer"],
        ),
    ],
)
def test_rank_processes_are_found_in_each_engines_process_tree(
    shell: str, expected: list[tuple[str, str]], helpers: list[str]
) -> None:
    tree = _tree(shell)
    try:
        found = _discover_when(tree.pid, len(expected), len(helpers))
    finally:
        os.killpg(tree.pid, 9)
        tree.wait()
    assert [(r.role.engine, r.label) for r in found.ranks] == expected
    assert sorted(role.title for _, role in found.helpers) == helpers
    assert found.engine == expected[0][0]


def test_a_rank_is_found_with_its_parent_the_process_that_reaps_it() -> None:
    # watch recovers a rank's last reads from its parent's /proc/PID/io at its reap (watch/reaped.py)
    tree = _tree("(exec -a sglang::scheduler_TP0 sleep 30) & wait")
    try:
        found = _discover_when(tree.pid, 1, 0)
    finally:
        os.killpg(tree.pid, 9)
        tree.wait()
    assert [(r.label, r.ppid) for r in found.ranks] == [("TP0", tree.pid)]


def test_a_ranks_forked_child_with_its_title_is_no_other_rank() -> None:
    # a process forked by a rank keeps the rank's title (fork copies what setproctitle wrote): still that one rank
    tree = _tree(
        "(exec -a sglang::scheduler_TP0 bash -c '(exec -a sglang::scheduler_TP0 sleep 30) & wait') & "
        "(exec -a sglang::scheduler_TP1 sleep 30) & wait"
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            titled = [
                child
                for child in psutil.Process(tree.pid).children(recursive=True)
                if procs.classify_process(*procs._describe(child)) is not None
            ]
            if len(titled) == 3:
                break
            time.sleep(0.05)
        found = procs.discover(tree.pid)
    finally:
        os.killpg(tree.pid, 9)
        tree.wait()
    assert len(titled) == 3  # the child is there, titled as its parent
    assert [r.label for r in found.ranks] == ["TP0", "TP1"]

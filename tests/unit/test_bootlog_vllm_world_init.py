"""vLLM's torch.distributed step: each worker's `world_size=.. rank=.. backend=..` record (INFO right before
init_process_group from about 0.12) begins it, and `rank N in world size N is assigned as ...` (initialize_model_parallel,
once its groups exist) ends it. 0.11 logs the first at DEBUG only: its assignment line alone makes no step up."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes

CONFIG = b"INFO 03-08 20:37:30 [core.py:93] Initializing a V1 LLM engine (v0.16.0) with config: model='m', tensor_parallel_size=2\n"


def _worker(rank: int, second: int, message: str) -> bytes:
    return f"(Worker_TP{rank} pid={100 + rank}) INFO 03-08 20:37:{second:02d} [parallel_state.py:1234] {message}\n".encode()


def _world(rank: int, second: int) -> bytes:
    return _worker(
        rank,
        second,
        f"world_size=2 rank={rank} local_rank={rank} distributed_init_method=tcp://127.0.0.1:53985 backend=nccl",
    )


def _assigned(rank: int, second: int) -> bytes:
    return _worker(
        rank,
        second,
        f"rank {rank} in world size 2 is assigned as DP rank 0, PP rank 0, TP rank {rank}, EP rank {rank}",
    )


LOAD = b"(Worker_TP0 pid=100) INFO 03-08 20:37:41 [gpu_model_runner.py:4124] Starting to load model /m...\n"


def test_each_workers_world_init_is_the_init_distributed_step() -> None:
    """GIVEN two workers' world records and the assignment line, which vLLM logs once, on the node's first rank
    (info_once) WHEN the log is read THEN init-distributed spans both workers and ends on both at that line."""
    log = CONFIG + _world(0, 36) + _world(1, 37) + _assigned(0, 40) + LOAD
    report = analyze_bytes(log)
    init = next(phase for phase in report.phases if phase.name == "init-distributed")
    assert init.ranks == 2
    assert init.seconds == 4.0  # from the first world record to the assignment
    assert [phase.name for phase in report.phases] == ["init-distributed", "load-weights"]
    assert not [warning for warning in report.warnings if "init-distributed" in warning]


def test_a_boot_cut_inside_the_world_init_is_in_it() -> None:
    """GIVEN workers that logged their world and nothing after (NCCL waiting for a peer) WHEN the log is read THEN the
    boot stands in init-distributed, the step still open."""
    report = analyze_bytes(CONFIG + _world(0, 36) + _world(1, 36))
    assert report.state == "init-distributed"


def test_an_assignment_with_no_world_record_before_it_opens_nothing() -> None:
    """GIVEN vLLM 0.11, whose world record is a debug one, WHEN only the assignment line is there THEN no
    init-distributed step is made up (its start would be invented)."""
    report = analyze_bytes(CONFIG + _assigned(0, 40) + _assigned(1, 40) + LOAD)
    assert [phase.name for phase in report.phases] == ["load-weights"]


def test_the_data_parallel_adjustment_begins_the_step_too() -> None:
    adjusting = b"(EngineCore_DP1 pid=7) INFO 03-08 20:37:36 [parallel_state.py:1048] Adjusting world_size=4 rank=2 distributed_init_method=tcp://10.0.0.1:1 for DP\n"
    assigned = b"(EngineCore_DP1 pid=7) INFO 03-08 20:37:38 [parallel_state.py:1209] rank 2 in world size 4 is assigned as DP rank 1, PP rank 0, TP rank 0, EP rank 2\n"
    report = analyze_bytes(CONFIG + adjusting + assigned)
    init = next(phase for phase in report.phases if phase.name == "init-distributed")
    assert init.seconds == 2.0


def test_the_tpu_backends_model_loader_begins_the_load() -> None:
    """tpu-inference's get_model logs `Loading model with MODEL_IMPL_TYPE=...` where vLLM's GPU runner logs `Starting to
    load model` (maxtext#3574)."""
    line = b"(EngineCore_DP0 pid=9) INFO 04-04 21:50:30 [model_loader.py:381] Loading model with MODEL_IMPL_TYPE=auto\n"
    report = analyze_bytes(CONFIG + line)
    assert report.state == "load-weights"


def test_a_worker_tagged_by_its_pid_then_by_its_rank_is_one_rank() -> None:
    """GIVEN vLLM V1 workers that log their world init as "(Worker pid=N)" and their load, once they know their rank,
    as "(Worker_TP0 pid=N)" WHEN the log is read THEN each process is one rank, named by its rank: no phase is said
    to be missing on TP0 or on a process id."""
    config = CONFIG.replace(b"tensor_parallel_size=2", b"tensor_parallel_size=1")
    world = b"(Worker pid=374) INFO 04-16 11:16:30 [parallel_state.py:1400] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:1 backend=nccl\n"
    assigned = b"(Worker pid=374) INFO 04-16 11:16:31 [parallel_state.py:1716] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0\n"
    load = (
        b"(Worker_TP0 pid=374) INFO 04-16 11:16:32 [gpu_model_runner.py:4735] Starting to load model m...\n"
    )
    took = b"(Worker_TP0 pid=374) INFO 04-16 11:17:54 [default_loader.py:384] Loading weights took 10.48 seconds\n"
    report = analyze_bytes(config + world + assigned + load + took)
    assert [(phase.name, phase.ranks) for phase in report.phases] == [
        ("init-distributed", 1),
        ("load-weights", 1),
    ]
    assert not [warning for warning in report.warnings if "not logged by" in warning], report.warnings


def _untagged(line: bytes) -> bytes:
    """The record as a collector that lost the worker's tag keeps it (podman's stream of vLLM 0.16, batch 35)."""
    return line[line.index(b") ") + 2 :]


def test_untagged_world_records_are_each_their_workers() -> None:
    """GIVEN two workers' world records with no tag (vLLM's workers log them before their tags are set up), the first
    rank's assignment line (info_once) and TP0's tagged load WHEN the log is read THEN init-distributed is two ranks,
    named TP0 and TP1 as the tags name them (the world is the TP size), not one untagged process."""
    log = CONFIG + b"".join(_untagged(line) for line in (_world(0, 36), _world(1, 37), _assigned(0, 40)))
    report = analyze_bytes(log + LOAD)
    assert [(phase.name, phase.ranks) for phase in report.phases] == [
        ("init-distributed", 2),
        ("load-weights", 1),
    ]
    # TP1 logged the step under its own name (the tags' form): no rank is said to be silent.
    assert report.warnings == (), report.warnings


def test_untagged_world_records_take_the_tag_the_assignment_names() -> None:
    """GIVEN a data-parallel world whose workers are tagged by DP and TP rank, and an untagged world record of global
    rank 3 with an assignment line that says it is DP rank 1, TP rank 1 WHEN the log is read THEN the record is that
    worker's: one rank, "DP1 TP1", and no rank is made up."""
    config = CONFIG.replace(b"tensor_parallel_size=2", b"tensor_parallel_size=2, data_parallel_size=2")
    world = b"INFO 03-08 20:37:36 [parallel_state.py:1234] world_size=4 rank=3 local_rank=1 distributed_init_method=tcp://h:1 backend=nccl\n"
    assigned = b"INFO 03-08 20:37:38 [parallel_state.py:1445] rank 3 in world size 4 is assigned as DP rank 1, PP rank 0, PCP rank 0, TP rank 1, EP rank 3\n"
    tagged = b"(Worker_DP1_TP1 pid=9) INFO 03-08 20:37:39 [parallel_state.py:1234] world_size=4 rank=3 local_rank=1 distributed_init_method=tcp://h:1 backend=nccl\n"
    other = b"(Worker_DP0_TP0 pid=8) INFO 03-08 20:37:36 [parallel_state.py:1234] world_size=4 rank=0 local_rank=0 distributed_init_method=tcp://h:1 backend=nccl\n"
    report = analyze_bytes(config + other + world + assigned + tagged)
    init = next(phase for phase in report.phases if phase.name == "init-distributed")
    assert init.ranks == 2


def test_an_untagged_world_record_with_no_tags_is_the_untagged_process() -> None:
    """GIVEN a single process that logs everything untagged (a node's log of a world of two, its rank 1)
    WHEN the log is read THEN its world record stays the untagged process's: the step ends at its next phase."""
    world = b"INFO 03-08 20:37:36 [parallel_state.py:1234] world_size=2 rank=1 local_rank=0 distributed_init_method=tcp://h:1 backend=nccl\n"
    load = b"INFO 03-08 20:37:41 [gpu_model_runner.py:4124] Starting to load model /m...\n"
    took = b"INFO 03-08 20:37:50 [default_loader.py:384] Loading weights took 9.00 seconds\n"
    report = analyze_bytes(CONFIG + world + load + took)
    assert [(phase.name, phase.ranks, phase.seconds) for phase in report.phases] == [
        ("init-distributed", 1, 5.0),
        ("load-weights", 1, 9.0),
    ]
    # As the untagged process's step it was: ended by inference at the load, which the report says.
    assert report.warnings == (
        "init-distributed: its end never logged by the main process although the boot moved on",
    )


def test_untagged_world_records_take_global_rank_tags() -> None:
    """GIVEN workers tagged by global rank (`VllmWorker rank=1`, V1 before 0.10) whose world records lost their tags
    WHEN the log is read THEN each record is its rank's: init-distributed is two ranks, as the load is."""
    loads = b"".join(
        f"(VllmWorker rank={rank} pid={7 + rank}) INFO 03-08 20:37:41 [gpu_model_runner.py:1] Starting to load model /m...\n".encode()
        for rank in (0, 1)
    )
    log = CONFIG + _untagged(_world(0, 36)) + _untagged(_world(1, 37)) + loads
    assert [(phase.name, phase.ranks) for phase in analyze_bytes(log).phases] == [
        ("init-distributed", 2),
        ("load-weights", 2),
    ]

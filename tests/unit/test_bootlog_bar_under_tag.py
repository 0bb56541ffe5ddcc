"""A bar frame on a line of its own under a worker's tag that stands alone on the line above is that worker's.

Ray prints an actor's tag, then what the actor's tqdm drew, on the next line with no tag of its own
(`(EngineCore_0 pid=1159) (RayWorkerWrapper pid=1273)` over `Loading safetensors checkpoint shards:   7% ...`). Read
as untagged, the frame went to global rank 0 by default, which under a Ray engine core is the engine core's own tag
(`EngineCore_0`, DP0): one rank more than loaded (vllm-benchmarking's gpt-oss-120b at TP4 on four nodes counted 5).
"""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes, analyze_path

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"

CONFIG = (
    "(EngineCore_0 pid=100) INFO 09-10 23:26:51 [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: "
    "model='m', speculative_config=None, tensor_parallel_size=2, pipeline_parallel_size=1\n"
    "(EngineCore_0 pid=100) INFO 09-10 23:27:19 [ray_env.py:63] RAY_NON_CARRY_OVER_ENV_VARS from config: set()\n"
)
FRAMES = (
    "Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]\n",
    "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:01<00:00,  1.56it/s]\n",
)
WORKERS = (
    "(EngineCore_0 pid=100) (RayWorkerWrapper pid=201) INFO 09-10 23:27:29 [gpu_model_runner.py:1953] Starting to "
    "load model m...\n"
    "(EngineCore_0 pid=100) (RayWorkerWrapper pid=202, ip=10.0.0.2) INFO 09-10 23:27:29 [gpu_model_runner.py:1953] "
    "Starting to load model m...\n"
    "(EngineCore_0 pid=100) (RayWorkerWrapper pid=201) INFO 09-10 23:27:31 [default_loader.py:262] Loading weights "
    "took 1.75 seconds\n"
    "(EngineCore_0 pid=100) (RayWorkerWrapper pid=202, ip=10.0.0.2) INFO 09-10 23:27:31 [default_loader.py:262] "
    "Loading weights took 1.80 seconds\n"
)
TAG_ALONE = "\x1b[1;36m(EngineCore_0 pid=100)\x1b[0;0m \x1b[36m(RayWorkerWrapper pid=201)\x1b[0m \n"


def test_a_frame_under_a_workers_tag_alone_is_that_workers() -> None:
    # GIVEN two Ray workers at TP2 under one engine core, the first worker's bar relayed under its tag (Ray flushes
    # the bar's stream before the worker's own records)
    log = CONFIG + "".join(TAG_ALONE + frame for frame in FRAMES) + WORKERS
    # WHEN the log is read
    report = analyze_bytes(log.encode())
    # THEN the load is the two workers', and it ended: no third rank for the bar (the engine core's, or an untagged
    # process's that never ends the load)
    (load,) = report.phases
    assert (load.name, load.model, load.ranks) == ("load-weights", "target", 2)
    assert load.end == "09-10 23:27:31"


def test_a_tag_alone_two_lines_above_names_no_frame() -> None:
    # GIVEN the same, but a line of no tag between the worker's tag and the frames: the tag stood over that line
    between = (
        "(EngineCore_0 pid=100) INFO 09-10 23:27:19 [ray_utils.py:339] No current placement group found.\n"
    )
    log = CONFIG + TAG_ALONE + between + "".join(FRAMES) + WORKERS
    # THEN the frames are untagged, as before: the untagged bar counts as a rank of its own beside the two workers
    (load,) = analyze_bytes(log.encode()).phases
    assert load.ranks == 3


def test_the_ray_run_on_four_nodes_counts_its_four_workers() -> None:
    # GIVEN vLLM 0.10.1.1 at TP4 over Ray on four nodes, whose local worker's bar Ray relays under its tag alone
    report = analyze_path(str(REAL / "vllm-vllm-benchmarking-gptoss120b-tp4-4node-ray-ready.log"))
    # THEN the load counts the four workers (pid1273 here; pid345 and pid343 on other nodes; pid345 again on a
    # fourth), not the engine core (DP0) that drew no bar
    load = next(phase for phase in report.phases if phase.name == "load-weights")
    assert load.ranks == 4


NESTED = "(EngineCore_0 pid=100) (RayWorkerWrapper pid=201) "


def test_a_frame_behind_nested_tags_is_the_inner_workers() -> None:
    # GIVEN the two workers' run, the first worker's frames behind both tags on the frame's own line (Ray's worker
    # tag inside the engine core's), one frame a line and then the frames of one line joined by CRs
    for bars in (
        "".join(NESTED + frame for frame in FRAMES),
        "\r".join(NESTED + frame.rstrip("\n") for frame in FRAMES) + "\n",
    ):
        report = analyze_bytes((CONFIG + bars + WORKERS).encode())
        # THEN the bar is the load's, under its own words, so the loader is read from them; and no third rank
        (bar,) = report.progress
        assert (bar.desc, bar.done, bar.total) == ("Loading safetensors checkpoint shards", 2, 2)
        assert report.loader == "default"
        (load,) = report.phases
        assert load.ranks == 2

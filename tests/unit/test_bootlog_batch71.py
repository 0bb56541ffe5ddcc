"""Batch 71 (reports/cpu/2026-12-07p-bootlog-unseen): Ray's private actor classes and Ray Serve's ready line.

- Ray tags a private actor class's lines with its name as written, leading underscore and all
  (`(_EngineBackgroundProcess pid=4800, ip=...)`, Ray Data's `(_MapWorker pid=2260, ...)`): a process tag like any other.
- Ray Serve's LLM deployment says its vLLM replica serves (`[STATUS] Server is ready.`, then Serve's `Application
  'default' is ready at http://...`): vLLM logs no ready line of its own there.
- Ray Data's vLLM stage logs each batch its engine answered (`[vLLM] Elapsed time for batch ... with size 63: ...`,
  ray/llm/_internal/batch/stages/vllm_engine_stage.py), then `Shutting down vLLM engine`: the engine served, and the
  workers' NCCL errors as it tears down come after ready (batch 71's Ray Data job, read as failed at first sight).
"""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).parents[1] / "fixtures" / "logs" / "real"

DRIVER = "\x1b[36m(_EngineBackgroundProcess pid=4800, ip=10.0.2.213)\x1b[0m "
WORKER = "\x1b[36m(RayWorkerWrapper pid=4893, ip=10.0.2.213)\x1b[0m "
BOOT = (
    f"{DRIVER}INFO 05-19 09:43:41 [llm_engine.py:241] Initializing a V0 LLM engine (v0.8.2) with config: model='m', "
    "speculative_config=None, tensor_parallel_size=2\n"
    f"{DRIVER}INFO 05-19 09:43:51 [model_runner.py:1110] Starting to load model m...\n"
    f"{WORKER}INFO 05-19 09:43:51 [model_runner.py:1110] Starting to load model m...\n"
    f"{DRIVER}INFO 05-19 09:45:55 [loader.py:447] Loading weights took 7.61 seconds\n"
    f"{WORKER}INFO 05-19 09:45:55 [loader.py:447] Loading weights took 7.66 seconds\n"
    f"{DRIVER}INFO 05-19 09:46:18 [llm_engine.py:447] init engine (profile, create kv cache, warmup model) took 22.35 "
    "seconds\n"
)
REPLICA = "\x1b[36m(ServeReplica:default:LLMDeployment:m pid=3174, ip=10.0.2.213)\x1b[0m "
SERVE_READY = (
    f"{REPLICA}INFO 2025-05-19 09:46:18,377 default_LLMDeployment:m a4imwh9z -- [STATUS] Server is ready.\n"
)
APP_READY = (
    "INFO 2025-05-19 09:46:26,426 serve 8988 -- Application 'default' is ready at http://127.0.0.1:8000/.\n"
)


def test_a_private_actor_class_tag_is_a_process_tag() -> None:
    report = analyze_bytes(BOOT.encode())
    # THEN its records are read (none is left as an unknown prefix), and the load counts the driver and the worker
    assert report.unparsed_records == 0
    (load,) = [p for p in report.phases if p.name == "load-weights"]
    assert load.ranks == 2


def test_ray_serves_status_line_says_the_replica_serves() -> None:
    report = analyze_bytes((BOOT + SERVE_READY + APP_READY).encode())
    assert report.state == "ready"
    assert report.phases[-1].name == "ready"


def test_serves_application_line_alone_says_it_serves() -> None:
    report = analyze_bytes((BOOT + APP_READY).encode())
    assert report.state == "ready"


def test_without_a_serve_line_the_boot_is_not_ready() -> None:
    assert analyze_bytes(BOOT.encode()).state != "ready"


def test_the_real_ray_serve_logs_are_ready() -> None:
    for name in (
        "vllm-anyscale-templates-qwen25-32b-v082-v0-ray-serve-tp4-rayworker-a10g-ready",
        "vllm-e2e-llm-workflows-qwen25-7b-v072-v0-ray-serve-lora-engine-bg-process-ready",
    ):
        report = analyze_bytes((REAL / f"{name}.log").read_bytes())
        assert report.state == "ready", name
        # every record is read: vLLM's behind Ray's tags (the private actor classes' among them) and Serve's own
        assert report.unparsed_records == 0, name


def test_the_ray_data_jobs_workers_are_four_ranks() -> None:
    # GIVEN vLLM V1 at TP4 inside Ray Data: each worker's line behind `(_MapWorker ...)` or Ray Data's stage tag, then
    # `(VllmWorker rank=N pid=...)`
    log = (
        REAL
        / "vllm-anyscale-templates-qwen25-32b-v082-v1-ray-data-tp4-nested-workers-ready-shutdown-nccl-oom.log"
    )
    report = analyze_bytes(log.read_bytes())
    ranks = {p.name: p.ranks for p in report.phases if p.model == "target"}
    assert ranks["load-weights"] == 4 and ranks["cuda-graph"] == 4


def test_serves_own_prefix_gives_the_ready_step_its_time() -> None:
    # GIVEN Serve's line under its own logger's prefix: a dated time with milliseconds after a comma, then " -- "
    report = analyze_bytes((BOOT + APP_READY).encode())
    ready = report.phases[-1]
    # THEN the ready step ends at Serve's stamp, its milliseconds written as a dated stamp's are
    assert (ready.name, ready.end) == ("ready", "2025-05-19 09:46:26.426")
    assert report.unparsed_records == 0


STAGE = "\x1b[36m(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=3192, ip=10.0.49.196)\x1b[0m "
RANK3 = f"{STAGE}\x1b[1;36m(VllmWorker rank=3 pid=3494)\x1b[0;0m "
RAY_DATA_BOOT = (
    f"{RANK3}INFO 04-29 15:40:42 [gpu_model_runner.py:1534] Starting to load model m...\n"
    f"{RANK3}INFO 04-29 15:41:30 [gpu_model_runner.py:1534] Graph capturing finished in 48 secs, took 2.13 GiB\n"
)
BATCH_DONE = (
    f"{STAGE}[vLLM] Elapsed time for batch c2f4a1f51c324ab7a869761a50488ba2 with size 63: 39.16077913100003\n"
)
TEARDOWN = (
    f"{STAGE}Shutting down vLLM engine\n"
    f"{RANK3}Traceback (most recent call last):\n"
    f'{RANK3}  File "/home/ray/anaconda3/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", line 9, in shutdown\n'
    f"{RANK3}torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:133, "
    "unhandled cuda error\n"
)


def test_ray_datas_batch_line_says_the_engine_served_so_teardown_errors_come_after_ready() -> None:
    report = analyze_bytes((RAY_DATA_BOOT + BATCH_DONE + TEARDOWN).encode())
    assert report.state == "ready"
    assert report.failure is None
    assert any("after the server was ready" in warning for warning in report.warnings)


def test_without_a_batch_line_the_workers_errors_fail_the_boot() -> None:
    assert analyze_bytes((RAY_DATA_BOOT + TEARDOWN).encode()).state == "failed"

"""Batch 74 (reports/cpu/2026-12-07t-bootlog-unseen): a step whose begin a rank never logs, while another is open on it.

tpu-inference's engine logs `Loading model with MODEL_IMPL_TYPE=...`, which begins the load, and no `Loading weights
took`: the next line of a step is the KV cache's `GPU KV cache size`, an end whose begin is not logged. A rank does
one step at a time, so the load ran until the KV cache's step began. The rank's last end (the process group's, before
the load began) is no start for it: the log says only the KV cache's end, so the load ends there (inferred) and the
KV cache is a point. A stated duration says when the next step began, and the load ends there.
"""

from __future__ import annotations

from ckptprof.bootlog import BootReport, PhaseReport, analyze_bytes

CORE = "(EngineCore_DP0 pid=3198394) "
BEGIN = (
    f"{CORE}INFO 01-22 20:31:17 [parallel_state.py:1214] world_size=1 rank=0 local_rank=0 "
    "distributed_init_method=file:///tmp/x backend=gloo\n"
    f"{CORE}INFO 01-22 20:31:17 [parallel_state.py:1165] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, "
    "TP rank 0, EP rank 0\n"
    f"{CORE}INFO 01-22 20:31:18 [model_loader.py:370] Loading model with MODEL_IMPL_TYPE=auto\n"
    f"{CORE}INFO 01-22 20:31:22 [weight_utils.py:162] Loading weights from /m/model-00001-of-00163.safetensors\n"
)
KV_END = f"{CORE}INFO 01-22 20:37:48 [kv_cache_utils.py:1305] GPU KV cache size: 690,432 tokens\n"


def _phase(report: BootReport, name: str) -> PhaseReport:
    (phase,) = [p for p in report.phases if p.name == name]
    return phase


def test_an_open_load_ends_where_the_next_steps_first_record_is() -> None:
    report = analyze_bytes((BEGIN + KV_END).encode())
    load, kv = _phase(report, "load-weights"), _phase(report, "kv-cache")
    assert (load.start, load.end) == ("01-22 20:31:18", "01-22 20:37:48")
    # THEN the KV cache did not start at the process group's end, before the load began
    assert (kv.start, kv.end) == ("01-22 20:37:48", "01-22 20:37:48")
    # AND the load's end is inferred: the warning says its end line never came
    assert any("Loading weights took` never logged" in warning for warning in report.warnings)


def test_a_stated_duration_of_the_next_step_ends_the_open_load_at_its_start() -> None:
    capture = f"{CORE}INFO 01-22 20:37:48 [gpu_model_runner.py:2575] Graph capturing finished in 40 secs, took 1 GiB\n"
    report = analyze_bytes((BEGIN + capture).encode())
    load, graph = _phase(report, "load-weights"), _phase(report, "cuda-graph")
    assert load.end == "01-22 20:37:08"
    assert (graph.start, graph.end) == ("01-22 20:37:08", "01-22 20:37:48")


def test_without_an_open_step_the_implicit_start_is_the_ranks_last_end() -> None:
    # GIVEN the load's end logged: the KV cache's step began where the load ended, as before
    took = f"{CORE}INFO 01-22 20:37:40 [default_loader.py:280] Loading weights took 380.00 seconds\n"
    report = analyze_bytes((BEGIN + took + KV_END).encode())
    kv = _phase(report, "kv-cache")
    assert (kv.start, kv.end) == ("01-22 20:37:40", "01-22 20:37:48")


ARGS = (
    f"{CORE}INFO 01-22 20:31:13 [core.py:97] Initializing a V1 LLM engine (v0.10.2rc3) with config: model='m', "
    "speculative_config=None, tensor_parallel_size=8, pipeline_parallel_size=1, data_parallel_size=1\n"
)


def test_a_stated_world_of_one_process_bounds_the_ranks_the_arguments_ask_for() -> None:
    # GIVEN --tensor-parallel-size 8 that one process serves (tpu-inference drives eight chips from it, world_size=1)
    report = analyze_bytes((ARGS + BEGIN + KV_END).encode())
    # THEN no rank is missing: the ranks themselves said the world is one process
    assert not any("logged no boot record" in warning for warning in report.warnings)


def test_without_a_stated_world_the_arguments_say_how_many_ranks_there_are() -> None:
    unstated = "".join(line + "\n" for line in BEGIN.splitlines() if "world" not in line)
    report = analyze_bytes((ARGS + unstated + KV_END).encode())
    assert any("DP1, DP2, DP3, DP4, DP5, DP6, DP7 logged no boot record" in w for w in report.warnings)


def test_an_end_stamped_before_the_open_step_began_does_not_end_it() -> None:
    # GIVEN the KV cache's end relayed late, stamped before the load began: it says nothing of when the load ended
    early = KV_END.replace("01-22 20:37:48", "01-22 20:31:10")
    load = _phase(analyze_bytes((BEGIN + early).encode()), "load-weights")
    assert load.end is None

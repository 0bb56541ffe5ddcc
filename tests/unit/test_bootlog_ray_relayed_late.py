"""Ray relays a worker's deduplicated lines late, out of the worker's own order: a begin or an end of a step that
arrives after the same worker's later record of that step is that step, not a second run of it.

vLLM 0.10.1.1 at TP4 on four Ray nodes (vllm-benchmarking's gpt-oss-120b) shows both:
- pid1273's `Starting to load model` (23:27:29, `[repeated 3x across cluster]`) after its `Loading model from
  scratch` (23:27:30);
- a worker's `Loading weights took 1226.70 seconds` (23:47:57) after its `Model loading took ... 1229.7 seconds`
  (23:48:00).
Read as second begins or ends, either opened a second load on one worker, which with nothing said of speculation reads
as a draft's. The whole log hid both (the worker's earlier lines opened its load first); an excerpt of it did not.
"""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
GPTOSS = REAL / "vllm-vllm-benchmarking-gptoss120b-tp4-4node-ray-ready.log"

ENGINE = "(EngineCore_0 pid=100) "
A = ENGINE + "(RayWorkerWrapper pid=201) "
B = ENGINE + "(RayWorkerWrapper pid=202, ip=10.0.0.2) "
REPEATED = " [repeated 1x across cluster]"


def _line(tag: str, clock: str, words: str, relayed: str = "") -> str:
    return f"{tag}INFO 09-10 {clock} [gpu_model_runner.py:1953] {words}{relayed}\n"


def _loads(log: str) -> list[tuple[str, str | None, int, float | None]]:
    report = analyze_bytes(log.encode())
    return [(p.name, p.model, p.ranks, p.seconds) for p in report.phases if p.name == "load-weights"]


def test_a_begin_relayed_after_the_workers_next_begin_is_the_same_load() -> None:
    # GIVEN worker A's `Loading model from scratch`, then its `Starting to load model` stamped a second earlier,
    # relayed by Ray's deduplication; both workers end the load
    log = (
        _line(B, "23:27:29", "Starting to load model m...")
        + _line(A, "23:27:30", "Loading model from scratch...")
        + _line(A, "23:27:29", "Starting to load model m...", REPEATED)
        + _line(B, "23:27:40", "Loading weights took 11.00 seconds")
        + _line(A, "23:27:41", "Loading weights took 11.50 seconds")
    )
    # THEN one load, of the target, on both workers; A's step began at the relayed begin's stamp
    assert _loads(log) == [("load-weights", "target", 2, 11.5)]


def test_an_end_relayed_after_the_workers_later_end_ends_the_step() -> None:
    # GIVEN worker B's `Model loading took` (23:48:00), then its `Loading weights took` stamped before it (23:47:57),
    # in a log where Ray deduplicates lines
    log = (
        _line(A, "23:27:29", "Starting to load model m...")
        + _line(B, "23:27:29", "Starting to load model m...", REPEATED)
        + _line(A, "23:47:47", "Loading weights took 1216.75 seconds")
        + _line(B, "23:48:00", "Model loading took 17.2217 GiB and 1229.728125 seconds")
        + _line(B, "23:47:57", "Loading weights took 1226.70 seconds")
    )
    # THEN one load on two workers, ended by B's `Loading weights took`, as it would be read in the worker's order
    assert _loads(log) == [("load-weights", "target", 2, 1226.7)]


def test_a_load_begun_after_the_workers_end_is_a_second_load() -> None:
    # GIVEN the same Ray run, where worker A begins a load again after its first load ended (a second model, here
    # the draft the configuration names)
    log = (
        f"{ENGINE}INFO 09-10 23:26:51 [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: model='m', "
        "speculative_config=SpeculativeConfig(method='eagle3', model='d', num_spec_tokens=3)\n"
        + _line(A, "23:27:29", "Starting to load model m...", REPEATED)
        + _line(A, "23:27:40", "Loading weights took 11.00 seconds")
        + _line(A, "23:27:41", "Starting to load model d...")
        + _line(A, "23:27:42", "Loading weights took 0.70 seconds")
    )
    # THEN two loads: the relay rules leave a begin stamped after the step's end alone
    assert [(name, model) for name, model, _, _ in _loads(log)] == [
        ("load-weights", "target"),
        ("load-weights", "draft"),
    ]


def test_the_real_four_node_runs_excerpt_reads_one_load() -> None:
    # GIVEN the real log's middle 60%, as the excerpt test cuts it (it opens after `speculative_config=None`)
    lines = GPTOSS.read_bytes().split(b"\n")
    cut = int(len(lines) * 0.2)
    excerpt = b"\n".join(lines[cut : len(lines) - cut])
    # THEN one load, of the target, on the four workers, for the seconds the whole log reads
    loads = [(p.model, p.ranks, p.seconds) for p in analyze_bytes(excerpt).phases if p.name == "load-weights"]
    whole = [
        (p.model, p.ranks, p.seconds)
        for p in analyze_bytes(GPTOSS.read_bytes()).phases
        if p.name == "load-weights"
    ]
    assert loads == whole == [("target", 4, 1226.7)]

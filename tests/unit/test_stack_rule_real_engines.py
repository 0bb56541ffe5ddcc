"""The py-spy phase rule (ckptprof.analysis.stacks.phase_of) against real stacks of real loading code.

Where the stacks come from (each frame is written as py-spy's dump writes it, ``function (path:line)``, innermost
first; the paths and line numbers are those the reports show, tracebacks and faulthandler dumps turned innermost
first):

- SGL_*: real ``py-spy dump --nonblocking`` output (py-spy 0.4.3, Python 3.11.7, torch 2.13.0 CPU, safetensors
  0.8.0) of the real SGLang 0.5.23 wheel's own code on this project's VM: its safetensors_weights_iterator (default
  mmap, and disable_mmap) and buffered_multi_thread_safetensors_weights_iterator (2 workers) over an 8-shard 512 MB
  checkpoint evicted from the page cache (POSIX_FADV_DONTNEED) before each pass, every tensor handed to SGLang's
  default_weight_loader or ReplicatedLinear.weight_loader; ``<module> (sgl_drive.py:..)`` is that driver script.
  (The wheel imported with its import-time dependencies in a throwaway venv and import-only stubs for triton and
  torchvision; nothing of it is kept.) Over 83 / 98 / 43 dumps (default / buffered / disable_mmap) the main thread
  read copy 75 / 54 / 9, deserialize 7 / 25 / 33, unclassified 1 / 19 / 1 (the driver's own eviction), and the
  buffered pool's workers deserialize. Two facts only a real dump showed: py-spy shortens a path to the folders
  that have an __init__.py, and SGLang's srt/ and srt/layers/ have none, so its frames read ``linear.py`` and
  ``model_loader/weight_utils.py`` (the first version of the rule, keyed on "sglang/srt/...", missed every worker
  stack); and with disable_mmap 20 of the 43 main-thread samples sat on the iterator's
  ``safetensors.torch.load(f.read())`` line (weight_utils.py:1173) - the whole-file read, which the rule counts as
  deserialize (a Python stack cannot tell the read() from the load on one line).

- VLLM_*: the same on the real vLLM 0.33.0 wheel (its safetensors_weights_iterator with the lazy, eager and
  prefetch strategies, multi_thread_safetensors_weights_iterator with 2 workers; default_weight_loader and
  ReplicatedLinear.weight_loader; ``vllm_drive.py`` the driver). vLLM's folders all have an __init__.py, so its
  frames keep ``vllm/model_executor/...``. Over 67 / 82 / 78 / 45 dumps (lazy / multi-thread / eager / prefetch)
  the main thread read copy 56 / 49 / 13 / 41, deserialize 6 / 21 / 60 / 2, unclassified 5 / 12 / 5 / 1 (the
  driver's eviction and loop); the multi-thread workers deserialize (114 stacks, the rest idle in the pool); the
  prefetch threads read (215 stacks, their coordinating thread included through its qualified name
  ``_prefetch_all_checkpoints.<locals>._run_prefetch``). With the eager strategy 48 of 78 main-thread samples sat
  on ``state_dict = load(f.read())`` (weight_utils.py:1209): the read, counted deserialize.
- SGLANG_BUS_ERROR: sgl-project/sglang issue #6083 ("Fatal Python error: Bus error when loading safetensors check
  point shards", SGLang 0.4.x, Python 3.12, Qwen3): faulthandler's dump at the SIGBUS - a failed page fault on the
  memory-mapped checkpoint - with ``weight_loader (sglang/srt/layers/linear.py:1254)`` innermost, and tqdm's monitor
  thread waiting.
- VLLM_ASCEND_QWEN3_MOE: vllm-project/vllm-ascend issue #2146 (vLLM v0.9.2rc2 from a source checkout): the
  traceback of a failed load, base_loader.load_model -> default_loader.load_weights -> models/qwen3_moe.load_weights.
- VLLM_FASTSAFETENSORS: foundation-model-stack/fastsafetensors issue #14 (vLLM ~0.8, DeepSeek-R1): the traceback
  through deepseek_v2.load_weights, model_loader/loader.py's get_all_weights and its <genexpr>, into
  weight_utils.fastsafetensors_weights_iterator at its ``loader.copy_files_to_device()`` line.
- VLLM_GET_ALL_WEIGHTS: foundation-model-stack/fastsafetensors issue #88 (a recent vLLM, Python 3.12): the stream's
  AutoWeightsLoader generator expressions (models/utils.py:373, :105) over default_loader.get_all_weights.
- SAFETENSORS_MMAP: huggingface safetensors issue #693 (safetensors 0.8.0, torch 2.12, Windows): faulthandler at an
  access violation in safetensors.torch.load_file's mmap backend, inside torch/storage.py's __getitem__; the poster's
  elided Windows paths kept.
- PYSPY_* : real ``py-spy dump --nonblocking`` output (py-spy 0.4.3, Python 3.11.7, safetensors 0.8.0, torch 2.13.0
  CPU) of a script on this project's VM that loads a 64 MB safetensors file the three ways the engines do: bytes
  read whole then safetensors.torch.load (SGLang --weight-loader-disable-mmap, vLLM's eager strategy), and
  safe_open + get_tensor handed to a ``weight_loader`` method that copy_()s it (the lazy default). They show what a
  real dump looks like: methods are qualified (``Layer.weight_loader``), and get_tensor / safe_open never appear
  (they are Rust): in 40 dumps of the lazy loop, 22 caught ``Layer.weight_loader`` at its copy_ line and none a
  safetensors frame.

The names the rule gives a phase were read in the engines' source: SGLang python/sglang/srt/model_loader/
weight_utils.py (safetensors_weights_iterator, multi_thread_safetensors_weights_iterator and
buffered_multi_thread_safetensors_weights_iterator with their nested _load_file, pt_weights_iterator,
default_weight_loader, _prefetch_all_checkpoints / _prefetch_checkpoint_file), layers/linear.py (weight_loader,
weight_loader_v2, _load_fused_module_from_checkpoint: narrow then param_data.copy_), layers/parameter.py
(load_column_parallel_weight, load_row_parallel_weight, load_merged_column_weight, load_qkv_weight),
layers/moe/fused_moe_triton/layer.py (weight_loader, _weight_loader_impl, _weight_loader_physical, _load_w13,
_load_w2); vLLM vllm/model_executor/model_loader/weight_utils.py (the same iterators plus runai_/fastsafetensors_/
multi_thread_pt_, convert_pyslice_to_tensor, default_weight_loader, row_parallel_weight_loader,
sharded_weight_loader's loader, composed_weight_loader's composed_loader, _prefetch_checkpoint /
_prefetch_all_checkpoints), default_loader.py (load_weights, get_all_weights, _get_weights_iterator),
vllm/model_executor/parameter.py and layers/ (the same loaders); safetensors 0.8.0 safetensors/torch.py (load_file,
load, _view2torch; as installed here).
"""

from __future__ import annotations

import pytest

from ckptprof.analysis.stacks import frame_phase, phase_of, top_frames
from ckptprof.watch.stacks import RankStacks, classify, frame_file, frame_name, parse_dump

MONITOR = """\
Thread 28167 (idle): "tqdm_monitor"
    Condition.wait (threading.py:331)
    Event.wait (threading.py:629)
    TMonitor.run (tqdm/_monitor.py:69)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
"""
SGL_HEAD = """\
Process 27831: /tmp/sglvenv/bin/python /tmp/spyexp/sgl_drive.py 45 lazy
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

"""
SGL_DEFAULT_WEIGHT_LOADER = (
    SGL_HEAD
    + """\
Thread 27831 (active): "MainThread"
    default_weight_loader (model_loader/weight_utils.py:1586)
    <module> (sgl_drive.py:38)
"""
    + MONITOR
)
SGL_LINEAR_WEIGHT_LOADER = (
    SGL_HEAD
    + """\
Thread 27831 (active): "MainThread"
    ReplicatedLinear.weight_loader (linear.py:379)
    <module> (sgl_drive.py:36)
"""
)
SGL_GET_TENSOR = (
    SGL_HEAD
    + """\
Thread 27831 (active): "MainThread"
    UntypedStorage.__getitem__ (torch/storage.py:471)
    safetensors_weights_iterator (model_loader/weight_utils.py:1179)
    <module> (sgl_drive.py:34)
"""
)
SGL_DISABLE_MMAP_READ = (
    SGL_HEAD
    + """\
Thread 4250 (active): "MainThread"
    safetensors_weights_iterator (model_loader/weight_utils.py:1173)
    <module> (sgl_drive.py:34)
"""
)
SGL_BUFFERED = """\
Process 31991: /tmp/sglvenv/bin/python /tmp/spyexp/sgl_drive.py 45 buffered
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 31991 (idle): "MainThread"
    default_weight_loader (model_loader/weight_utils.py:1586)
    <module> (sgl_drive.py:38)
Thread 32314 (idle): "tqdm_monitor"
    Condition.wait (threading.py:331)
    Event.wait (threading.py:629)
    TMonitor.run (tqdm/_monitor.py:69)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
Thread 32693 (idle): "ThreadPoolExecutor-5_0"
    UntypedStorage.__getitem__ (torch/storage.py:471)
    buffered_multi_thread_safetensors_weights_iterator.<locals>._load_file.<locals>.<dictcomp> \
(model_loader/weight_utils.py:1355)
    buffered_multi_thread_safetensors_weights_iterator.<locals>._load_file (model_loader/weight_utils.py:1355)
    _WorkItem.run (concurrent/futures/thread.py:58)
    _worker (concurrent/futures/thread.py:83)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
Thread 32695 (idle): "ThreadPoolExecutor-5_1"
    buffered_multi_thread_safetensors_weights_iterator.<locals>._load_file.<locals>.<dictcomp> \
(model_loader/weight_utils.py:1355)
    buffered_multi_thread_safetensors_weights_iterator.<locals>._load_file (model_loader/weight_utils.py:1355)
    _WorkItem.run (concurrent/futures/thread.py:58)
    _worker (concurrent/futures/thread.py:83)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
"""

VLLM_HEAD = """\
Process 16853: /tmp/sglvenv/bin/python /tmp/spyexp/vllm_drive.py 40 multi
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

"""
VLLM_LINEAR_WEIGHT_LOADER = (
    VLLM_HEAD
    + """\
Thread 13829 (idle): "MainThread"
    ReplicatedLinear.weight_loader (vllm/model_executor/layers/linear.py:412)
    <module> (vllm_drive.py:28)
"""
)
VLLM_EAGER_READ = (
    VLLM_HEAD
    + """\
Thread 21008 (active): "MainThread"
    safetensors_weights_iterator (vllm/model_executor/model_loader/weight_utils.py:1209)
    <module> (vllm_drive.py:26)
"""
)
VLLM_MULTI_THREAD = (
    VLLM_HEAD
    + """\
Thread 16853 (idle): "MainThread"
    Condition.wait (threading.py:327)
    Event.wait (threading.py:629)
    Thread.start (threading.py:969)
    ThreadPoolExecutor._adjust_thread_count (concurrent/futures/thread.py:199)
    ThreadPoolExecutor.submit (concurrent/futures/thread.py:176)
    multi_thread_safetensors_weights_iterator.<locals>.<genexpr> (vllm/model_executor/model_loader/weight_utils.py:1266)
    as_completed (concurrent/futures/_base.py:220)
    tqdm.__iter__ (tqdm/std.py:1186)
    multi_thread_safetensors_weights_iterator (vllm/model_executor/model_loader/weight_utils.py:1275)
    <module> (vllm_drive.py:26)
Thread 17140 (idle): "ThreadPoolExecutor-4_0"
    UntypedStorage.__getitem__ (torch/storage.py:471)
    load_file (safetensors/torch.py:360)
    multi_thread_safetensors_weights_iterator.<locals>._load_file (vllm/model_executor/model_loader/weight_utils.py:1260)
    _WorkItem.run (concurrent/futures/thread.py:58)
    _worker (concurrent/futures/thread.py:83)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
"""
)
VLLM_PREFETCH = """\
Process 24541: /tmp/sglvenv/bin/python /tmp/spyexp/vllm_drive.py 40 prefetch
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 24541 (idle): "MainThread"
    default_weight_loader (vllm/model_executor/model_loader/weight_utils.py:1543)
    <module> (vllm_drive.py:30)
Thread 25282 (idle): "Thread-8 (_run_prefetch)"
    EpollSelector.select (selectors.py:468)
    BaseEventLoop._run_once (asyncio/base_events.py:1884)
    BaseEventLoop.run_forever (asyncio/base_events.py:607)
    BaseEventLoop.run_until_complete (asyncio/base_events.py:640)
    Runner.run (asyncio/runners.py:118)
    run (asyncio/runners.py:190)
    _prefetch_all_checkpoints.<locals>._run_prefetch (vllm/model_executor/model_loader/weight_utils.py:1099)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
Thread 25283 (idle): "ThreadPoolExecutor-9_0"
    _prefetch_checkpoint (vllm/model_executor/model_loader/weight_utils.py:1036)
    _WorkItem.run (concurrent/futures/thread.py:58)
    _worker (concurrent/futures/thread.py:83)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
Thread 25290 (idle): "ThreadPoolExecutor-9_7"
    _worker (concurrent/futures/thread.py:81)
    Thread.run (threading.py:982)
    Thread._bootstrap_inner (threading.py:1045)
    Thread._bootstrap (threading.py:1002)
"""

SITE = "/home/administrator/miniconda3/envs/sglang/lib/python3.12/site-packages"
SGLANG_BUS_ERROR = f"""\
Process 1: python3 -m sglang.launch_server
Python v3.12

Thread 0x00007769465bb740 (active): "MainThread"
    weight_loader ({SITE}/sglang/srt/layers/linear.py:1254)
    load_weights ({SITE}/sglang/srt/models/qwen3.py:318)
    load_model ({SITE}/sglang/srt/model_loader/loader.py:377)
    get_model ({SITE}/sglang/srt/model_loader/__init__.py:22)
    load_model ({SITE}/sglang/srt/model_executor/model_runner.py:458)
    initialize ({SITE}/sglang/srt/model_executor/model_runner.py:205)
Thread 0x00007769200ff640 (idle): "Thread-1"
    wait (/home/administrator/miniconda3/envs/sglang/lib/python3.12/threading.py:359)
    wait (/home/administrator/miniconda3/envs/sglang/lib/python3.12/threading.py:655)
    run ({SITE}/tqdm/_monitor.py:60)
    _bootstrap_inner (/home/administrator/miniconda3/envs/sglang/lib/python3.12/threading.py:1075)
    _bootstrap (/home/administrator/miniconda3/envs/sglang/lib/python3.12/threading.py:1032)
"""

VLLM_ASCEND_QWEN3_MOE = [
    "load_weights (/vllm-workspace/vllm/vllm/model_executor/models/qwen3_moe.py:541)",
    "load_weights (/vllm-workspace/vllm/vllm/model_executor/model_loader/default_loader.py:269)",
    "load_model (/vllm-workspace/vllm/vllm/model_executor/model_loader/base_loader.py:41)",
    "get_model (/vllm-workspace/vllm/vllm/model_executor/model_loader/__init__.py:59)",
    "load_model (/vllm-workspace/vllm-ascend/vllm_ascend/worker/model_runner_v1.py:1748)",
]

DIST = "/usr/local/lib/python3.12/dist-packages"
VLLM_FASTSAFETENSORS = [
    f"fastsafetensors_weights_iterator ({DIST}/vllm/model_executor/model_loader/weight_utils.py:490)",
    f"<genexpr> ({DIST}/vllm/model_executor/model_loader/loader.py:415)",
    f"get_all_weights ({DIST}/vllm/model_executor/model_loader/loader.py:431)",
    f"load_weights ({DIST}/vllm/model_executor/models/deepseek_v2.py:746)",
]

VLLM_GET_ALL_WEIGHTS = [
    f"get_all_weights ({DIST}/vllm/model_executor/model_loader/default_loader.py:333)",
    f"<genexpr> ({DIST}/vllm/model_executor/models/utils.py:105)",
    f"<genexpr> ({DIST}/vllm/model_executor/models/utils.py:373)",
]

SAFETENSORS_MMAP = [
    "__getitem__ (...torch\\storage.py:471)",
    "load_file (...safetensors\\torch.py:360)",
]

# Real py-spy 0.4.3 dumps (see the module docstring); the header lines as py-spy wrote them.
PYSPY_EAGER = """\
Process 14211: /root/.pyenv/versions/3.11.7/bin/python loop.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 14211 (active): "MainThread"
    load (safetensors/torch.py:386)
    load_bytes (loop.py:15)
    <module> (loop.py:20)
"""
PYSPY_LAZY_COPY = """\
Process 14343: /root/.pyenv/versions/3.11.7/bin/python lazy.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 14343 (active): "MainThread"
    Layer.weight_loader (lazy.py:7)
    <module> (lazy.py:16)
"""
PYSPY_IMPORTING = """\
Process 14343: /root/.pyenv/versions/3.11.7/bin/python lazy.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 14343 (active+gil): "MainThread"
    namedtuple (collections/__init__.py:436)
    _make_nmtuple (typing.py:2876)
    out_wrapper.<locals>._out_wrapper (torch/_prims_common/wrappers.py:280)
    <module> (torch/_decomp/decompositions.py:2163)
    _call_with_frames_removed (<frozen importlib._bootstrap>:241)
    _LoaderBasics.exec_module (<frozen importlib._bootstrap_external>:940)
    <module> (lazy.py:1)
"""


def stack_phase(innermost_first: list[str]) -> str | None:
    """The rule on frames written as py-spy writes them, innermost first (as a dump lists them)."""
    root_first = list(reversed(innermost_first))
    return phase_of([frame_name(f) for f in root_first], [frame_file(f) for f in root_first])


def test_real_sglang_0_5_23_dumps() -> None:
    main, monitor = parse_dump(SGL_DEFAULT_WEIGHT_LOADER)
    assert (classify(main), classify(monitor)) == ("copy", None)
    (linear,) = parse_dump(SGL_LINEAR_WEIGHT_LOADER)
    assert frame_file(linear.frames[0]) == "linear.py"  # what py-spy keeps of sglang/srt/layers/linear.py
    assert classify(linear) == "copy"
    (get_tensor,) = parse_dump(SGL_GET_TENSOR)
    assert classify(get_tensor) == "deserialize"
    # The whole-file read() of --weight-loader-disable-mmap runs on the iterator's own line: deserialize by the
    # frames alone, read once the line's text is known (watch reads it; tests/unit/test_watch_stacks.py).
    (read,) = parse_dump(SGL_DISABLE_MMAP_READ)
    assert classify(read) == "deserialize"
    names = [frame_name(f) for f in reversed(read.frames)]
    files = [frame_file(f) for f in reversed(read.frames)]
    assert phase_of(names, files, ["run()", "state = load(fh.read())"]) == "read"
    assert phase_of(names, files, ["run()", "yield name, f.get_tensor(name)"]) == "deserialize"
    # Only the innermost frame's line: under load (safetensors/torch.py) the same line is the deserialize.
    assert phase_of(
        [*names, "load"], [*files, "safetensors/torch.py"], ["", "state = load(fh.read())", ""]
    ) == ("deserialize")


def test_real_sglang_buffered_iterator_workers_deserialize_while_the_main_thread_copies() -> None:
    threads = parse_dump(
        SGL_BUFFERED
    )  # (the long <dictcomp> lines are joined by the literal's line continuations)
    assert [t.name for t in threads] == [
        "MainThread",
        "tqdm_monitor",
        "ThreadPoolExecutor-5_0",
        "ThreadPoolExecutor-5_1",
    ]
    assert frame_name(threads[3].frames[0]).endswith("<locals>.<dictcomp>")
    assert [classify(t) for t in threads] == ["copy", None, "deserialize", "deserialize"]
    stacks = RankStacks()
    stacks.add(threads)
    assert stacks.shares() == {"deserialize": 0.667, "copy": 0.333} and stacks.unclassified == 1


def test_real_vllm_0_33_0_dumps() -> None:
    (linear,) = parse_dump(VLLM_LINEAR_WEIGHT_LOADER)
    assert frame_file(linear.frames[0]) == "vllm/model_executor/layers/linear.py"
    assert classify(linear) == "copy"
    # The eager strategy's whole-file read() is on the iterator's own line: counted deserialize (see phase_of).
    (eager,) = parse_dump(VLLM_EAGER_READ)
    assert classify(eager) == "deserialize"
    main, worker = parse_dump(VLLM_MULTI_THREAD)
    # The main thread is starting a pool thread from the iterator's nested generator expression: the qualified
    # name carries the iterator, so it is the iterator's step, not the loader module's plumbing.
    assert classify(main) == "deserialize"
    assert frame_phase("<genexpr>", "vllm/model_executor/model_loader/weight_utils.py") == "other"
    assert classify(worker) == "deserialize"
    threads = parse_dump(VLLM_PREFETCH)
    assert [classify(t) for t in threads] == ["copy", "read", "read", None]


def test_sglang_bus_error_a_fault_under_weight_loader_is_the_copy_and_tqdm_is_not_loading() -> None:
    main, monitor = parse_dump(SGLANG_BUS_ERROR)
    # The copy: weight_loader is innermost. Before the engine rules this stack read as "other" (load_model was the
    # only name the rule knew), and the fault that killed the load sat inside that copy_.
    assert classify(main) == "copy"
    assert phase_of([frame_name(f) for f in reversed(main.frames)]) == "h2d"  # the name alone decides here
    assert classify(monitor) is None
    stacks = RankStacks()
    stacks.add([main, monitor])
    assert dict(stacks.classes) == {"copy": 1} and stacks.unclassified == 1


def test_the_innermost_frame_decides_between_the_engines_loading_steps() -> None:
    weight_loader = SGLANG_BUS_ERROR.splitlines()[4].strip()
    rest = [line.strip() for line in SGLANG_BUS_ERROR.splitlines()[5:10]]
    assert stack_phase([weight_loader, *rest]) == "h2d"
    # Once the weight_loader has returned, the thread is in the model's load_weights: loading, none of the three.
    assert stack_phase(rest) == "other"
    # The model pulling the next tensor: the iterator (a generator) is on the stack, innermost - deserialize.
    iterator = "safetensors_weights_iterator (sglang/srt/model_loader/weight_utils.py:400)"
    assert stack_phase([iterator, *rest]) == "deserialize"
    # A parameter's loader called from a weight_loader_v2 is still the copy.
    param = "_ColumnvLLMParameter.load_column_parallel_weight (sglang/srt/layers/parameter.py:120)"
    v2 = "MergedColumnParallelLinear.weight_loader_v2 (sglang/srt/layers/linear.py:700)"
    assert stack_phase([param, v2, *rest]) == "h2d"


def test_vllm_tracebacks_from_real_reports() -> None:
    assert stack_phase(VLLM_ASCEND_QWEN3_MOE) == "other"
    assert stack_phase(VLLM_FASTSAFETENSORS) == "deserialize"
    # The frame the report's last line calls into, fastsafetensors' own, reads the shard to the device.
    copy_files = "SafeTensorsFileLoader.copy_files_to_device (fastsafetensors/loader.py:140)"
    assert stack_phase([copy_files, *VLLM_FASTSAFETENSORS]) == "read"
    assert stack_phase(VLLM_GET_ALL_WEIGHTS) == "other"
    # Without the engines' rules, none of the three was anything but other / nothing.
    assert phase_of([frame_name(f) for f in reversed(VLLM_GET_ALL_WEIGHTS)]) is None


def test_safetensors_mmap_storage_slicing_is_deserialize_even_on_elided_windows_paths() -> None:
    assert frame_file(SAFETENSORS_MMAP[0]) == "...torch\\storage.py"
    assert stack_phase(SAFETENSORS_MMAP) == "deserialize"


def test_real_py_spy_dumps() -> None:
    (eager,) = parse_dump(PYSPY_EAGER)
    (lazy,) = parse_dump(PYSPY_LAZY_COPY)
    (importing,) = parse_dump(PYSPY_IMPORTING)
    assert frame_file(eager.frames[0]) == "safetensors/torch.py"
    assert classify(eager) == "deserialize"
    # py-spy 0.4 on 3.11 qualifies methods; a weight_loader is the copy in any file (forks, plugins, custom models).
    assert frame_name(lazy.frames[0]) == "Layer.weight_loader"
    assert classify(lazy) == "copy"
    assert frame_file(importing.frames[4]) == "<frozen importlib._bootstrap>"
    assert classify(importing) is None


@pytest.mark.parametrize(
    ("name", "file", "phase"),
    [
        # SGLang
        (
            "buffered_multi_thread_safetensors_weights_iterator.<locals>._load_file",
            "sglang/srt/model_loader/weight_utils.py",
            "deserialize",
        ),
        ("<dictcomp>", "sglang/srt/model_loader/weight_utils.py", "deserialize"),
        (
            "multi_thread_safetensors_weights_iterator",
            "sglang/srt/model_loader/weight_utils.py",
            "deserialize",
        ),
        ("_prefetch_checkpoint_file", "sglang/srt/model_loader/weight_utils.py", "read"),
        ("default_weight_loader", "sglang/srt/model_loader/weight_utils.py", "h2d"),
        ("VocabParallelEmbedding.weight_loader", "sglang/srt/layers/vocab_parallel_embedding.py", "h2d"),
        ("FusedMoE._weight_loader_physical", "sglang/srt/layers/moe/fused_moe_triton/layer.py", "h2d"),
        ("FusedMoE._load_w13", "moe/fused_moe_triton/layer.py", "h2d"),
        ("FusedMoE._maybe_load_fp8_shared_expert_as_fp4", "moe/fused_moe_triton/layer.py", "h2d"),
        ("FusedMoE.weight_loader_fused", "moe/fused_moe_triton/layer.py", "h2d"),
        ("_load_pt_file", "model_loader/weight_utils.py", "deserialize"),
        ("narrow_padded_param_and_loaded_weight", "model_loader/weight_utils.py", "h2d"),
        ("MergedColumnParallelLinear._load_merged_block_scale", "linear.py", "h2d"),
        ("Qwen3ForCausalLM.load_weights", "qwen3.py", "other"),
        ("DefaultModelLoader.load_weights_and_postprocess", "sglang/srt/model_loader/loader.py", "other"),
        ("Fp8LinearMethod.process_weights_after_loading", "sglang/srt/layers/quantization/fp8.py", "other"),
        # vLLM
        (
            "multi_thread_safetensors_weights_iterator.<locals>._load_file",
            "vllm/model_executor/model_loader/weight_utils.py",
            "deserialize",
        ),
        ("convert_pyslice_to_tensor", "vllm/model_executor/model_loader/weight_utils.py", "deserialize"),
        ("_prefetch_checkpoint", "vllm/model_executor/model_loader/weight_utils.py", "read"),
        ("sharded_weight_loader.<locals>.loader", "vllm/model_executor/model_loader/weight_utils.py", "h2d"),
        ("row_parallel_weight_loader", "vllm/model_executor/model_loader/weight_utils.py", "h2d"),
        ("BasevLLMParameter.load_qkv_weight", "vllm/model_executor/parameter.py", "h2d"),
        (
            "QKVParallelLinear._load_fused_module_from_checkpoint",
            "vllm/model_executor/layers/linear.py",
            "h2d",
        ),
        ("AutoWeightsLoader._load_module", "vllm/model_executor/models/utils.py", "other"),
        (
            "DefaultModelLoader._get_weights_iterator",
            "vllm/model_executor/model_loader/default_loader.py",
            "other",
        ),
        # safetensors and torch
        ("load_file", "safetensors/torch.py", "deserialize"),
        ("_view2torch", "safetensors/torch.py", "deserialize"),
        ("UntypedStorage.pin_memory", "torch/storage.py", "h2d"),
        ("Module._load_from_state_dict", "torch/nn/modules/module.py", "h2d"),
        # Generic names outside the engines' loading modules name no step.
        ("_load_file", "myapp/io.py", "None"),
        ("<genexpr>", "vllm/model_executor/layers/linear.py", "None"),
        ("_load_file", "my_model_loader/io.py", "None"),
        ("<dictcomp>", "sglang/srt/layers/linear.py", "None"),
        ("__getitem__", "torch/nn/modules/container.py", "None"),
        ("load", "json/__init__.py", "None"),
        # ckptprof's own markers, by name as before.
        ("fault_in", "ckptprof/loader/touch.py", "read"),
        ("Strategy.copy", "ckptprof/loader/strategies/base.py", "h2d"),
    ],
)
def test_frame_rules(name: str, file: str, phase: str) -> None:
    assert str(frame_phase(name, file)) == phase


def test_the_runs_speedscope_attribution_uses_the_files() -> None:
    frames = [
        {"name": "load_model", "file": f"{SITE}/sglang/srt/model_loader/loader.py", "line": 377},
        {"name": "load_weights", "file": f"{SITE}/sglang/srt/models/qwen3.py", "line": 318},
        {"name": "weight_loader", "file": f"{SITE}/sglang/srt/layers/linear.py", "line": 1254},
        {
            "name": "safetensors_weights_iterator",
            "file": f"{SITE}/sglang/srt/model_loader/weight_utils.py",
            "line": 1,
        },
        {"name": "<genexpr>", "file": f"{SITE}/sglang/srt/model_loader/loader.py", "line": 2},
    ]
    samples = [[0, 1, 2]] * 3 + [[0, 1, 4, 3]] * 2 + [[0, 1]]
    doc = {"shared": {"frames": frames}, "profiles": [{"samples": samples, "weights": [0.01] * len(samples)}]}
    tops = top_frames(doc)
    assert tops["h2d"] == [("weight_loader (linear.py:1254)", 0.03)]
    assert tops["deserialize"] == [("safetensors_weights_iterator (weight_utils.py:1)", 0.02)]
    assert tops["other"] == [("load_weights (qwen3.py:318)", 0.01)]

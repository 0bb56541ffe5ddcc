"""Top frames per replay phase from py-spy speedscope profiles (pure: parsed JSON in, counts out), and the one rule
that puts a Python stack in a loading phase, for the run's py-spy attribution and for ``ckptprof watch --py-spy``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# ckptprof's own loader: its step functions, matched by name alone (the run's profiles have always been classified
# this way; its tests give files such as "touch.py" or "base.py").
PHASE_MARKERS: tuple[tuple[str, str], ...] = (
    ("fault_in", "read"),
    ("touch_pages", "read"),
    ("read_header_region", "read"),
    ("copy", "h2d"),
    ("get_tensor", "deserialize"),
    ("safe_open", "deserialize"),
    ("narrow", "deserialize"),
    ("_load_shard", "other"),
    ("load_model", "other"),
)


@dataclass(frozen=True)
class FrameRule:
    """Frames of one phase in a real server's loading code: a function named in ``names`` (or starting with one of
    ``prefixes``, or ending with one of ``suffixes``) in a file whose path contains ``path`` at a folder boundary
    (``""``: any file). Names are compared without their class or enclosing function: py-spy writes
    ``Layer.weight_loader`` and ``outer.<locals>._load_file`` on Python 3.11+, ``weight_loader`` before."""

    phase: str
    path: str = ""
    names: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    any_name: bool = False  # every function of that file

    def matches(self, name: str, file: str) -> bool:
        if self.path and not _under(file, self.path):
            return False
        return (
            self.any_name
            or name in self.names
            or name.startswith(self.prefixes)
            or (bool(self.suffixes) and name.endswith(self.suffixes))
        )


def _under(file: str, path: str) -> bool:
    """Whether ``path`` ("model_loader/") occurs in ``file`` at a name boundary: py-spy's package-relative paths,
    whole ones, checkouts (/sources/sglang/python/sglang/srt/...), a poster's elided "...torch/storage.py" - but
    not "my_model_loader/"."""
    start = file.find(path)
    while start != -1:
        if start == 0 or not (file[start - 1].isalnum() or file[start - 1] == "_"):
            return True
        start = file.find(path, start + 1)
    return False


# py-spy shortens a file to its package part: it walks up while the folder has an __init__.py. SGLang's srt/,
# srt/layers/ and srt/models/ have none (0.5.23), so a real dump of SGLang shows "linear.py",
# "model_loader/weight_utils.py", "qwen3.py", "moe/fused_moe_triton/layer.py"; vLLM's folders all have one, so its
# frames keep "vllm/model_executor/...". Faulthandler dumps and tracebacks in users' reports give whole paths. So
# a rule by file names the shortest part py-spy keeps ("model_loader/"), and the engines' distinctive function
# names are matched in any file.
_LOADER_DIR = "model_loader/"  # SGLang's and vLLM's model_loader packages, shortened or whole
_MOE_DIRS = ("moe/fused_moe_triton/", "vllm/model_executor/layers/fused_moe/")
_VLLM_LAYERS = "vllm/model_executor/layers/"
_VLLM_MODELS = "vllm/model_executor/models/"
# The copy step's functions, by name in any file (these names are the engines' own and distinctive; their files
# are "linear.py" / "parameter.py" in SGLang's dumps, and forks and plugins such as vllm_ascend reuse them).
_COPY_NAMES = frozenset(
    {
        "weight_loader",
        "weight_loader_v2",
        "default_weight_loader",
        # the parameters' loaders (SGLang layers/parameter.py, vLLM model_executor/parameter.py)
        "load_column_parallel_weight",
        "load_row_parallel_weight",
        "load_merged_column_weight",
        "load_qkv_weight",
        "_assert_and_load",
        "_load_into_shard_id",
        "copy_with_check",
        # linear layers' fused-module and block-scale loaders (SGLang and vLLM layers/linear.py)
        "_load_fused_module_from_checkpoint",
        "_load_merged_block_scale",
        "_load_qkv_block_scale",
    }
)

# Which phase each name is in, and why (the names were read in the engines' own source, not copied from it; the
# module docstring of tests/unit/test_stack_rule_real_engines.py says where, and which real stacks hold the rule):
# - read: bytes come off storage in Python-visible code only where an engine reads files ahead of the load
#   (SGLang's _prefetch_checkpoint_file, vLLM's _prefetch_checkpoint, their _prefetch_all_checkpoints and nested
#   helpers: plain read() loops that fill the page cache) and in fastsafetensors' copy_files_to_device (the shard's
#   bytes to device memory, through GDS or a bounce buffer).
# - deserialize: the weight iterators (every engine names them *_weights_iterator; their worker-thread helper
#   _load_file, its {k: f.get_tensor(k) ...} <dictcomp>, SGLang's _load_pt_file): safe_open, get_tensor and
#   safetensors' deserialize are Rust, so py-spy never shows them - a thread inside them has the iterator as its
#   innermost Python frame. safetensors.torch's Python layer (load_file, load, _view2torch) and torch/storage.py's
#   UntypedStorage.__getitem__ (get_tensor slicing the file's storage: a real dump shows it under the iterator) are
#   the same step one frame further in. vLLM's convert_pyslice_to_tensor materialises a safetensors slice.
# - h2d (the run's name for the copy; watch calls it copy): the weight loaders (_COPY_NAMES, any weight_loader*
#   and *_weight_loader, sharded_weight_loader's nested loader, composed_weight_loader's composed_loader, SGLang's
#   narrow_padded_param_and_loaded_weight / pad_loaded_weight, the fused MoE's _weight_loader_impl /
#   _weight_loader_physical / _load_w13 / _load_w2 / _load_*scale* / _maybe_load_*), torch's
#   Module._load_from_state_dict / _apply / to / cuda and storage pin_memory / cuda / _to: each narrows the
#   checkpoint tensor and copy_()s it into the parameter on the device.
# - other: the rest of the engines' loading code - the model's load_weights and vLLM's AutoWeightsLoader plumbing
#   (name mapping, the generator expressions that filter the stream), the loaders' load_model / get_all_weights /
#   _get_weights_iterator, process_weights_after_loading - so that "unclassified" is left for threads that are
#   not loading at all (tqdm's monitor, idle pools, the import of the engine).
ENGINE_RULES: tuple[FrameRule, ...] = (
    # By name alone, in any file.
    FrameRule(
        "h2d", names=_COPY_NAMES, prefixes=("weight_loader", "_weight_loader"), suffixes=("_weight_loader",)
    ),
    # The loaders' _get_weights_iterator only picks and wraps an iterator (it returns a generator expression), so
    # it is the loader's plumbing, not the iterator.
    FrameRule(
        "other", names=frozenset({"_get_weights_iterator", "load_weights", "process_weights_after_loading"})
    ),
    FrameRule("deserialize", suffixes=("_weights_iterator",)),
    # By file: these names mean a step only inside the engines' loading modules.
    FrameRule("read", path=_LOADER_DIR, prefixes=("_prefetch",)),
    FrameRule("read", path="fastsafetensors/", names=frozenset({"copy_files_to_device"})),
    FrameRule(
        "deserialize",
        path=_LOADER_DIR,
        names=frozenset({"_load_file", "<dictcomp>", "_load_pt_file", "convert_pyslice_to_tensor"}),
    ),
    FrameRule(
        "h2d",
        path=_LOADER_DIR,
        names=frozenset(
            {"loader", "composed_loader", "narrow_padded_param_and_loaded_weight", "pad_loaded_weight"}
        ),
    ),
    FrameRule("other", path=_LOADER_DIR, any_name=True),
    *(FrameRule("h2d", path=d, prefixes=("_load_", "_maybe_load_")) for d in _MOE_DIRS),
    FrameRule("h2d", path=_VLLM_LAYERS, prefixes=("_load_",)),
    FrameRule("other", path=_VLLM_MODELS, names=frozenset({"_load_module", "_load_param", "<genexpr>"})),
    FrameRule(
        "deserialize", path="safetensors/torch.py", names=frozenset({"load_file", "load", "_view2torch"})
    ),
    FrameRule("h2d", path="torch/storage.py", names=frozenset({"pin_memory", "cuda", "to", "_to"})),
    FrameRule("h2d", path="torch/_utils.py", names=frozenset({"_to"})),
    FrameRule(
        "deserialize", path="torch/storage.py", names=frozenset({"__getitem__", "_new_wrapped_storage"})
    ),
    FrameRule(
        "h2d",
        path="torch/nn/modules/module.py",
        names=frozenset({"_load_from_state_dict", "_apply", "to", "cuda"}),
    ),
)


def _scopes(name: str) -> list[str]:
    """``Layer.weight_loader`` -> [weight_loader, Layer]; ``it.<locals>.<genexpr>`` -> [<genexpr>, it]: the function's
    own name first, then the functions (and classes) it is nested in, outward."""
    return [part.strip() for part in reversed(name.split(".")) if part and part != "<locals>"] or [name]


def _path(file: str) -> str:
    # Windows paths (faulthandler's, in users' reports) use backslashes.
    return file.replace("\\", "/")


def frame_phase(name: str, file: str = "") -> str | None:
    """The phase one frame names, or None. In order: the engines' rules on the function's own name; the same on the
    functions it is nested in (py-spy writes qualified names on Python 3.11+, so the generator expression inside
    multi_thread_safetensors_weights_iterator or the thread body inside _prefetch_all_checkpoints is part of that
    step); a rule for every function of an engine's loading module (other); ckptprof's own markers by name."""
    scopes, path = _scopes(name), _path(file)
    for scope in scopes:
        for rule in ENGINE_RULES:
            if not rule.any_name and rule.matches(scope, path):
                return rule.phase
    for rule in ENGINE_RULES:
        if rule.any_name and rule.matches(scopes[0], path):
            return rule.phase
    for marker, phase in PHASE_MARKERS:
        if scopes[0] == marker:
            return phase
    return None


def _reads_a_file(line: str) -> bool:
    # The engines' whole-file reads: SGLang's load(f.read()) under --weight-loader-disable-mmap, vLLM's eager
    # state_dict = load(f.read()); a prefetch loop's while f.read(block_size).
    return ".read(" in line


def phase_of(
    stack_names: Sequence[str], files: Sequence[str] | None = None, lines: Sequence[str] | None = None
) -> str | None:
    """The phase a Python stack (frame names root to leaf, with their files where known) is in: its innermost frame
    that names one, else None. The run's py-spy attribution and ``ckptprof watch`` classify with this one rule.

    Why the innermost frame: it is what the thread is executing; outer frames only say who called it. So a copy_ in
    a weight_loader called from the model's load_weights called from load_model is copy, not other. The engines'
    iterators are generators: their frame is on the stack only while the consumer pulls the next tensor (then it is
    innermost: deserialize), and gone while the weight_loader runs on the tensor it yielded (copy).

    What a Python stack cannot tell: a page fault. With the engines' default lazy safetensors loading (safe_open +
    get_tensor hand out views of the memory-mapped file), a cold checkpoint's bytes come off storage inside the first
    code that touches them - the weight_loader's narrow + copy_ - and py-spy shows only that Python frame (SGLang
    #6083: the SIGBUS of a failed fault on the checkpoint's mapping hit with ``weight_loader (linear.py)``
    innermost; SGLang 0.5.23's own iterator and loaders over an evicted checkpoint on the CPU VM: 75 of 83 main
    thread samples in default_weight_loader / ReplicatedLinear.weight_loader). Such samples count as copy; the
    rank's storage reads over the same interval (watch's /proc figures) say how much of that copy was a read.
    A whole-file read() (SGLang --weight-loader-disable-mmap, vLLM's eager strategy) runs on the iterator's own
    line, under no Python frame of its own: where ``lines`` gives the source text of each frame's current line and
    the iterator is the innermost frame on a line that reads a file, the sample is read (on the real engines, 20 of
    43 SGLang disable_mmap and 48 of 78 vLLM eager main-thread samples); without the lines it counts as
    deserialize. A thread blocked on a step's workers (the buffered iterator's future.result() under the
    iterator's frame) counts in that step."""
    leaf = len(stack_names) - 1
    for i in range(leaf, -1, -1):  # innermost first
        file = files[i] if files is not None and i < len(files) else ""
        phase = frame_phase(stack_names[i], file)
        if phase is None:
            continue
        line = lines[i] if lines is not None and i < len(lines) else ""
        if phase == "deserialize" and i == leaf and _reads_a_file(line):
            return "read"
        return phase
    return None


def _short(name: str, limit: int = 120) -> str:
    # C++ template frames run to kilobytes; the head says what the frame is.
    return name if len(name) <= limit else name[: limit - 3] + "..."


def top_frames(
    speedscope: dict[str, Any], top: int = 5, source_line: Callable[[str, int], str] | None = None
) -> dict[str, list[tuple[str, float]]]:
    """For each phase, the leaf frames sampled most while the rank was in it, with seconds (sample weights).

    ``source_line(file, line)``: the text of a frame's current line, where the caller can read the profiled
    process's files (the run's own ranks: the same machine). Given it, an iterator sampled on a line that reads a whole
    file counts as read, as ``phase_of`` says; without it, as deserialize."""
    frames = speedscope.get("shared", {}).get("frames", [])
    names = [
        _short(f"{f.get('name', '?')} ({str(f.get('file', '?')).rsplit('/', 1)[-1]}:{f.get('line', '?')})")
        for f in frames
    ]
    bare = [str(f.get("name", "?")) for f in frames]
    files = [str(f.get("file", "")) for f in frames]
    texts: dict[int, str] = {}  # a leaf frame's source line, read once per frame rather than once per sample

    def text_of(index: int) -> str:
        text = texts.get(index)
        if text is None:
            line = frames[index].get("line")
            text = texts[index] = (
                source_line(files[index], line) if source_line is not None and isinstance(line, int) else ""
            )
        return text

    seconds: dict[str, dict[str, float]] = {}
    for profile in speedscope.get("profiles", []):
        samples = profile.get("samples", [])
        # py-spy writes sampled profiles whose weights are seconds (1 / rate each); samples run root to leaf.
        weights = profile.get("weights") or [1.0] * len(samples)
        for stack, weight in zip(samples, weights, strict=False):
            if not stack:
                continue
            known = [i for i in stack if 0 <= i < len(bare)]
            if not known:
                continue
            # Only the innermost frame's line can decide (phase_of): the others' are never read.
            lines = [""] * (len(known) - 1) + [text_of(known[-1])]
            phase = phase_of([bare[i] for i in known], [files[i] for i in known], lines)
            if phase is None:
                continue
            leaf = stack[-1]
            if 0 <= leaf < len(names):
                bucket = seconds.setdefault(phase, {})
                bucket[names[leaf]] = bucket.get(names[leaf], 0.0) + float(weight)
    return {
        phase: [(name, round(sec, 4)) for name, sec in sorted(b.items(), key=lambda kv: -kv[1])[:top]]
        for phase, b in sorted(seconds.items())
    }

"""Batch 80 (reports/cpu/2026-12-07zc-bootlog-unseen): right on first sight on every scored key, and wrong beyond them.

vLLM's API server inspects a model's architecture in a subprocess while it builds the model's configuration, before
any engine or step exists (model_executor/models/registry.py: `inspect_model_cls`, `_run_in_subprocess`). Two things
were misread:
- the child's frame `in load_model_cls` (the registry importing the model's class) read as `in load_model`, so the
  report said the boot "failed while loading target weights";
- with that phase gone, the failure reported was the parent's `subprocess.CalledProcessError` ("returned non-zero exit
  status 1"), not the child's own error, which the parent logs inside `RuntimeError: Error raised in subprocess:`.
"""

from __future__ import annotations

from pathlib import Path

from ckptprof.bootlog import analyze_bytes, analyze_path

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
INSPECT_FAILED = (
    REAL / "vllm-ascend-3029-qwen3-next-80b-v0102rc1-tp8-apiserver-model-inspect-no-triton-fail.log"
)

SERVER = "(APIServer pid=390) "
LOGGED = f"{SERVER}ERROR 09-19 05:01:11 [registry.py:449] "
REGISTRY = "/vllm-workspace/vllm/vllm/model_executor/models/registry.py"
PARENT = (
    f"{SERVER}INFO 09-19 05:00:59 [api_server.py:1896] vLLM API server version 0.10.2rc1\n"
    f"{LOGGED}Error in inspecting model architecture 'Qwen3NextForCausalLM'\n"
    f"{LOGGED}Traceback (most recent call last):\n"
    f'{LOGGED}  File "{REGISTRY}", line 867, in _run_in_subprocess\n'
    f"{LOGGED}    returned.check_returncode()\n"
    f"{LOGGED}subprocess.CalledProcessError: Command '['python3', '-m', 'vllm.model_executor.models.registry']' "
    "returned non-zero exit status 1.\n"
    f"{LOGGED}\n"
    f"{LOGGED}The above exception was the direct cause of the following exception:\n"
    f"{LOGGED}\n"
    f"{LOGGED}Traceback (most recent call last):\n"
    f'{LOGGED}  File "{REGISTRY}", line 870, in _run_in_subprocess\n'
    f'{LOGGED}    raise RuntimeError(f"Error raised in subprocess:\\n"\n'
    f"{LOGGED}RuntimeError: Error raised in subprocess:\n"
)
CHILD = (
    f"{LOGGED}Traceback (most recent call last):\n"
    f'{LOGGED}  File "{REGISTRY}", line 419, in <lambda>\n'
    f"{LOGGED}    _run_in_subprocess(lambda: _ModelInfo.from_model_cls(self.load_model_cls()))\n"
    f'{LOGGED}  File "{REGISTRY}", line 422, in load_model_cls\n'
    f"{LOGGED}    mod = importlib.import_module(self.module_name)\n"
    f"{LOGGED}ModuleNotFoundError: No module named 'triton'\n"
)


def test_the_real_inspection_failure_names_no_step_and_the_childs_error() -> None:
    report = analyze_path(str(INSPECT_FAILED))
    assert report.state == "failed"
    assert report.failure is not None
    assert report.failure.phase is None
    assert report.failure.error == "ModuleNotFoundError: No module named 'triton'"


def test_the_registry_importing_a_class_is_no_weight_load() -> None:
    report = analyze_bytes((PARENT + CHILD).encode())
    assert report.failure is not None
    assert report.failure.phase is None
    assert "loading" not in report.summary


def test_a_load_that_imports_the_class_is_still_the_load() -> None:
    # The same frames under the loader's own, as a real load reaches the registry (model_loader/utils.py).
    loading = CHILD.replace(
        f"{LOGGED}Traceback (most recent call last):\n",
        f"{LOGGED}Traceback (most recent call last):\n"
        f'{LOGGED}  File "/vllm-workspace/vllm/vllm/model_executor/model_loader/utils.py", line 40, in '
        "get_model_architecture\n",
    )
    report = analyze_bytes((PARENT + loading).encode())
    assert report.failure is not None
    assert report.failure.phase == "load-weights"


def test_a_failed_childs_own_traceback_is_the_error() -> None:
    report = analyze_bytes((PARENT + CHILD).encode())
    assert report.failure is not None
    assert report.failure.error == "ModuleNotFoundError: No module named 'triton'"


def test_the_parents_error_stands_when_no_child_traceback_follows() -> None:
    report = analyze_bytes(PARENT.encode())
    assert report.failure is not None
    assert report.failure.error.startswith("subprocess.CalledProcessError")


def test_an_error_that_wraps_a_failed_command_keeps_its_own_words() -> None:
    # Inductor's compiler call failed: its InductorError says so, and a traceback after it is no child's.
    inductor = PARENT.replace(
        "subprocess.CalledProcessError: Command",
        "torch._inductor.exc.InductorError: CalledProcessError: Command",
    )
    report = analyze_bytes((inductor + CHILD).encode())
    assert report.failure is not None
    assert report.failure.error.startswith("torch._inductor.exc.InductorError")

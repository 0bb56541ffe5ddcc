"""Logs as collectors hand them over: every line of a real boot log behind kubectl's, GitHub Actions', docker
compose's, journald's, a pod viewer's, TorchServe's or a re-logging application's prefix reads exactly as the log itself does."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.bootlog import BootReport, analyze_bytes, wrappers
from ckptprof.bootlog.wrappers import learn_indent, rejoin_wrapped, unwrap, unwrap_paste

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
# A log per engine and shape: SGLang TP4 to ready with a bar, vLLM V1 TP4 with coloured worker prefixes and
# carriage-return bars, an SGLang crash with a traceback, vLLM V0 with its worker processes.
LOGS = (
    "sglang-llms-in-clouds-qwq32b-tp4.log",
    "vllm-multiagentsdebate-qwen25-tp4.log",
    "sglang-sglang-25118.log",
    "vllm-mlcommons-inference-2267.log",
)

WRAPPERS: dict[str, Callable[[int], bytes]] = {
    "kubectl --timestamps": lambda i: f"2025-12-18T08:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z ".encode(),
    "github actions": lambda i: f"2025-12-18T08:24:{i % 60:02d}.{i % 10**7:07d}Z ".encode(),
    "pod viewer": lambda i: f"[2025-12-18T16:24:{i % 60:02d}+08:00] sglang-0 >> ".encode(),
    "docker compose": lambda i: b"sglang-1  | ",
    "journald": lambda i: f"Dec 18 16:24:{i % 60:02d} gpu-node-3 python3[41234]: ".encode(),
    "torchserve": lambda i: (
        f"2024-09-13T22:25:{i % 60:02d},258 [INFO ] W-9000-model_1.0-stdout MODEL_LOG - ".encode()
    ),
    # olmOCR re-logging its SGLang server through Python's logging (olmocr#159)
    "python logging": lambda i: f"2025-04-03 12:06:{i % 60:02d},365 - __main__ - INFO - ".encode(),
    "journald around compose": lambda i: f"Dec 18 16:24:{i % 60:02d} host dockerd[7]: vllm-2  | ".encode(),
}


def _wrap(data: bytes, prefix: Callable[[int], bytes]) -> bytes:
    return b"".join(prefix(index) + line for index, line in enumerate(data.splitlines(keepends=True)))


def _answer(report: BootReport) -> dict[str, object]:
    data = report.to_dict()
    del data["first_timestamp"], data["last_timestamp"]
    return data


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("name", LOGS)
def test_a_wrapped_real_log_reads_as_the_log_itself(name: str, wrapper: str) -> None:
    data = (REAL / name).read_bytes()
    wrapped = _wrap(data, WRAPPERS[wrapper])
    assert _answer(analyze_bytes(wrapped)) == _answer(analyze_bytes(data))


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_unwrap_gives_back_the_servers_own_bytes(wrapper: str) -> None:
    data = (REAL / "sglang-llms-in-clouds-qwq32b-tp4.log").read_bytes()
    assert unwrap(_wrap(data, WRAPPERS[wrapper])) == data


@pytest.mark.parametrize(
    "line",
    [
        b"[2025-03-08 12:29:21 TP0] Load weight begin. avail mem=23.60 GB\n",
        b"INFO 11-29 10:00:03 [gpu_model_runner.py:1932] Starting to load model /data/m...\n",
        b"(VllmWorker rank=1 pid=4201) INFO 11-29 10:00:34 [default_loader.py:262] Loading weights took 30.90 s\n",
        b"Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:00<00:00,  2.32it/s]\n",
        b"2025-12-18 08:24:02,123 - INFO - a line of some other logger\n",
    ],
)
def test_the_servers_own_lines_are_never_taken_for_a_wrapper(line: bytes) -> None:
    assert unwrap(b"x\n" + line) == b"x\n" + line


def test_a_panes_frame_is_learned_from_the_lines_and_taken_off() -> None:
    lines = [b"INFO 03-21 20:15:45 [worker.py:267] Memory profiling takes 34.26 seconds", b"a second line"]
    framed = b"\n".join("│ ".encode() + line.ljust(90) + "│".encode() for line in lines)
    assert unwrap(framed) == b"\n".join(lines)
    # One framed line is believed only when the border closes it too.
    assert unwrap(framed.split(b"\n")[0]) == lines[0]


@pytest.mark.parametrize(
    "block",
    [
        # a symbol that opens a line or two of many is the text's, not a frame
        b"- one item\nplain line\nanother plain line\nthird plain line\n",
        # a lone line opened by a symbol but not closed by it
        b"> quoted words\n",
    ],
)
def test_a_symbol_on_a_few_lines_is_not_a_frame(block: bytes) -> None:
    assert unwrap(block) == block


def test_a_paste_indented_as_a_whole_loses_its_indentation() -> None:
    # GIVEN a log pasted as a quoted block: the error line the server wrote at the start of its line is indented too
    lines = [
        b"Traceback (most recent call last):",
        b'  File "/x/a.py", line 1, in f',
        b"    raise KeyError(key)",
    ]
    lines.append(b"KeyError: 'glm_moe_dsa'")
    pasted = b"\n".join(b"    " + line for line in lines) + b"\n"
    assert learn_indent(pasted) == b"    "
    # THEN it reads as written, and the error line is again an error line
    assert unwrap(pasted) == b"\n".join(lines) + b"\n"


def test_an_excerpt_that_starts_inside_a_traceback_is_not_indented() -> None:
    # GIVEN frames and code lines only (Python's own 2 and 4 blanks)
    block = b'  File "/x/a.py", line 1, in f\n    self.mlp = LlamaMLP(\n  File "/x/b.py", line 2, in g\n'
    assert learn_indent(block) is None
    assert unwrap(block) is block
    # and the same excerpt indented by a paste loses only the paste's blanks
    pasted = b"".join(b"    " + line + b"\n" for line in block.splitlines())
    assert learn_indent(pasted) == b"    "


def test_a_frame_line_that_lost_its_own_blanks_is_still_the_pastes() -> None:
    # GIVEN a notebook's stderr whose traceback line a spliced write cut, so its frame starts at the line's start
    # (batch 47: `File "/[2025-03-24 01:33:47] Received sigquit ...`), pasted 4 blanks in like every other line
    lines = [
        b"[2025-03-24 01:33:47 TP2] Scheduler hit an exception: Traceback (most recent call last):",
        b'File "/[2025-03-24 01:33:47] Received sigquit from a child process.',
        b'  File "/x/model_runner.py", line 1, in load_model',
        b"ValueError: Prequant BitsAndBytes models with TP is not supported.",
    ]
    pasted = b"".join(b"    " + line + b"\n" for line in lines)
    # THEN the paste's 4 blanks are learned, not 2: the frame opens with what the other lines share
    assert learn_indent(pasted) == b"    "
    assert unwrap(pasted) == b"".join(line + b"\n" for line in lines)


def test_a_single_line_block_keeps_the_indentation_the_log_showed() -> None:
    # GIVEN the cut last line of an indented paste, which the splitter hands over as a block of its own
    last = b"    torch.OutOfMemoryError: CUDA out of memory."
    assert learn_indent(last) is None  # alone it shows nothing
    assert unwrap_paste(last, b"    ") == (b"torch.OutOfMemoryError: CUDA out of memory.", b"    ")
    # a block that does not share it is read as it is
    assert unwrap_paste(b"INFO 01-01 00:00:00 x\nINFO 01-01 00:00:01 y\n", b"    ")[1] is None


def test_a_pane_inside_an_indented_paste_is_unframed_too() -> None:
    lines = [b"INFO 03-21 20:15:44 [monitor.py:33] a", b"INFO 03-21 20:15:45 [worker.py:267] b"]
    pasted = b"\n".join("    │ ".encode() + line + "  │".encode() for line in lines)
    assert unwrap(pasted) == b"\n".join(lines)


# -- lines a terminal wrapped at its width ---------------------------------------------------------------------------

WRAPPED = (
    b'(EngineCore pid=316)   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 305, in _initialize_k\n'
    b"v_caches\n"
    b"(EngineCore pid=316)     kv_cache_configs = get_kv_cache_configs(\n"
    b'(EngineCore pid=316)   File "/opt/venv/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 2193, in get_\n'
    b"kv_cache_configs\n"
)


def test_lines_wrapped_at_one_width_are_joined_again() -> None:
    # GIVEN two different lines of one length (the widest), each followed by its rest cut mid-word (a real paste's)
    joined = rejoin_wrapped(WRAPPED)
    # THEN each is read whole
    assert b"in _initialize_kv_caches\n" in joined and b"in get_kv_cache_configs\n" in joined
    # AND colours around every line or CRLF line ends do not stop it
    coloured = b"\n".join(b"\x1b[36m" + line + b"\x1b[0m" if line else line for line in WRAPPED.split(b"\n"))
    assert b"in _initialize_k\x1b[0mv_caches" not in rejoin_wrapped(coloured)
    assert b"_initialize_kv_caches" in rejoin_wrapped(coloured)
    assert b"in get_kv_cache_configs\r\n" in rejoin_wrapped(WRAPPED.replace(b"\n", b"\r\n"))


def test_one_line_of_a_width_or_a_longer_line_next_to_it_is_no_wrap() -> None:
    first = WRAPPED.split(b"\n")[:2]
    # one such line alone: its width is no terminal's
    once = b"\n".join(first) + b"\n"
    assert rejoin_wrapped(once) is once
    # a following line longer than the wrapped ones: lines run past that width, so nothing was wrapped at it
    longer = WRAPPED.replace(
        b"v_caches\n", b"v_caches and much more text than a terminal of that width " * 3 + b"\n"
    )
    assert b"_initialize_kv_caches" not in rejoin_wrapped(longer)


# The plain definition of what _WRAPPER_RE strips: any blanks and colour codes, then one or two collectors' prefixes
# tried in their listed order.
PLAIN_WRAPPERS = re.compile(rb"\n(?:[ \t]|\x1b\[[0-9;]*m)*(?:" + wrappers._ALTERNATIVES_IN_ORDER + rb"){1,2}")


def test_grouping_the_collectors_by_first_character_strips_what_their_order_strips() -> None:
    """GIVEN every collector's prefix, alone, nested, indented, coloured and before each engine's lines, WHEN the
    substitution that groups the digit-first collectors behind one digit, its blanks and colour codes read as it
    reads them, runs THEN it strips exactly what the plain definition strips."""
    lines = [
        b"[2025-03-08 12:29:21 TP0] Load weight begin. avail mem=23.60 GB",
        b"INFO 11-29 10:00:03 [gpu_model_runner.py:1932] Starting to load model",
        b"2026-05-01 18:45:09.424 | INFO 05-01 10:00:00 [x.py:1] ready",
        b"sglang-1  | 2025-12-18T08:24:02Z x",
        b"12-3 | a compose service whose name is a number",
    ]
    prefixes = [wrap(7) for wrap in WRAPPERS.values()]
    leads = [b"", b"  ", b"\x1b[36m", b" \x1b[1;36m\t\x1b[0m ", b"\x1b[", b"\x1b[0m\x1b"]
    block = b"".join(
        b"\n" + lead + outer + inner + line
        for lead in leads
        for outer in [b"", *prefixes]
        for inner in prefixes
        for line in lines
    )
    assert wrappers._WRAPPER_RE.subn(b"\n", block) == PLAIN_WRAPPERS.subn(b"\n", block)
    assert wrappers._WRAPPER_RE.subn(b"\n", block)[1] > len(prefixes) * len(lines)


LEAD_PIECES = st.sampled_from(
    [
        b"\n",
        b" ",
        b"\t",
        b"\x1b[",
        b"\x1b[0m",
        b"\x1b[1;36m",
        b"m",
        b"2025-12-18T08:24:02Z ",
        b"sglang-1  | ",
        b"9",
        b"x",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(LEAD_PIECES, max_size=14).map(b"".join))
def test_a_collectors_prefix_after_any_blanks_and_colours_is_stripped_as_the_plain_definition_strips_it(
    text: bytes,
) -> None:
    block = b"\n" + text
    assert wrappers._WRAPPER_RE.subn(b"\n", block) == PLAIN_WRAPPERS.subn(b"\n", block)

"""bar_runs matches a run's later frames by their head as bytes and their count alone; what it gives back must be
what matching each frame whole gives (_frames_whole, the pattern's own reading), on any run of frames."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptprof.bootlog.parse import _FRAME_HEAD_RE, _frames_whole, _runs, bar_runs

HEADS = st.sampled_from(
    [
        b"Loading safetensors checkpoint shards",
        b"(VllmWorker rank=1 pid=42) Loading safetensors checkpoint shards",
        b"\x1b[36m(RayWorkerWrapper pid=7)\x1b[0m Capturing batches (bs=8 avail_mem=1.2 GB)",
        b"Capturing CUDA graphs: x",
        b"abc: 1",
        b"",
        b"Loading",
        b"(Worker%1 pid=3) Loading",  # a "%" in the worker's tag: a frame's first "%" need not be its count's
        # a worker's tag alone before the frames tqdm redraws on its line, which carry none (and "Loading" above)
        b"(Worker_TP0 pid=41)\x1b[0;0m \rLoading",
        b"(Worker%1 pid=3) \rLoading",
    ]
)
GLUE = st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\r", b" tail\n", b"\x1b[A\n"])


@st.composite
def runs(draw: st.DrawFn) -> bytes:
    pieces = []
    for _ in range(draw(st.integers(1, 6))):
        head = draw(HEADS)
        done, total = draw(st.integers(0, 12)), draw(st.sampled_from([5, 10, 12]))
        body = draw(st.sampled_from([b" Completed | ", b"|####      | ", b" ", b""]))
        colon = draw(st.sampled_from([b": ", b":", b": : "]))
        pct = min(100, done * 100 // total)
        pieces.append(
            draw(st.sampled_from([b"", b"\r", b"\r\r"]))
            + head
            + colon
            + str(pct).encode()
            + b"%"
            + body
            + f"{done}/{total} [00:01<00:02, 1.5it/s]".encode()
            + draw(GLUE)
        )
    return b"".join(pieces)


def reference(block: bytes, start: int) -> object:
    pos = start
    while block.startswith(b"\r", pos):
        pos += 1
    head = _FRAME_HEAD_RE.match(block, pos)
    return None if head is None else _runs(_frames_whole(block, start, head.group(1)))


@settings(max_examples=500, deadline=None)
@given(runs())
def test_bar_runs_reads_as_whole_frames_do(block: bytes) -> None:
    assert bar_runs(block, 0) == reference(block, 0)


def test_a_run_of_one_bar_keeps_its_first_and_last_frame() -> None:
    frames = b"".join(
        f"\rLoading safetensors checkpoint shards: {p}% Completed | {d}/4 [00:0{d}<00:03, 1.0it/s]\n".encode()
        for d, p in ((0, 0), (1, 25), (2, 50), (4, 100))
    )
    found = bar_runs(frames, 0)
    assert found is not None
    ((first, last),) = found[0]
    assert frames[first[0] : first[1]].count(b"0/4") == 1 and frames[last[0] : last[1]].count(b"4/4") == 1
    assert found[1] == len(frames)


def test_empty_lines_between_a_bars_frames_keep_it_one_run() -> None:
    # GIVEN a pasted bar whose frames stand one to a line with an empty line between each two (LF and CRLF)
    for end in (b"\n", b"\r\n"):
        frames = end.join(
            f"Loading safetensors checkpoint shards: {p}% Completed | {d}/4 [00:0{d}<00:03, 1.0it/s]".encode()
            + end
            for d, p in ((0, 0), (1, 25), (2, 50), (4, 100))
        )
        # WHEN its runs are read from the first frame
        found = bar_runs(frames, 0)
        # THEN the four frames are one bar's run, from its first frame to its last, the empty lines passed over
        assert found is not None
        ((first, last),) = found[0]
        assert frames[first[0] : first[1]].startswith(b"Loading") and b"0/4" in frames[first[0] : first[1]]
        assert frames[last[0] : last[1]].startswith(b"Loading") and b"4/4" in frames[last[0] : last[1]]
        assert found[1] == len(frames)
        assert found == reference(frames, 0)


def test_a_record_after_the_empty_line_ends_the_run() -> None:
    # GIVEN two frames of a bar, an empty line, then a record
    frames = (
        b"Loading shards: 25% Completed | 1/4 [00:01<00:03, 1.0it/s]\n\n"
        b"Loading shards: 50% Completed | 2/4 [00:02<00:02, 1.0it/s]\n\n"
        b"[2025-01-01 10:00:00 TP0] Load weight end.\n"
    )
    found = bar_runs(frames, 0)
    # THEN the run holds the two frames and ends after the second, before the empty line and the record
    assert found is not None
    assert found[1] == frames.index(b"\n\n[2025") + 1

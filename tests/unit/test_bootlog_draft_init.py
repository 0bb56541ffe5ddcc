"""SGLang before 0.5.21 logs `Init torch distributed begin/ends` again for the draft's model runner (its
init_torch_distributed skips the groups a draft shares): on each rank the second is the draft's own short step, and the
target's, minutes earlier, stays what it was (blind batch 36: an Ascend MTP boot showed init-distributed as 0 s at the
draft's time, the target's 9 s step gone)."""

from __future__ import annotations

from ckptprof.bootlog import analyze_bytes


def _line(second: int, rank: int, message: str) -> str:
    return f"[2026-02-06 12:{second // 60:02d}:{second % 60:02d} TP{rank}] {message}\n"


def _boot(speculative: str) -> bytes:
    lines = [f"[2026-02-06 12:00:00] server_args=ServerArgs(model_path='m', tp_size=2, {speculative})\n"]
    for second, message in (
        (3, "Init torch distributed begin."),
        (12, "Init torch distributed ends. mem usage=0.00 GB"),
        (18, "Load weight begin. avail mem=60.00 GB"),
        (500, "Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=20.00 GB"),
        (501, "KV Cache is allocated. #tokens: 1000, K size: 1 GB, V size: 1 GB"),
        (502, "Memory pool end. avail mem=10.00 GB"),
        (503, "Capture cuda graph begin. This can take up to several minutes. avail mem=10.00 GB"),
        (880, "Capture cuda graph end. Time elapsed: 377.00 s. mem usage=1.00 GB. avail mem=9.00 GB."),
        (884, "Init torch distributed begin."),
        (884, "Init torch distributed ends. mem usage=0.00 GB"),
        (885, "Load weight begin. avail mem=9.00 GB"),
        (945, "Load weight end. type=DeepseekV3ForCausalLMNextN, dtype=torch.bfloat16, avail mem=8.00 GB"),
    ):
        lines += [_line(second, rank, message) for rank in (0, 1)]
    return "".join(lines).encode()


def test_the_drafts_second_init_is_its_own_step() -> None:
    """GIVEN an EAGLE/MTP boot whose ranks log their init again for the draft WHEN it is read THEN init-distributed is
    the target's step, 9 s at the start, and the draft's is a step of its own after the target's graphs."""
    report = analyze_bytes(_boot("speculative_algorithm='EAGLE'"))
    steps = [(phase.name, phase.model, phase.variant, phase.start, phase.seconds) for phase in report.phases]
    assert steps[0] == ("init-distributed", None, None, "2026-02-06 12:00:03", 9.0)
    assert ("init-distributed", None, "draft", "2026-02-06 12:14:44", 0.0) in steps
    assert (
        steps.index(("init-distributed", None, "draft", "2026-02-06 12:14:44", 0.0)) == 4
    )  # after the graphs


def test_a_server_without_a_draft_keeps_one_init_step() -> None:
    """GIVEN a server whose configuration runs no draft and whose ranks log their init twice WHEN it is read THEN
    there is no draft step: the second init is the same step begun again, as before."""
    report = analyze_bytes(_boot("speculative_algorithm=None"))
    assert [phase.variant for phase in report.phases if phase.name == "init-distributed"] == [None]

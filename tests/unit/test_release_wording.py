"""The release profile's reason reads as what chose it: the terminal prints "(profile chosen by <why>)" and the
summary "SGLang profile X (<why>)" (issue #34 item 5: "profile chosen by the newest profile")."""

from __future__ import annotations

import pytest

from ckptprof.engines import sglang, vllm


@pytest.mark.parametrize(
    ("why", "reads"),
    [
        (
            sglang.choose_profile()[1],
            "default, the newest line read (sglang 0.5.23): no version given, none installed",
        ),
        (sglang.choose_profile(installed="0.5.9")[1], "the installed sglang 0.5.9"),
        (sglang.choose_profile(version="0.5.9")[1], "--sglang-version 0.5.9"),
        (
            vllm.choose_profile(None, None, None)[1],
            "default, the newest line read (vllm 0.34.0): no version given, none installed",
        ),
        (vllm.choose_profile(None, "0.33.0")[1], "the installed vllm 0.33.0"),
        (vllm.choose_profile(None, None, "0.19.0")[1], "the vLLM release the server's log names (0.19.0)"),
    ],
)
def test_every_reason_follows_chosen_by(why: str, reads: str) -> None:
    assert why == reads
    assert "chosen by the newest profile" not in f"profile chosen by {why}"

from __future__ import annotations

import pytest

from ckptprof.checkpoint.tp_rules import classify, tp_slice


@pytest.mark.parametrize(
    ("name", "shape", "rule"),
    [
        ("model.layers.0.self_attn.q_proj.weight", (4096, 4096), "column"),
        ("layers.0.self_attn.k_proj.weight", (1024, 8192), "column"),
        ("model.layers.3.mlp.experts.7.gate_proj.weight", (2048, 7168), "column"),
        ("model.layers.1.self_attn.kv_b_proj.weight", (16384, 512), "column"),
        ("model.embed_tokens.weight", (163840, 7168), "column"),
        ("lm_head.weight", (32000, 4096), "column"),
        ("model.layers.0.self_attn.o_proj.weight", (4096, 4096), "row"),
        ("model.layers.3.mlp.experts.7.down_proj.weight", (7168, 2048), "row"),
        ("model.layers.3.mlp.down_proj.weight_scale_inv", (56, 144), "row"),
        ("model.layers.0.self_attn.q_a_proj.weight", (1536, 7168), "replicated"),
        ("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", (576, 7168), "replicated"),
        ("model.layers.3.mlp.gate.weight", (384, 7168), "replicated"),
        ("model.norm.weight", (7168,), "replicated"),
        ("fc.weight", (4096, 12288), "replicated"),
        ("d2t", (32000,), "replicated"),
    ],
)
def test_classify(name: str, shape: tuple[int, ...], rule: str) -> None:
    assert classify(name, shape) == rule


def test_column_and_row_slices_cover_the_tensor_once() -> None:
    for name, shape, dim in (("q_proj.weight", (100, 64), 0), ("o_proj.weight", (64, 100), 1)):
        covered = []
        for rank in range(8):
            sl = tp_slice(name, shape, rank, 8)
            assert sl.dim == dim
            assert sl.param_shape[dim] == 13  # ceil(100 / 8), like a padded parallel layer
            covered.extend(range(sl.start, sl.start + sl.length))
        assert covered == list(range(100))


def test_tp1_copies_whole_tensors() -> None:
    sl = tp_slice("o_proj.weight", (64, 100), 0, 1)
    assert sl.dim is None and sl.param_shape == (64, 100)


def test_expert_parallel_skips_other_ranks_experts() -> None:
    name = "model.layers.1.mlp.experts.5.up_proj.weight"
    owners = [
        r for r in range(4) if not tp_slice(name, (8, 8), r, 4, expert_parallel=True, num_experts=16).skipped
    ]
    assert owners == [1]  # 4 experts per rank: expert 5 lives on rank 1


def test_bad_rank() -> None:
    with pytest.raises(ValueError):
        tp_slice("x", (2,), 3, 2)

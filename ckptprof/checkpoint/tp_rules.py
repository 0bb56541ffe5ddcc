"""Tensor-parallel slicing rules: which part of each stored tensor a TP rank copies into its parameter.

Column-parallel layers (q/k/v, gate/up, vocab-parallel embedding and lm_head, MLA's q_b/kv_b) narrow the output
dim (dim 0): a contiguous block of rows. Row-parallel layers (o_proj, down_proj) narrow the input dim (dim 1): a
strided source. Norms, routers, row-parallel biases and small maps are replicated. MoE experts are sliced like a
dense MLP under pure TP; with expert parallelism a rank loads only its own experts whole.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_COLUMN = re.compile(
    r"(q_proj|k_proj|v_proj|qkv_proj|query_key_value|gate_proj|up_proj|gate_up_proj|w1|w3|"
    r"q_b_proj|kv_b_proj|embed_tokens|lm_head|wte|word_embeddings)\.(weight|bias|weight_scale_inv|weight_scale|qweight|scales)$"
)
_ROW = re.compile(
    r"(o_proj|down_proj|dense|w2|out_proj)\.(weight|weight_scale_inv|weight_scale|qweight|scales)$"
)
_EXPERT = re.compile(r"\.experts\.(\d+)\.")


@dataclass(frozen=True)
class TPSlice:
    rule: str  # column | row | replicated | expert-skip
    dim: int | None  # dimension narrowed, None when the tensor is copied whole (or skipped)
    start: int = 0
    length: int = 0
    param_shape: tuple[int, ...] = ()

    @property
    def skipped(self) -> bool:
        return self.rule == "expert-skip"


def classify(name: str, shape: tuple[int, ...]) -> str:
    """column | row | replicated, from the tensor's name (what SGLang's layer types would decide)."""
    if len(shape) == 0:
        return "replicated"
    if _COLUMN.search(name):
        return "column"
    if len(shape) >= 2 and _ROW.search(name):
        return "row"
    return "replicated"


def tp_slice(
    name: str, shape: tuple[int, ...], rank: int, tp: int, expert_parallel: bool = False, num_experts: int = 0
) -> TPSlice:
    """The slice of ``name`` that TP rank ``rank`` of ``tp`` copies, and its parameter's per-rank shape."""
    if tp < 1 or not 0 <= rank < tp:
        raise ValueError(f"rank {rank} is not in a TP group of size {tp}")
    if expert_parallel and num_experts > 0:
        match = _EXPERT.search(name)
        if match:
            per_rank = math.ceil(num_experts / tp)
            if int(match.group(1)) // per_rank != rank:
                return TPSlice(rule="expert-skip", dim=None, param_shape=())
            return TPSlice(rule="replicated", dim=None, length=shape[0] if shape else 0, param_shape=shape)
    rule = classify(name, shape)
    dim = {"column": 0, "row": 1}.get(rule)
    if dim is None or tp == 1 or dim >= len(shape):
        return TPSlice(
            rule="replicated" if tp > 1 or rule == "replicated" else rule, dim=None, param_shape=shape
        )
    size = shape[dim]
    # Parameters are sized ceil(size / tp) like a padded vocab-parallel layer; the last rank may get fewer rows.
    per_rank = math.ceil(size / tp)
    start = min(rank * per_rank, size)
    length = max(0, min(per_rank, size - start))
    param_shape = tuple(per_rank if i == dim else d for i, d in enumerate(shape))
    return TPSlice(rule=rule, dim=dim, start=start, length=length, param_shape=param_shape)

"""Synthetic checkpoints with the tensor names and shape ratios of real models, written as real safetensors.

No real weights can be downloaded on the machines this runs on, and a new user needs a demo, so ``synth``
builds what a loader would meet: an EAGLE-3 draft head, a DeepSeek-V3-style MoE verifier (Kimi-K2 family) or a
dense Llama, scaled to a requested size and shard count. Data is random and finite (never zeros: zero pages
can be cheaper to read on some file systems and hide bugs), written in large sequential chunks so that writing
runs at disk speed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ckptprof.errors import UsageError

PRESETS = ("eagle3-draft", "kimi-k2.5-verifier", "llama")
DTYPES = {"bf16": ("BF16", 2), "fp16": ("F16", 2), "fp32": ("F32", 4), "fp8": ("F8_E4M3", 1)}
_CHUNK = 16 * 1024 * 1024


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str  # safetensors dtype name

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * _ITEMSIZE[self.dtype]


_ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I64": 8, "BOOL": 1}


@dataclass
class SynthResult:
    path: Path
    files: list[Path]
    total_bytes: int
    tensors: int
    config: dict[str, object]


def _round(x: float, multiple: int) -> int:
    return max(multiple, round(x / multiple) * multiple)


# -- layouts ---------------------------------------------------------------------------------------------------
# Each layout maps (scale, layers, vocab, weight dtype) to tensors. ``scale`` multiplies the widths of the real
# model (1.0 = the real shapes); ``vocab`` is solved last to land on the requested size.


def _linear(name: str, out_f: int, in_f: int, wdtype: str, quantized: bool) -> list[TensorSpec]:
    specs = [TensorSpec(f"{name}.weight", (out_f, in_f), wdtype)]
    if quantized:  # DeepSeek-V3-style fp8 checkpoints store a 128x128-block inverse scale beside each weight
        specs.append(
            TensorSpec(f"{name}.weight_scale_inv", (math.ceil(out_f / 128), math.ceil(in_f / 128)), "F32")
        )
    return specs


def eagle3_layout(
    scale: float, layers: int, vocab: int, wdtype: str
) -> tuple[list[TensorSpec], dict[str, object]]:
    """An EAGLE-3 draft head for a Llama-3.1-8B-shaped target (hidden 4096, draft vocab 32000)."""
    hidden = _round(4096 * scale, 128)
    inter = _round(14336 * scale, 128)
    head_dim = 128
    heads = max(1, hidden // head_dim)
    kv_heads = max(1, heads // 4)
    draft_vocab = _round(32000 * scale, 64)
    half = wdtype if wdtype != "F8_E4M3" else "BF16"
    specs = [TensorSpec("embed_tokens.weight", (vocab, hidden), half)]
    specs.append(TensorSpec("fc.weight", (hidden, 3 * hidden), half))
    for i in range(layers):
        p = f"layers.{i}"
        specs += [
            TensorSpec(f"{p}.hidden_norm.weight", (hidden,), half),
            TensorSpec(f"{p}.input_layernorm.weight", (hidden,), half),
            TensorSpec(f"{p}.post_attention_layernorm.weight", (hidden,), half),
        ]
        # The draft's attention reads [embeds; fused hidden], hence 2 x hidden inputs.
        for proj, out_f in (
            ("q_proj", heads * head_dim),
            ("k_proj", kv_heads * head_dim),
            ("v_proj", kv_heads * head_dim),
        ):
            specs += _linear(f"{p}.self_attn.{proj}", out_f, 2 * hidden, half, False)
        specs += _linear(f"{p}.self_attn.o_proj", hidden, heads * head_dim, half, False)
        specs += _linear(f"{p}.mlp.gate_proj", inter, hidden, half, False)
        specs += _linear(f"{p}.mlp.up_proj", inter, hidden, half, False)
        specs += _linear(f"{p}.mlp.down_proj", hidden, inter, half, False)
    specs += [
        TensorSpec("norm.weight", (hidden,), half),
        TensorSpec("lm_head.weight", (draft_vocab, hidden), half),
        TensorSpec("d2t", (draft_vocab,), "I64"),
        TensorSpec("t2d", (vocab,), "BOOL"),
    ]
    config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "num_hidden_layers": layers,
        "vocab_size": vocab,
        "draft_vocab_size": draft_vocab,
    }
    return specs, config


def kimi_layout(
    scale: float, layers: int, vocab: int, wdtype: str, experts: int = 16
) -> tuple[list[TensorSpec], dict[str, object]]:
    """A DeepSeek-V3 / Kimi-K2-style MoE verifier: MLA attention, first layer dense, routed + shared experts."""
    hidden = _round(7168 * scale, 128)
    moe_inter = _round(2048 * scale, 128)
    dense_inter = _round(18432 * scale, 128)
    heads = max(1, round(64 * scale))
    q_lora = _round(1536 * scale, 128)
    kv_lora = _round(512 * scale, 64)
    nope, rope, v_dim = 128, 64, 128
    quant = wdtype == "F8_E4M3"
    half = "BF16" if quant else wdtype
    specs = [TensorSpec("model.embed_tokens.weight", (vocab, hidden), half)]
    for i in range(layers):
        p = f"model.layers.{i}"
        specs += [
            TensorSpec(f"{p}.input_layernorm.weight", (hidden,), half),
            TensorSpec(f"{p}.post_attention_layernorm.weight", (hidden,), half),
            TensorSpec(f"{p}.self_attn.q_a_layernorm.weight", (q_lora,), half),
            TensorSpec(f"{p}.self_attn.kv_a_layernorm.weight", (kv_lora,), half),
        ]
        specs += _linear(f"{p}.self_attn.q_a_proj", q_lora, hidden, wdtype, quant)
        specs += _linear(f"{p}.self_attn.q_b_proj", heads * (nope + rope), q_lora, wdtype, quant)
        specs += _linear(f"{p}.self_attn.kv_a_proj_with_mqa", kv_lora + rope, hidden, wdtype, quant)
        specs += _linear(f"{p}.self_attn.kv_b_proj", heads * (nope + v_dim), kv_lora, wdtype, quant)
        specs += _linear(f"{p}.self_attn.o_proj", hidden, heads * v_dim, wdtype, quant)
        if i == 0:  # first_k_dense_replace = 1
            for proj, o, n in (
                ("gate_proj", dense_inter, hidden),
                ("up_proj", dense_inter, hidden),
                ("down_proj", hidden, dense_inter),
            ):
                specs += _linear(f"{p}.mlp.{proj}", o, n, wdtype, quant)
            continue
        specs.append(TensorSpec(f"{p}.mlp.gate.weight", (experts, hidden), half))
        specs.append(TensorSpec(f"{p}.mlp.gate.e_score_correction_bias", (experts,), "F32"))
        for e in range(experts):
            for proj, o, n in (
                ("gate_proj", moe_inter, hidden),
                ("up_proj", moe_inter, hidden),
                ("down_proj", hidden, moe_inter),
            ):
                specs += _linear(f"{p}.mlp.experts.{e}.{proj}", o, n, wdtype, quant)
        for proj, o, n in (
            ("gate_proj", moe_inter, hidden),
            ("up_proj", moe_inter, hidden),
            ("down_proj", hidden, moe_inter),
        ):
            specs += _linear(f"{p}.mlp.shared_experts.{proj}", o, n, wdtype, quant)
    specs += [
        TensorSpec("model.norm.weight", (hidden,), half),
        TensorSpec("lm_head.weight", (vocab, hidden), half),
    ]
    config = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": hidden,
        "intermediate_size": dense_inter,
        "moe_intermediate_size": moe_inter,
        "num_hidden_layers": layers,
        "first_k_dense_replace": 1,
        "n_routed_experts": experts,
        "n_shared_experts": 1,
        "num_experts_per_tok": min(8, experts),
        "num_attention_heads": heads,
        "q_lora_rank": q_lora,
        "kv_lora_rank": kv_lora,
        "qk_nope_head_dim": nope,
        "qk_rope_head_dim": rope,
        "v_head_dim": v_dim,
        "vocab_size": vocab,
    }
    if quant:
        config["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    return specs, config


def llama_layout(
    scale: float, layers: int, vocab: int, wdtype: str
) -> tuple[list[TensorSpec], dict[str, object]]:
    """A dense Llama-3.1-8B-shaped model."""
    hidden = _round(4096 * scale, 128)
    inter = _round(14336 * scale, 128)
    heads = max(1, hidden // 128)
    kv_heads = max(1, heads // 4)
    half = wdtype if wdtype != "F8_E4M3" else "BF16"
    specs = [TensorSpec("model.embed_tokens.weight", (vocab, hidden), half)]
    for i in range(layers):
        p = f"model.layers.{i}"
        specs += [
            TensorSpec(f"{p}.input_layernorm.weight", (hidden,), half),
            TensorSpec(f"{p}.post_attention_layernorm.weight", (hidden,), half),
        ]
        for proj, out_f, in_f in (
            ("self_attn.q_proj", heads * 128, hidden),
            ("self_attn.k_proj", kv_heads * 128, hidden),
            ("self_attn.v_proj", kv_heads * 128, hidden),
            ("self_attn.o_proj", hidden, heads * 128),
            ("mlp.gate_proj", inter, hidden),
            ("mlp.up_proj", inter, hidden),
            ("mlp.down_proj", hidden, inter),
        ):
            specs += _linear(f"{p}.{proj}", out_f, in_f, half, False)
    specs += [
        TensorSpec("model.norm.weight", (hidden,), half),
        TensorSpec("lm_head.weight", (vocab, hidden), half),
    ]
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "num_hidden_layers": layers,
        "vocab_size": vocab,
    }
    return specs, config


Layout = Callable[[float, int, int, str], tuple[list[TensorSpec], dict[str, object]]]
_BASE_VOCAB = {"eagle3-draft": 128256, "kimi-k2.5-verifier": 163840, "llama": 128256}
# Tensors that belong to one decoder layer, used to add layers when more shards are asked for than one layer
# has tensors (a shard holds whole tensors).
_PER_LAYER = {"eagle3-draft": 10, "kimi-k2.5-verifier": 60, "llama": 9}


def _layout_for(preset: str, experts: int | None) -> Layout:
    if preset == "eagle3-draft":
        return eagle3_layout
    if preset == "llama":
        return llama_layout
    if preset == "kimi-k2.5-verifier":
        n = experts or 16
        return lambda s, layer_count, v, d: kimi_layout(s, layer_count, v, d, experts=n)
    raise UsageError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")


def _default_layers(preset: str, size: int, shards: int) -> int:
    # A shard holds whole tensors, so a model needs comfortably more tensors than shards for the shards to come
    # out even: add decoder layers (multi-layer drafts exist) rather than leave shards with one norm vector each.
    by_shards = math.ceil(1.5 * shards / _PER_LAYER[preset])
    if preset == "kimi-k2.5-verifier":
        # ~1.7 GB per MoE layer at the real widths with 16 experts: grow depth, not width, up to the real 61.
        return min(61, max(4, by_shards // 10, round(size / 1.7e9)))
    if preset == "llama":
        return max(32, by_shards)
    return max(1, by_shards)


def plan_tensors(
    preset: str,
    size: int,
    shards: int,
    dtype: str = "bf16",
    layers: int | None = None,
    experts: int | None = None,
) -> tuple[list[TensorSpec], dict[str, object]]:
    """Choose widths, layer count and vocab so the tensors total ``size`` bytes (within 1%)."""
    if dtype not in DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if shards < 1:
        raise UsageError("--shards must be at least 1")
    wdtype = DTYPES[dtype][0]
    layout = _layout_for(preset, experts)
    if layers is None:
        layers = _default_layers(preset, size, shards)
    base_vocab = _BASE_VOCAB[preset]

    def total(scale: float, vocab: int) -> int:
        return sum(t.nbytes for t in layout(scale, layers, vocab, wdtype)[0])

    # Bisection on the width scale with the real vocab scaled alongside; bytes grow monotonically with scale.
    lo, hi = 1e-3, 4.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if total(mid, _round(base_vocab * mid, 64)) > size:
            hi = mid
        else:
            lo = mid
    scale = lo
    # Then fill the remainder exactly through the vocab (embedding rows are the finest-grained knob).
    specs, _ = layout(scale, layers, 64, wdtype)
    fixed = sum(t.nbytes for t in specs)
    per_vocab_row = total(scale, 128) - total(scale, 64)
    vocab = max(64, int((size - fixed) // (per_vocab_row / 64)) // 64 * 64 + 64)
    specs, config = layout(scale, layers, vocab, wdtype)
    got = sum(t.nbytes for t in specs)
    if len(specs) < shards:
        raise UsageError(
            f"{preset} at this size has {len(specs)} tensors, fewer than --shards {shards}; use fewer shards"
        )
    if abs(got - size) > 0.01 * size:
        raise UsageError(
            f"cannot lay out {preset} at {size} bytes with {shards} shards (closest {got}); try a larger size"
        )
    config["torch_dtype"] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16"}[
        dtype
    ]
    return specs, config


def pack_shards(specs: list[TensorSpec], shards: int) -> list[list[TensorSpec]]:
    """Split tensors, in order, into exactly ``shards`` non-empty groups of roughly equal bytes.

    Cut points go to the tensor boundary nearest each ideal k * total / shards, pushed forward where a large
    tensor swallowed several ideal cuts, so every shard gets at least one tensor.
    """
    if shards > len(specs):
        raise ValueError(f"{len(specs)} tensors cannot fill {shards} shards")
    ends = np.cumsum([t.nbytes for t in specs])  # ends[i] = bytes up to and including tensor i
    total = float(ends[-1]) if len(ends) else 0.0
    cuts: list[int] = []  # group k ends after tensor cuts[k]
    for k in range(1, shards):
        ideal = k * total / shards
        i = int(np.searchsorted(ends, ideal))
        if i > 0 and abs(ends[i - 1] - ideal) < abs(ends[min(i, len(ends) - 1)] - ideal):
            i -= 1
        i = max(i, cuts[-1] + 1 if cuts else 0)
        i = min(i, len(specs) - 1 - (shards - k))
        cuts.append(i)
    groups = []
    begin = 0
    for c in [*cuts, len(specs) - 1]:
        groups.append(specs[begin : c + 1])
        begin = c + 1
    return groups


def _random_chunks(spec: TensorSpec, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Random finite values of the tensor's dtype, in chunks of at most 16 MiB (written without extra copies)."""
    left = spec.nbytes
    while left > 0:
        n = min(left, _CHUNK)
        if spec.dtype == "I64":
            yield rng.integers(0, 1 << 20, size=n // 8, dtype=np.int64)
        elif spec.dtype == "BOOL":
            yield rng.integers(0, 2, size=n, dtype=np.uint8)
        else:
            # Raw generator output is the fastest random source numpy has (~2 GB/s a core): mask it in place.
            raw = rng.bit_generator.random_raw(-(-n // 8))
            buf = raw.view(np.uint8)[:n]
            _make_finite(buf, spec.dtype)
            yield buf
        left -= n


def _make_finite(buf: np.ndarray, dtype: str) -> None:
    """Clear the top exponent bit of every element in place: no NaN or Inf, magnitudes below 2."""
    if dtype in ("BF16", "F16"):
        view = buf.view(np.uint16)
        view &= np.uint16(0xBFFF)
    elif dtype == "F32":
        view32 = buf.view(np.uint32)
        view32 &= np.uint32(0xBFFFFFFF)
    elif dtype == "F8_E4M3":
        buf &= np.uint8(0xBF)


def write_shard(
    path: Path, specs: list[TensorSpec], rng: np.random.Generator, metadata: dict[str, str]
) -> int:
    header: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for t in specs:
        header[t.name] = {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + t.nbytes],
        }
        offset += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # 8-byte alignment of the data section, as safetensors writes it
    with open(path, "wb") as fh:
        fh.write(len(raw).to_bytes(8, "little"))
        fh.write(raw)
        for t in specs:
            for chunk in _random_chunks(t, rng):
                fh.write(chunk.data)
    return 8 + len(raw) + offset


def synthesize(
    out: str | Path,
    preset: str = "eagle3-draft",
    shards: int = 64,
    size: int = 512 * 10**6,
    dtype: str = "bf16",
    seed: int = 0,
    layers: int | None = None,
    experts: int | None = None,
    force: bool = False,
    progress: Callable[[int], object] | None = None,
) -> SynthResult:
    """Write a synthetic checkpoint into ``out``; ``progress(bytes)`` is called after each shard."""
    out = Path(out)
    specs, config = plan_tensors(preset, size, shards, dtype, layers, experts)
    if out.exists() and any(out.iterdir()):
        if not force:
            raise UsageError(f"{out}: directory is not empty (pass --force to overwrite)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    groups = pack_shards(specs, shards)
    rng = np.random.default_rng(seed)
    files: list[Path] = []
    weight_map: dict[str, str] = {}
    meta = {"format": "pt", "generator": "ckptprof synth", "preset": preset}
    for k, group in enumerate(groups, start=1):
        name = f"model-{k:05d}-of-{shards:05d}.safetensors"
        path = out / name
        write_shard(path, group, rng, meta)
        files.append(path)
        for t in group:
            weight_map[t.name] = name
        if progress:
            progress(sum(t.nbytes for t in group))
    total = sum(t.nbytes for t in specs)
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    config["ckptprof_synth"] = {
        "preset": preset,
        "shards": shards,
        "size": size,
        "dtype": dtype,
        "seed": seed,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    # Make sure the data reached the file system before anyone measures "cold" reads of it.
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return SynthResult(path=out, files=files, total_bytes=total, tensors=len(specs), config=config)

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from ckptprof.checkpoint.synth import pack_shards, plan_tensors, synthesize
from ckptprof.errors import UsageError
from ckptprof.units import parse_size


@pytest.mark.parametrize(
    ("preset", "size", "shards"),
    [
        ("eagle3-draft", 4_700_000_000, 64),
        ("eagle3-draft", 512_000_000, 64),
        ("kimi-k2.5-verifier", 20_000_000_000, 64),
        ("llama", 1 << 30, 8),
    ],
)
def test_plans_hit_the_size_within_one_percent(preset: str, size: int, shards: int) -> None:
    specs, config = plan_tensors(preset, size, shards)
    total = sum(t.nbytes for t in specs)
    assert abs(total - size) <= 0.01 * size
    groups = pack_shards(specs, shards)
    assert len(groups) == shards and all(groups)
    assert [t for g in groups for t in g] == specs
    assert config["vocab_size"] > 0


def test_eagle3_names() -> None:
    specs, _ = plan_tensors("eagle3-draft", 64_000_000, 4)
    names = {t.name for t in specs}
    assert {"fc.weight", "lm_head.weight", "embed_tokens.weight", "norm.weight", "d2t", "t2d"} <= names
    assert "layers.0.self_attn.q_proj.weight" in names
    fc = next(t for t in specs if t.name == "fc.weight")
    assert fc.shape[1] == 3 * fc.shape[0]  # fuses three target hidden states


def test_kimi_names_and_fp8_scales() -> None:
    specs, config = plan_tensors("kimi-k2.5-verifier", 200_000_000, 8, dtype="fp8", layers=3, experts=4)
    names = {t.name for t in specs}
    assert "model.layers.1.mlp.experts.3.down_proj.weight" in names
    assert "model.layers.1.mlp.shared_experts.up_proj.weight" in names
    assert "model.layers.0.mlp.gate_proj.weight" in names  # first layer dense
    assert "model.layers.1.self_attn.kv_a_proj_with_mqa.weight_scale_inv" in names
    assert config["quantization_config"] == {"quant_method": "fp8", "weight_block_size": [128, 128]}


def test_written_checkpoint_loads_with_safetensors(small_draft: Path) -> None:
    index = json.loads((small_draft / "model.safetensors.index.json").read_text())
    files = sorted(small_draft.glob("*.safetensors"))
    assert len(files) == 8
    seen = {}
    for f in files:
        with safe_open(str(f), framework="pt") as h:
            for name in h.keys():  # noqa: SIM118 - safe_open is not a dict
                t = h.get_tensor(name)
                seen[name] = f.name
                if t.is_floating_point():
                    assert torch.isfinite(t).all()
                    assert t.abs().sum() > 0  # random data, never zeros
    assert seen == index["weight_map"]
    assert abs(sum(f.stat().st_size for f in files) - 16_000_000) < 0.01 * 16_000_000 + 8 * 4096


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = synthesize(tmp_path / "a", shards=2, size=2_000_000, seed=7)
    b = synthesize(tmp_path / "b", shards=2, size=2_000_000, seed=7)
    assert [f.read_bytes() for f in a.files] == [f.read_bytes() for f in b.files]


def test_refuses_non_empty_output(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(UsageError, match="not empty"):
        synthesize(tmp_path, shards=2, size=2_000_000)
    assert (tmp_path / "keep.txt").exists()


def test_too_many_shards_for_tensors() -> None:
    with pytest.raises(UsageError, match="fewer than --shards"):
        plan_tensors("eagle3-draft", 1_000_000, 500, layers=1)


@pytest.mark.parametrize(
    ("text", "value"),
    [("4.7GB", 4_700_000_000), ("512MB", 512_000_000), ("1GiB", 1 << 30), ("123", 123), ("2 mib", 2 << 20)],
)
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "-1GB", "0", "1XB"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_synth_help_gives_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from ckptprof.cli.main import main

    assert main(["synth", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default eagle3-draft)" in text and "(default 512MB)" in text and "(default 64)" in text

"""Gemma 4: sliding-window layers and full-attention layers of another geometry (fewer,
wider KV heads; V from the K projection), each kind costed and cached at its own shape."""

from __future__ import annotations

import json

import pytest

from simulator.cost.ops import IterationShape, ShardedModel, iteration_ops, layer_geometries
from simulator.errors import CatalogError
from simulator.memory import kv_bytes_per_token_per_gpu, sliding_window_groups
from simulator.models import MODEL_CATALOG, get_model, load_hf_config

# google/gemma-4-26B-A4B's config.json (text_config shape keys; the vision tower is left out)
GEMMA4_26B_TEXT = {
    "model_type": "gemma4_text", "hidden_size": 2816, "num_hidden_layers": 30, "num_attention_heads": 16,
    "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512,
    "attention_k_eq_v": True, "intermediate_size": 2112, "enable_moe_block": True, "num_experts": 128,
    "top_k_experts": 8, "moe_intermediate_size": 704, "vocab_size": 262144, "max_position_embeddings": 262144,
    "sliding_window": 1024, "tie_word_embeddings": True, "hidden_size_per_layer_input": 0,
    "num_kv_shared_layers": 0, "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
}
KEEP = {"name", "hf_id", "aliases", "published_params_b", "published_active_params_b"}


def _write(tmp_path, text: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"],
                                "text_config": text}))
    return path


def test_gemma4_config_loads_as_the_catalog_entry(tmp_path):
    entry = MODEL_CATALOG["gemma-4-26b-a4b"]
    assert load_hf_config(_write(tmp_path, GEMMA4_26B_TEXT)).model_dump(exclude=KEEP) == entry.model_dump(exclude=KEEP)
    assert get_model("google/gemma-4-26B-A4B-it") is entry and get_model("nvidia/Gemma-4-31B-IT-NVFP4").name == "gemma-4-31b"
    # the dense MLP beside the experts enters as three shared expert widths (3 x 704 = 2,112)
    assert (entry.num_shared_experts, entry.moe_ffn_size, entry.ffn_size) == (3, 704, 2112)


def test_full_attention_layers_have_their_own_projections_and_cache():
    m = MODEL_CATALOG["gemma-4-31b"]
    h = m.hidden_size
    sliding = h * (32 * 256 + 2 * 16 * 256) + 32 * 256 * h + 2 * 256
    full = h * (32 * 512 + 4 * 512) + 32 * 512 * h + 2 * 512  # K only: no v_proj
    mlp, norms = 3 * h * 21504, 2 * h
    assert m.param_count == 50 * sliding + 10 * full + 60 * (mlp + norms) + 262144 * h + h
    # only the 10 full-attention layers grow with the context; K and V both cached
    assert m.kv_bytes_per_token(2) == 10 * 2 * 4 * 512 * 2
    assert kv_bytes_per_token_per_gpu(m, "bf16", 2, 1) == 10 * 2 * 2 * 512 * 2
    assert kv_bytes_per_token_per_gpu(m, "bf16", 8, 1) == 10 * 2 * 1 * 512 * 2  # 4 KV heads replicated past TP4
    # a windowed layer's KV per token is twice a full layer's, so its blocks hold half the tokens
    assert sliding_window_groups(m, 1, 16, 1) == (5, -(-1023 // 8) + 1)


def test_each_kind_of_layer_is_timed_at_its_own_shape():
    m = MODEL_CATALOG["gemma-4-31b"]
    sm = ShardedModel.build(m, 2, 1, "bf16", "bf16", "bf16", 8)
    sliding, full = layer_geometries(sm)
    assert (sliding.attn_layer_passes, sliding.window_passes) == (50, 50)
    assert (full.attn_layer_passes, full.window_passes, full.head_dim, full.kv_heads) == (10, 0, 512, 2)
    ops = iteration_ops(IterationShape(num_tokens=8, num_decode=8, decode_context=8 * 5000, num_emit=8), sm)
    qkv = sorted((op.count, op.shape[1]) for op in ops if op.name == "qkv_proj")
    assert qkv == [(10, 16 * 512 + 2 * 512), (50, 16 * 256 + 2 * 8 * 256)]
    decode = sorted((op.count, op.shape[3], op.shape[4]) for op in ops if op.name == "attn_decode")
    assert decode == [(10, 2, 512), (50, 8, 256)]
    # a windowed layer reads K and V of at most 1,024 tokens a sequence (8 heads of 256), a
    # full one all 5,001 (2 heads of 512), plus the queries and outputs
    by_count = {op.count: op for op in ops if op.name == "attn_decode"}
    assert by_count[50].bytes == 8 * 1024 * 2 * 8 * 256 * 2 + 8 * 16 * 256 * 2 * 2
    assert by_count[10].bytes == 8 * 5001 * 2 * 2 * 512 * 2 + 8 * 16 * 512 * 2 * 2
    # a one-geometry model keeps its single view
    gemma3 = ShardedModel.build(MODEL_CATALOG["gemma-3-27b"], 2, 1, "bf16", "bf16", "bf16", 8)
    assert layer_geometries(gemma3) == (gemma3,)


@pytest.mark.parametrize("change, match", [
    ({"hidden_size_per_layer_input": 256}, "per-layer embeddings"),
    ({"layer_types": ["sliding_attention"] * 29}, "each of the 30 layers"),
    ({"moe_intermediate_size": 1000}, "whole number of expert widths"),
])
def test_unmodelled_gemma4_variants_are_refused_with_the_reason(tmp_path, change, match):
    with pytest.raises(CatalogError, match=match) as err:
        load_hf_config(_write(tmp_path, {**GEMMA4_26B_TEXT, **change}))
    assert err.value.fix

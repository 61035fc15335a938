"""MiMo-V2-Flash: grouped-query attention whose values are narrower than its queries and keys
(192 and 128), and sliding-window layers with twice the full-attention layers' KV heads."""

from __future__ import annotations

import pytest
from conftest import CATALOG_ONLY_FIELDS, write_config

from simulator.cost.ops import (
    IterationShape,
    ShardedModel,
    attention_dims,
    iteration_ops,
    layer_geometries,
)
from simulator.errors import CatalogError
from simulator.memory import kv_bytes_per_token_per_gpu, sliding_window_groups
from simulator.models import MODEL_CATALOG, get_model, load_hf_config

# XiaomiMiMo/MiMo-V2-Flash's config.json shape keys (aiconfigurator-core 0.12's copy)
MIMO_V2 = {
    "architectures": ["MiMoV2FlashForCausalLM"], "model_type": "mimo_v2_flash", "num_hidden_layers": 48,
    "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128,
    "intermediate_size": 16384, "vocab_size": 152576, "max_position_embeddings": 262144, "sliding_window": 128,
    "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
    "hybrid_layer_pattern": [0] + ([1] * 4 + [0] + [1] * 5 + [0]) + ([1] * 5 + [0]) * 6,
    "moe_layer_freq": [0] + [1] * 47, "moe_intermediate_size": 2048, "n_routed_experts": 256,
    "n_shared_experts": None, "num_experts_per_tok": 8, "tie_word_embeddings": False, "attention_bias": False,
    "add_swa_attention_sink_bias": True,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}
KEEP = CATALOG_ONLY_FIELDS



def test_config_loads_as_the_catalog_entry(tmp_path):
    assert len(MIMO_V2["hybrid_layer_pattern"]) == 48 and sum(MIMO_V2["hybrid_layer_pattern"]) == 39
    entry = MODEL_CATALOG["mimo-v2-flash"]
    assert load_hf_config(write_config(tmp_path, MIMO_V2)).model_dump(exclude=KEEP) == entry.model_dump(exclude=KEEP)
    assert get_model("XiaomiMiMo/MiMo-V2-Flash") is entry


def test_narrow_values_shrink_v_proj_o_proj_and_the_cache():
    m = MODEL_CATALOG["mimo-v2-flash"]
    h = m.hidden_size
    sliding = h * (64 * 192 + 8 * 192 + 8 * 128) + 64 * 128 * h
    full = h * (64 * 192 + 4 * 192 + 4 * 128) + 64 * 128 * h
    experts = 256 * 3 * h * 2048 + h * 256  # and the router
    body = 39 * sliding + 9 * full + 3 * h * 16384 + 47 * experts + 2 * 48 * h
    assert m.param_count == body + 2 * 152576 * h + h
    # only the 9 full-attention layers grow with the context: 4 KV heads of K 192 and V 128
    assert m.kv_bytes_per_token(2) == 9 * 4 * (192 + 128) * 2
    assert kv_bytes_per_token_per_gpu(m, "bf16", 4, 1) == 9 * 1 * 320 * 2
    assert kv_bytes_per_token_per_gpu(m, "bf16", 8, 1) == 9 * 1 * 320 * 2  # 4 KV heads replicated past TP4
    # a windowed layer (2 KV heads a GPU at TP4) holds twice a full layer's KV a token, so its
    # blocks hold half the tokens: 5 groups of windowed layers, ceil(127 / 8) + 1 blocks each
    assert sliding_window_groups(m, 1, 16, 4) == (5, 17)


def test_each_kind_of_layer_is_timed_with_narrow_values():
    m = MODEL_CATALOG["mimo-v2-flash"]
    sm = ShardedModel.build(m, 4, 1, "fp8", "fp8", "bf16", 8)
    sliding, full = layer_geometries(sm)
    assert (sliding.attn_layer_passes, sliding.kv_heads, full.attn_layer_passes, full.kv_heads) == (39, 2, 9, 1)
    # the attention kernels see heads of the mean width: the same FLOPs (QK^T 192, PV 128) and K+V bytes
    assert attention_dims(sliding) == (16, 2, 160) and attention_dims(full) == (16, 1, 160)
    ops = iteration_ops(IterationShape(num_tokens=8, num_decode=8, decode_context=8 * 5000, num_emit=8), sm)
    qkv = sorted((op.count, op.shape[1]) for op in ops if op.name == "qkv_proj")
    assert qkv == [(9, 16 * 192 + 1 * 320), (39, 16 * 192 + 2 * 320)]
    assert {(op.count, op.shape[2]) for op in ops if op.name == "o_proj"} == {(9, 16 * 128), (39, 16 * 128)}
    by_count = {op.count: op for op in ops if op.name == "attn_decode"}
    # a windowed layer reads K and V of at most 128 tokens a sequence, a full one all 5,001
    assert by_count[39].bytes == 8 * 128 * 2 * 320 * 2 + 8 * 16 * 320 * 2
    assert by_count[9].bytes == 8 * 5001 * 1 * 320 * 2 + 8 * 16 * 320 * 2
    assert by_count[9].flops == 4.0 * 8 * 5001 * 16 * 160


def test_equal_widths_keep_the_plain_shapes():
    """v_head_dim 0 (or equal to head_dim) leaves every grouped-query model as it was."""
    m = MODEL_CATALOG["llama-3.1-8b"]
    same = m.model_copy(update={"v_head_dim": m.head_dim})
    assert same.param_count == m.param_count and same.kv_bytes_per_token(2) == m.kv_bytes_per_token(2)
    shape = IterationShape(num_tokens=40, num_decode=8, decode_context=8 * 900, num_emit=8,
                           prefill_chunks=((32, 0),))
    plain = iteration_ops(shape, ShardedModel.build(m, 2, 1, "bf16", "bf16", "bf16", 8))
    assert plain == iteration_ops(shape, ShardedModel.build(same, 2, 1, "bf16", "bf16", "bf16", 8))


@pytest.mark.parametrize("change, match", [
    ({"hybrid_layer_pattern": [0, 1] * 23}, "each of the 48 layers"),
    ({"moe_layer_freq": [0] + [1] * 46 + [0]}, "dense layers after the first MoE layer"),
    ({"swa_v_head_dim": 192}, "value widths that differ"),
])
def test_unmodelled_variants_are_refused_with_the_reason(tmp_path, change, match):
    with pytest.raises(CatalogError, match=match) as err:
        load_hf_config(write_config(tmp_path, {**MIMO_V2, **change}))
    assert err.value.fix

"""Step-3.5/3.7-Flash: sliding-window layers with more query heads than the full-attention
ones, and a sigmoid gate per head on the attention output."""

from __future__ import annotations

import pytest
from conftest import CATALOG_ONLY_FIELDS, write_config

from simulator.cost.ops import IterationShape, ShardedModel, iteration_ops, layer_geometries
from simulator.errors import CatalogError
from simulator.memory import sliding_window_groups
from simulator.models import MODEL_CATALOG, get_model, load_hf_config

# stepfun-ai/Step-3.5-Flash's config.json shape keys, under the names vLLM's step3p5.py reads;
# layer_types runs on over the three MTP layers (45-47).
STEP35 = {
    "model_type": "step3p5", "architectures": ["Step3p5ForCausalLM"], "num_hidden_layers": 45,
    "hidden_size": 4096, "num_attention_heads": 64, "num_attention_groups": 8, "head_dim": 128,
    "attention_other_setting": {"attention_type": "sliding_attention", "num_attention_heads": 96,
                                "num_attention_groups": 8, "head_dim": 128},
    "layer_types": ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(45)]
    + ["sliding_attention"] * 3,
    "sliding_window": 512, "use_head_wise_attn_gate": True, "moe_layers_enum": ",".join(map(str, range(3, 45))),
    "moe_num_experts": 288, "moe_top_k": 8, "moe_intermediate_size": 1280, "share_expert_dim": 1280,
    "intermediate_size": 11264, "vocab_size": 128896, "max_position_embeddings": 262144,
    "tie_word_embeddings": False,
}
KEEP = CATALOG_ONLY_FIELDS | {"encoder_params"}



def test_config_loads_as_the_catalog_entry(tmp_path):
    entry = MODEL_CATALOG["step-3.5-flash"]
    assert load_hf_config(write_config(tmp_path, STEP35)).model_dump(exclude=KEEP) == entry.model_dump(exclude=KEEP)
    # Step-3.7-Flash: the same text tower under a vision-language wrapper, its encoder loaded but idle
    wrapped = {"model_type": "step3p7", "architectures": ["Step3p7ForConditionalGeneration"], "text_config": STEP35}
    step37 = load_hf_config(write_config(tmp_path, wrapped))
    assert step37.model_dump(exclude=KEEP) == entry.model_dump(exclude=KEEP)
    assert step37.encoder_params == get_model("stepfun-ai/Step-3.7-Flash").encoder_params > 1e9


def test_sliding_layers_have_their_own_query_heads_and_a_gate_per_head():
    m = MODEL_CATALOG["step-3.5-flash"]
    h = m.hidden_size
    sliding = h * (96 * 128 + 96 + 2 * 8 * 128) + 96 * 128 * h + 2 * 128  # q, gate, k, v; o; q/k norms
    full = h * (64 * 128 + 64 + 2 * 8 * 128) + 64 * 128 * h + 2 * 128
    moe = 288 * 3 * h * 1280 + 3 * h * 1280 + h * 288  # routed, shared, router
    body = 33 * sliding + 12 * full + 3 * 3 * h * 11264 + 42 * moe + 2 * 45 * h
    assert m.param_count == body + 2 * 128896 * h + h
    assert m.kv_bytes_per_token(2) == 12 * 2 * 8 * 128 * 2  # only the full layers grow with the context
    # both kinds keep 8 KV heads of 128: the windowed layers' blocks hold as many tokens as the full ones'
    assert sliding_window_groups(m, 1, 16, 4) == (3, -(-511 // 16) + 1)


def test_each_kind_of_layer_is_timed_with_its_heads_and_gate():
    sm = ShardedModel.build(MODEL_CATALOG["step-3.5-flash"], 4, 1, "bf16", "bf16", "bf16", 8)
    sliding, full = layer_geometries(sm)
    assert (sliding.attn_layer_passes, sliding.heads, full.attn_layer_passes, full.heads) == (33, 24, 12, 16)
    ops = iteration_ops(IterationShape(num_tokens=8, num_decode=8, decode_context=8 * 3000, num_emit=8), sm)
    qkv = sorted((op.count, op.shape[1]) for op in ops if op.name == "qkv_proj")
    assert qkv == [(12, 16 * 128 + 16 + 2 * 2 * 128), (33, 24 * 128 + 24 + 2 * 2 * 128)]
    gates = sorted((op.count, op.bytes) for op in ops if op.name == "attn_output_gate")
    assert gates == [(12, (2 * 16 * 128 + 16) * 8 * 2.0), (33, (2 * 24 * 128 + 24) * 8 * 2.0)]


@pytest.mark.parametrize("change, match", [
    ({"layer_types": ["full_attention"] * 40}, "each of the 45 layers"),
    ({"moe_layers_enum": "3,4,5,7"}, "dense layers after the first MoE layer"),
    ({"share_expert_dim": 1000}, "whole number of expert widths"),
])
def test_unmodelled_variants_are_refused_with_the_reason(tmp_path, change, match):
    with pytest.raises(CatalogError, match=match) as err:
        load_hf_config(write_config(tmp_path, {**STEP35, **change}))
    assert err.value.fix

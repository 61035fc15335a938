"""Kimi-K3: Kimi Delta Attention layers between gated MLA ones, and a latent MoE whose
routed experts ship in MXFP4."""

from __future__ import annotations

import json

import pytest

from simulator.cost.ops import IterationShape, ShardedModel, iteration_ops
from simulator.errors import CatalogError
from simulator.memory import sequence_state_bytes_per_gpu, weight_bytes_per_gpu
from simulator.models import MODEL_CATALOG, get_model, load_hf_config

KDA_LAYERS = [i for i in range(1, 94) if i % 4 and i != 93]  # 1-based; every fourth is MLA, and the last
# moonshotai/Kimi-K3's config.json shape keys (aiconfigurator-core 0.12's copy)
TEXT = {
    "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"], "num_hidden_layers": 93,
    "hidden_size": 7168, "num_attention_heads": 96, "num_key_value_heads": 96, "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": True,
    "mla_use_output_gate": True, "intermediate_size": 33792, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "num_experts": 896, "num_experts_per_token": 16, "moe_intermediate_size": 3072, "num_shared_experts": 2,
    "routed_expert_hidden_size": 3584, "vocab_size": 163840, "max_position_embeddings": 1048576,
    "tie_word_embeddings": False,
    "linear_attn_config": {"kda_layers": KDA_LAYERS, "full_attn_layers": [i for i in range(1, 94) if i not in KDA_LAYERS],
                           "num_heads": 96, "head_dim": 128, "short_conv_kernel_size": 4, "use_full_rank_gate": True},
    "quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"},
}
KEEP = {"name", "hf_id", "aliases", "published_params_b", "published_active_params_b", "encoder_params"}


def _write(tmp_path, text: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "kimi_k3", "architectures": ["KimiK3ForConditionalGeneration"],
                                "text_config": text, "vision_config": {"vt_num_hidden_layers": 27}}))
    return path


def test_config_loads_as_the_catalog_entry(tmp_path):
    assert len(KDA_LAYERS) == 69
    entry = MODEL_CATALOG["kimi-k3"]
    loaded = load_hf_config(_write(tmp_path, TEXT))
    assert loaded.model_dump(exclude=KEEP) == entry.model_dump(exclude=KEEP)
    assert loaded.encoder_params == entry.encoder_params and get_model("moonshotai/Kimi-K3") is entry


def test_shapes_give_the_published_sizes_and_the_state():
    m = MODEL_CATALOG["kimi-k3"]
    h, p = 7168, 96 * 128
    kda = h * (4 * p + 96 + 128) + 128 * p + 3 * p * 4 + 96 + p + 128 + p * h
    assert kda == 443_740_384  # q, k, v, g; beta and the decay's down projection; its up projection ...
    text = m.param_count - m.encoder_params
    assert 2.775e12 < text < 2.785e12  # the report's 2.78T
    # the KDA state is fp32: 96 heads of 128 x 128, and the conv's last 3 inputs of q, k, v (bf16)
    assert m.linear_state_bytes() == 69 * (96 * 128 * 128 * 4 + 3 * p * 3 * 2)
    assert sequence_state_bytes_per_gpu(m, 8, 1) == m.linear_state_bytes() / 8
    # MLA's latent (512 + 64) is the only cache that grows, on the 24 MLA layers
    assert m.kv_bytes_per_token(2) == 24 * 576 * 2


def test_kda_and_gated_mla_ops():
    m = MODEL_CATALOG["kimi-k3"]
    sm = ShardedModel.build(m, 8, 1, "bf16", "bf16", "bf16", 8, expert_weight_dtype="fp4", expert_parallel=True)
    ops = {op.name: op for op in iteration_ops(IterationShape(num_tokens=4, num_decode=4, decode_context=4 * 1000,
                                                              num_emit=4), sm)}
    assert ops["kda_in_proj_qkvg"].shape[1] == 4 * 12 * 128 and ops["kda_in_proj_qkvg"].count == 69
    assert ops["kda_decay_up"].shape[1:] == (12 * 128, 128)
    assert ops["kda_decode"].family == "linear_attn" and ops["kda_decode"].count == 69
    h = 7168
    assert ops["attn_gate_proj"].shape[1:] == (12 * 128, h) and ops["attn_gate_proj"].count == 24
    assert ops["attn_decode"].count == 24
    # the routed experts run on the 3,584-wide latent, projected in and out on every rank
    assert ops["moe_latent_in"].shape[1:] == (3584, h) and ops["fused_moe"].shape[1] == 3584


def test_latent_projections_are_replicated_in_the_weights():
    m = MODEL_CATALOG["kimi-k3"]
    per_layer = 2 * 7168 * 3584
    split = weight_bytes_per_gpu(m.model_copy(update={"moe_latent_size": 0}), "bf16", 8, 1, "fp4")
    full = weight_bytes_per_gpu(m, "bf16", 8, 1, "fp4")
    # what the latent shrinks in the experts, less its projections held whole on each of 8 ranks
    expert_saving = m.moe_layers * 896 * 3 * (7168 - 3584) * 3072 * 4.25 / 8 / 8
    assert full - split == pytest.approx(92 * per_layer * 2 - expert_saving, rel=1e-9)


def test_a_low_rank_kda_gate_is_refused_with_the_reason(tmp_path):
    text = {**TEXT, "linear_attn_config": {**TEXT["linear_attn_config"], "use_full_rank_gate": False}}
    with pytest.raises(CatalogError, match="low-rank KDA output gate") as err:
        load_hf_config(_write(tmp_path, text))
    assert err.value.fix

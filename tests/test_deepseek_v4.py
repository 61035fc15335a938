"""DeepSeek-V4: windowed multi-query attention plus a compressed KV per layer (the indexer's
top-k of a 4:1 one, or all of a 128:1 one), grouped output projection, four residual streams."""

from __future__ import annotations

import pytest
from conftest import CATALOG_ONLY_FIELDS, write_config

from simulator.cost.ops import IterationShape, ShardedModel, iteration_ops
from simulator.errors import CatalogError
from simulator.hardware import get_gpu
from simulator.memory import kv_bytes_per_token_per_gpu, plan_memory, sequence_state_bytes_per_gpu
from simulator.models import MODEL_CATALOG, get_model, load_hf_config
from simulator.models.compressed import V4_INDEX_KEY_BYTES, V4_KV_ENTRY_BYTES

# deepseek-ai/DeepSeek-V4-Flash's config.json shape keys (aiconfigurator-core 0.12's copy);
# compress_ratios runs one entry past the layers, the MTP layer's.
FLASH = {
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "num_hidden_layers": 43,
    "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
    "q_lora_rank": 1024, "o_lora_rank": 1024, "o_groups": 8, "qk_rope_head_dim": 64, "sliding_window": 128,
    "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512, "n_routed_experts": 256,
    "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048, "num_hash_layers": 3,
    "hc_mult": 4, "vocab_size": 129280, "max_position_embeddings": 1048576, "tie_word_embeddings": False,
    "expert_dtype": "fp4", "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0],
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}
KEEP = CATALOG_ONLY_FIELDS



def test_config_loads_as_the_catalog_entry(tmp_path):
    entry = MODEL_CATALOG["deepseek-v4-flash"]
    assert load_hf_config(write_config(tmp_path, FLASH)).model_dump(exclude=KEEP) == entry.model_dump(exclude=KEEP)
    assert (entry.compressed.csa_layers, entry.compressed.hca_layers) == (21, 20)
    # SGLang's FP8 re-release names the same architecture deepseek_ref, with FP8 experts
    fp8 = {**FLASH, "model_type": "deepseek_ref"}
    del fp8["expert_dtype"]
    assert load_hf_config(write_config(tmp_path, fp8)).native_expert_dtype is None
    assert get_model("sgl-project/DeepSeek-V4-Flash-FP8") is entry


def test_parameters_match_the_shapes():
    m = MODEL_CATALOG["deepseek-v4-flash"]
    d, q, hd = 4096, 1024, 512
    core = d * q + q + q * 64 * hd + d * hd + hd + 64 * hd * 1024 + 8 * 1024 * d + 64
    hyper = 2 * (24 * 4 * d + 24 + 3)
    csa = (2 * d * 2 * hd + 4 * 2 * hd + hd) + (q * 64 * 128 + d * 64 + 2 * d * 2 * 128 + 4 * 2 * 128 + 128)
    hca = 2 * d * hd + 128 * hd + hd
    moe = 256 * 3 * d * 2048 + 3 * d * 2048 + d * 256
    body = 43 * (core + hyper + moe + 2 * d) + 21 * csa + 20 * hca
    assert m.param_count == body + 2 * 129280 * d + d + (16 * d + 5)
    assert 284.0e9 < m.param_count < 284.5e9  # DeepSeek's 284B


def test_cache_grows_with_compressed_entries_and_each_sequence_holds_its_window():
    m = MODEL_CATALOG["deepseek-v4-flash"]
    per_token = 21 * (V4_KV_ENTRY_BYTES + V4_INDEX_KEY_BYTES) / 4 + 20 * V4_KV_ENTRY_BYTES / 128
    assert m.kv_bytes_per_token(2) == m.kv_bytes_per_token(1) == per_token == pytest.approx(3850.25)
    assert kv_bytes_per_token_per_gpu(m, "fp8", 8, 1) == per_token  # one KV head: on every rank
    # each layer's 128 raw entries; the compressors' fp32 rings (main and indexer on CSA layers)
    state = 43 * 128 * 584 + 21 * (8 * 4 * 512 * 4 + 8 * 4 * 128 * 4) + 20 * 128 * 2 * 512 * 4
    assert sequence_state_bytes_per_gpu(m, 4, 1) == state
    plan = plan_memory(m, get_gpu("b200"), tp=4, pp=1, weight_dtype="fp8", kv_dtype="fp8",
                       expert_weight_dtype="fp4", utilization=0.9, runtime_reserve_gib=1.0, block_size=16,
                       max_batched_tokens=8192, max_num_seqs=256, max_model_len=65536)
    assert plan.state_blocks == -(-state // (16 * per_token))


def test_each_kind_of_layer_attends_to_its_own_entries():
    m = MODEL_CATALOG["deepseek-v4-flash"]
    sm = ShardedModel.build(m, 4, 1, "fp8", "fp8", "fp8", 8, expert_weight_dtype="fp4")
    ops = iteration_ops(IterationShape(num_tokens=2, num_decode=2, decode_context=2 * 40000, num_emit=2), sm)
    by = {op.name: op for op in ops}
    kv = 2 * 40000 + 2
    window = 2 * 128
    assert by["swa_attn_decode"].count == 2 and by["csa_attn_decode"].count == 21 and by["hca_attn_decode"].count == 20
    assert by["swa_attn_decode"].bytes == window * 584 + 2 * 16 * 512 * 2 * 2
    assert by["csa_attn_decode"].bytes == (window + 2 * 512) * 584 + 2 * 16 * 512 * 2 * 2  # top-k of 4:1
    assert by["hca_attn_decode"].bytes == (window + kv / 128) * 584 + 2 * 16 * 512 * 2 * 2  # all of 128:1
    # 16 heads a GPU compute as FlashMLA's 64
    assert by["csa_attn_decode"].flops == 2.0 * 64 * 1024 * (window + 2 * 512)
    assert by["indexer_decode"].count == 21 and by["indexer_decode"].shape[1] == kv / 4
    # the grouped output projection: 2 groups a GPU, 8 heads of 512 each into 1,024
    assert by["wo_a"].shape == (2, 2 * 1024, 8 * 512) and by["wo_b"].shape == (2, 4096, 2 * 1024)
    assert by["hyper_connections"].count == 43
    prefill = iteration_ops(IterationShape(num_tokens=4096, prefill_chunks=((4096, 0),), num_emit=1), sm)
    assert {op.name for op in prefill} >= {"swa_attn_prefill", "csa_attn_prefill", "hca_attn_prefill",
                                           "indexer_prefill"}


@pytest.mark.parametrize("change, match", [
    ({"num_key_value_heads": 8}, "more than one KV head"),
    ({"compress_ratios": [0, 16] * 22}, "0, 4 or 128"),
])
def test_unmodelled_variants_are_refused_with_the_reason(tmp_path, change, match):
    with pytest.raises(CatalogError, match=match) as err:
        load_hf_config(write_config(tmp_path, {**FLASH, **change}))
    assert err.value.fix

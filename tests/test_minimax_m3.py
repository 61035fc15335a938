"""MiniMax-M3: grouped-query attention whose sparse layers read only the blocks an indexer
selects, beside dense-attention first layers; the indexer's key cache sits beside the KV."""

from __future__ import annotations

import pytest
from conftest import CATALOG_ONLY_FIELDS, write_config

from simulator.cost.ops import IterationShape, ShardedModel, iteration_ops
from simulator.errors import CatalogError
from simulator.memory import kv_bytes_per_token_per_gpu
from simulator.models import MODEL_CATALOG, ModelSpec, get_model, load_hf_config

# MiniMaxAI/MiniMax-M3's config.json shape keys (aiconfigurator-core 0.12's copy)
M3 = {
    "architectures": ["MiniMaxM3ForCausalLM"], "model_type": "minimax_m3", "num_hidden_layers": 60,
    "hidden_size": 6144, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
    "dense_intermediate_size": 12288, "intermediate_size": 3072, "moe_intermediate_size": 3072,
    "moe_layer_freq": [0, 0, 0] + [1] * 57, "first_k_dense_replace": 3, "num_local_experts": 128,
    "num_experts_per_tok": 4, "n_shared_experts": 1, "shared_intermediate_size": 3072, "use_qk_norm": True,
    "qk_norm_type": "per_head", "attention_output_gate": False, "vocab_size": 200064,
    "max_position_embeddings": 1048576, "tie_word_embeddings": False,
    "sparse_attention_config": {
        "use_sparse_attention": True, "sparse_attention_freq": [0, 0, 0] + [1] * 57, "sparse_block_size": 128,
        "sparse_topk_blocks": 16, "sparse_num_index_heads": 4, "sparse_index_dim": 128, "sparse_init_block": 0,
        "sparse_local_block": 1, "sparse_disable_index_value": [0, 0, 0] + [1] * 57},
}
KEEP = CATALOG_ONLY_FIELDS



def test_config_loads_as_the_catalog_entry(tmp_path):
    entry = MODEL_CATALOG["minimax-m3"]
    assert load_hf_config(write_config(tmp_path, M3)).model_dump(exclude=KEEP) == entry.model_dump(exclude=KEEP)
    assert get_model("MiniMaxAI/MiniMax-M3") is entry
    assert (entry.index_topk, entry.sparse_block_size, entry.indexed_layers) == (16 * 128, 128, 57)


def test_indexers_add_weights_and_a_key_cache_on_the_sparse_layers_only():
    m = MODEL_CATALOG["minimax-m3"]
    h = m.hidden_size
    attention = h * (64 * 128 + 2 * 4 * 128) + 64 * 128 * h + 2 * 128
    indexer = h * 4 * 128 + h * 128 + 2 * 128  # q heads and the one key head, an RMSNorm on each
    moe = 128 * 3 * h * 3072 + 3 * h * 3072 + h * 128
    body = 60 * attention + 57 * indexer + 3 * 3 * h * 12288 + 57 * moe + 2 * 60 * h
    assert m.param_count == body + 2 * 200064 * h + h
    # every layer caches its 4 KV heads; each sparse layer also one 128-wide key, in the KV format
    assert m.kv_bytes_per_token(2) == 60 * 2 * 4 * 128 * 2 + 57 * 128 * 2
    assert m.kv_bytes_per_token(1) == 60 * 2 * 4 * 128 + 57 * 128
    # past TP4 the 4 KV heads are replicated; the indexer's one key is on every rank
    assert kv_bytes_per_token_per_gpu(m, "bf16", 8, 1) == 60 * 2 * 1 * 128 * 2 + 57 * 128 * 2


def test_sparse_layers_read_at_most_the_selected_blocks():
    m = MODEL_CATALOG["minimax-m3"]
    sm = ShardedModel.build(m, 8, 1, "fp8", "fp8", "bf16", 8)
    assert (sm.window, sm.window_passes, sm.index_passes, sm.index_topk) == (2048, 57, 57, 0)
    ops = iteration_ops(IterationShape(num_tokens=4, num_decode=4, decode_context=4 * 20000, num_emit=4), sm)
    attn = next(op for op in ops if op.name == "attn_decode")
    # 3 dense layers read all 20,001 tokens of each sequence, 57 sparse ones 2,048
    kv_len = (3 * 4 * 20001 + 57 * 4 * 2048) / 60
    assert attn.bytes == pytest.approx(kv_len * 2 * 1 * 128 * 2 + 4 * 8 * 128 * 2 * 2)
    # the indexer scores every cached token on the sparse layers, in the KV cache's format
    index = next(op for op in ops if op.name == "indexer_decode")
    assert (index.count, index.shape[1], index.dtype) == (57, 4 * 20001, "bf16")
    assert {op.name for op in ops} >= {"indexer_qk_proj", "indexer_norm_rope"}
    # a dense-attention twin reads the whole context on every layer and runs no indexer
    dense = ModelSpec(**{**m.model_dump(), "index_n_heads": 0, "index_head_dim": 0, "index_topk": 0,
                         "sparse_block_size": 0, "indexer_layers": 0})
    dense_ops = iteration_ops(IterationShape(num_tokens=4, num_decode=4, decode_context=4 * 20000, num_emit=4),
                              ShardedModel.build(dense, 8, 1, "fp8", "fp8", "bf16", 8))
    assert not any(op.family == "indexer" for op in dense_ops)
    assert next(op for op in dense_ops if op.name == "attn_decode").bytes > 5 * attn.bytes


@pytest.mark.parametrize("change, match", [
    ({"attention_output_gate": True}, "attention output gate"),
    ({"moe_layer_freq": [0, 0, 0] + [1] * 56 + [0]}, "dense layers after the first MoE layer"),
    ({"sparse_attention_config": {**M3["sparse_attention_config"], "sparse_disable_index_value": [0] * 60}},
     "also project values"),
])
def test_unmodelled_variants_are_refused_with_the_reason(tmp_path, change, match):
    with pytest.raises(CatalogError, match=match) as err:
        load_hf_config(write_config(tmp_path, {**M3, **change}))
    assert err.value.fix


def test_sparse_block_size_needs_a_block_sparse_gqa_model():
    m = MODEL_CATALOG["minimax-m3"].model_dump()
    with pytest.raises(ValueError, match="multiple of it"):
        ModelSpec(**{**m, "index_topk": 2000})
    with pytest.raises(ValueError, match="sparse-attention indexer"):
        ModelSpec(**{**m, "sparse_block_size": 0})


def test_the_kv_block_is_the_sparse_block(tmp_path):
    """vLLM cannot page M3's cache in other blocks than the indexer's 128 tokens: servesim takes
    128 by default and refuses another explicit size with the fix."""
    from conftest import scenario

    from simulator import api
    from simulator.errors import ConfigError
    from simulator.simulation import Simulation

    d = scenario("vllm-v1", model="minimax-m3", gpu="h200", tp=8, num_requests=4)
    d["memory"].pop("block_size")
    assert Simulation(api.load(data=d)).memory.block_size == 128
    d["memory"]["block_size"] = 16
    with pytest.raises(ConfigError, match="128-token KV blocks, not 16") as err:
        Simulation(api.load(data=d))
    assert err.value.where == "memory.block_size" and "128" in err.value.fix

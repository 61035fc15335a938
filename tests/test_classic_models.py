"""The classic decoders (catalog_classic.py, hf_classic.py): a config.json of each reads as
its catalog entry, the readers' quirks hold, and the new entries simulate."""

from __future__ import annotations

import pytest
from conftest import CATALOG_ONLY_FIELDS, closed_loop, fixed, scenario, simulate, write_config
from test_invariants import check_kv, check_requests, check_tokens

from simulator.errors import CatalogError
from simulator.models import get_model
from simulator.models.catalog import MODEL_CATALOG
from simulator.models.catalog_classic import CONFIGS
from simulator.models.hf_config import load_hf_config


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_config_json_reads_as_the_catalog_entry(tmp_path, name):
    spec = load_hf_config(write_config(tmp_path, CONFIGS[name]))
    entry = MODEL_CATALOG[name]
    assert spec.model_dump(exclude=CATALOG_ONLY_FIELDS) == entry.model_dump(exclude=CATALOG_ONLY_FIELDS)


def test_falcon_kv_heads_follow_its_architecture_flags(tmp_path):
    seven, forty = get_model("falcon-7b"), get_model("falcon-40b")
    assert (seven.num_kv_heads, seven.head_dim, seven.tied_embeddings) == (1, 64, True)
    assert forty.num_kv_heads == 8 and not forty.gated_mlp and forty.ffn_size == 4 * forty.hidden_size
    # Without new_decoder_architecture or multi_query, every head keeps its own K and V.
    mha = {**CONFIGS["falcon-7b"], "multi_query": False}
    assert load_hf_config(write_config(tmp_path, mha)).num_kv_heads == 71


def test_the_classic_families_keep_their_own_conventions():
    assert get_model("gpt-j-6b").head_dim == 256 and not get_model("gpt-j-6b").tied_embeddings
    assert get_model("starcoder").num_kv_heads == 1 and get_model("starcoder").learned_pos_embeddings
    mpt = get_model("mosaicml/mpt-30b-chat")
    assert (mpt.name, mpt.head_dim, mpt.attention_bias, mpt.max_position_embeddings) == ("mpt-30b", 112, False, 8192)
    command_a = get_model("command-a")
    assert (command_a.sliding_window, command_a.sliding_layers) == (4096, 48)  # three layers in four
    assert get_model("command-r-plus").qk_norm and not get_model("command-r").qk_norm
    qwen = get_model("qwen1.5-moe-a2.7b")
    assert (qwen.num_shared_experts, qwen.shared_expert_gate, qwen.qkv_bias) == (4, True, True)
    assert get_model("deepseek-moe-16b").first_dense_layers == 1
    assert get_model("bigscience/bloomz").name == "bloom-176b"
    assert get_model("codellama/CodeLlama-70b-Instruct-hf").vocab_size == 32016


def test_dense_families_refuse_expert_keys_and_moe_ones_refuse_dense_gaps(tmp_path):
    with pytest.raises(CatalogError, match="mixture-of-experts config"):
        load_hf_config(write_config(tmp_path, {**CONFIGS["starcoder2-15b"], "num_experts": 8}))
    with pytest.raises(CatalogError, match="decoder_sparse_step"):
        load_hf_config(write_config(tmp_path, {**CONFIGS["qwen1.5-moe-a2.7b"], "decoder_sparse_step": 2}))
    with pytest.raises(CatalogError, match="not a multiple"):
        load_hf_config(write_config(tmp_path, {**CONFIGS["qwen1.5-moe-a2.7b"],
                                               "shared_expert_intermediate_size": 2000}))
    with pytest.raises(CatalogError, match="missing required key 'n_embd'"):
        load_hf_config(write_config(tmp_path, {"model_type": "gptj", "n_layer": 2, "n_head": 2, "vocab_size": 8}))


@pytest.mark.parametrize("model", ["falcon-7b", "bloom-7b1", "mpt-7b", "starcoder2-15b", "command-a",
                                   "qwen1.5-moe-a2.7b", "deepseek-moe-16b"])
def test_each_family_simulates_with_its_invariants(model):
    d = scenario("vllm-v1", arrival=closed_loop(8), prompt=fixed(600), output=fixed(40), num_requests=24,
                 model=model, gpu="h100-sxm", max_model_len=2048, kv_tokens=20000)
    sim, res = simulate(d)
    check_requests(d, res.requests)
    check_tokens(d, res.requests, res.iterations)
    check_kv(sim, res.iterations)
    assert (res.requests["status"] == "completed").all()


def test_a_nemotron_config_reads_squared_relu_and_kv_channels(tmp_path):
    """nvidia/Nemotron-Mini-4B-Instruct's config.json (refs/pr/4): 4.19B by its shapes, the card's 4B."""
    spec = load_hf_config(write_config(tmp_path, {
        "model_type": "nemotron", "hidden_size": 3072, "num_hidden_layers": 32, "num_attention_heads": 24,
        "num_key_value_heads": 8, "kv_channels": 128, "intermediate_size": 9216, "hidden_act": "relu2",
        "partial_rotary_factor": 0.5, "vocab_size": 256000, "max_position_embeddings": 4096,
        "tie_word_embeddings": False}))
    assert (spec.head_dim, spec.gated_mlp, spec.norm, spec.tied_embeddings) == (128, False, "layernorm", False)
    assert spec.param_count / 1e9 == pytest.approx(4.19, abs=0.01)

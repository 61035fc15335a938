"""Catalog sanity: shapes reproduce published sizes, GPU figures are complete, lookups work."""

from __future__ import annotations

import json

import pytest

from simulator.errors import CatalogError
from simulator.hardware import GPU_CATALOG, TENSOR_DTYPES, GPUSpec, get_gpu, list_gpus
from simulator.models import MODEL_CATALOG, ModelSpec, get_model, list_models, load_hf_config

# Fields that describe shapes (everything a loaded config.json must reproduce).
SHAPE_FIELDS = (
    "num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "ffn_size",
    "gated_mlp", "vocab_size", "tied_embeddings", "max_position_embeddings",
    "attention_bias", "mlp_bias", "norm", "learned_pos_embeddings", "qkv_bias", "qk_norm",
)  # fmt: skip

PUBLISHED_B = {
    "llama-3.1-8b": 8.03,
    "llama-3.1-70b": 70.6,
    "llama-3.1-405b": 405.9,
    "llama-2-7b": 6.74,
    "llama-2-13b": 13.0,
    "llama-2-70b": 69.0,
    "qwen3-8b": 8.19,
    "qwen3-32b": 32.8,
    "mistral-7b": 7.25,
    "opt-13b": 12.85,
    "codellama-34b": 33.7,
}

# Verbatim shape keys of the published config.json files.
LLAMA_31_8B_CONFIG = {
    "_name_or_path": "meta-llama/Llama-3.1-8B",
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
QWEN3_32B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "head_dim": 128,
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "max_position_embeddings": 40960,
    "model_type": "qwen3",
    "num_attention_heads": 64,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "vocab_size": 151936,
}
OPT_13B_CONFIG = {
    "_name_or_path": "facebook/opt-13b",
    "activation_function": "relu",
    "architectures": ["OPTForCausalLM"],
    "do_layer_norm_before": True,
    "enable_bias": True,
    "ffn_dim": 20480,
    "hidden_size": 5120,
    "max_position_embeddings": 2048,
    "model_type": "opt",
    "num_attention_heads": 40,
    "num_hidden_layers": 40,
    "vocab_size": 50272,
    "word_embed_proj_dim": 5120,
}

# XiaomiMiMo/MiMo-7B-Base's config.json (shape keys): Qwen2's layer, whose attention_bias
# vLLM's Qwen2 attention ignores (q/k/v biases always, none on o_proj).
MIMO_7B_CONFIG = {
    "architectures": ["MiMoForCausalLM"], "model_type": "mimo", "num_hidden_layers": 36, "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 11008,
    "vocab_size": 151680, "max_position_embeddings": 32768, "attention_bias": True, "hidden_act": "silu",
    "sliding_window": 32768, "max_window_layers": 32, "use_sliding_window": False, "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False,
}


def _write(tmp_path, cfg, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


# ----------------------------------------------------------------------------- models


def test_catalog_has_required_models():
    assert set(PUBLISHED_B) <= set(MODEL_CATALOG)
    assert list_models() == sorted(MODEL_CATALOG)


@pytest.mark.parametrize("name", sorted(MODEL_CATALOG))
def test_param_count_matches_published(name):
    spec = MODEL_CATALOG[name]
    assert spec.published_params_b is not None, f"{name} lacks published_params_b"
    if name in PUBLISHED_B:
        assert spec.published_params_b == PUBLISHED_B[name]
    # A shape error shows up as >2% here: fix the shapes, never the tolerance.
    assert spec.param_count / 1e9 == pytest.approx(spec.published_params_b, rel=0.02)


def test_kv_bytes_per_token_llama3_70b():
    spec = get_model("llama-3.1-70b")
    assert spec.kv_bytes_per_token(2) == 2 * 80 * 8 * 128 * 2 == 327680
    assert spec.kv_bytes_per_token(1) == 163840  # fp8 KV halves it


def test_weight_bytes_follow_dtype():
    spec = get_model("llama-3.1-8b")
    assert spec.weight_bytes(2) == 2 * spec.param_count
    assert spec.weight_bytes(0.5) == spec.param_count / 2


def test_head_dim_may_differ_from_hidden_over_heads():
    spec = get_model("qwen3-32b")
    assert spec.num_heads * spec.head_dim != spec.hidden_size


def test_kv_heads_must_divide_heads():
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        ModelSpec.model_validate({**get_model("llama-3.1-8b").model_dump(), "num_kv_heads": 5})


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("Llama-3.1-8B", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
        ("Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b"),
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"),
        ("Qwen/Qwen3-8B", "qwen3-8b"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
        ("facebook/opt-13b", "opt-13b"),
        ("codellama/CodeLlama-34b-Instruct-hf", "codellama-34b"),
        # release dates and checkpoint suffixes keep the shapes
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-v3"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "qwen3-235b-a22b"),
        ("Qwen/Qwen3-30B-A3B-Thinking-2507", "qwen3-30b-a3b"),
        ("amd/Llama-3.1-70B-Instruct-FP8-KV", "llama-3.1-70b"),
        ("MiniMaxAI/MiniMax-M2.7", "minimax-m2"),
        ("nvidia/Kimi-K2.6-NVFP4", "kimi-k2"),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "qwen3-coder-480b-a35b"),
        ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"),
        ("Qwen/Qwen3-32B-FP8-Static-PerTensor", "qwen3-32b"),  # in aiconfigurator's model list
    ],
)
def test_model_aliases(alias, expected):
    assert get_model(alias).name == expected


def test_unknown_model_guesses_or_lists_known_names():
    with pytest.raises(CatalogError) as info:
        get_model("llama-3.1-60b")
    assert "llama-3.1-70b" in str(info.value) and info.value.where == "model.name"  # did-you-mean
    with pytest.raises(CatalogError) as info:
        get_model("zzzzzzzz")  # no guess: too many names to list (85 filled the error); the fix says where
    assert f"none is close among the catalog's {len(MODEL_CATALOG)} models" in info.value.message
    assert "llama" not in info.value.message and "simulate list models" in info.value.fix
    with pytest.raises(CatalogError) as info:
        get_gpu("zzzzzzzz")  # a short catalog is listed
    assert "known GPUs: a10," in info.value.message


# ----------------------------------------------------------------------------- HF loader


@pytest.mark.parametrize(
    ("cfg", "catalog_name"),
    [
        (LLAMA_31_8B_CONFIG, "llama-3.1-8b"),
        (QWEN3_32B_CONFIG, "qwen3-32b"),
        (OPT_13B_CONFIG, "opt-13b"),
        (MIMO_7B_CONFIG, "mimo-7b"),
    ],
)
def test_load_hf_config_reproduces_catalog(tmp_path, cfg, catalog_name):
    loaded = load_hf_config(_write(tmp_path, cfg))
    expected = MODEL_CATALOG[catalog_name]
    for field in SHAPE_FIELDS:
        assert getattr(loaded, field) == getattr(expected, field), field
    assert loaded.param_count == expected.param_count


def test_load_hf_config_names(tmp_path):
    loaded = load_hf_config(_write(tmp_path, LLAMA_31_8B_CONFIG))
    assert loaded.name == "llama-3.1-8b"
    assert loaded.hf_id == "meta-llama/Llama-3.1-8B"
    assert load_hf_config(_write(tmp_path, LLAMA_31_8B_CONFIG), name="mine").name == "mine"
    assert load_hf_config(tmp_path).num_layers == 32  # a directory holding config.json


def test_load_hf_config_defaults(tmp_path):
    cfg = {k: v for k, v in LLAMA_31_8B_CONFIG.items() if k != "num_key_value_heads"}
    spec = load_hf_config(_write(tmp_path, cfg))
    assert spec.num_kv_heads == spec.num_heads == 32  # no GQA key: MHA
    assert spec.head_dim == 4096 // 32


def test_load_hf_config_missing_key_names_it(tmp_path):
    cfg = {k: v for k, v in LLAMA_31_8B_CONFIG.items() if k != "intermediate_size"}
    path = _write(tmp_path, cfg)
    with pytest.raises(CatalogError) as info:
        load_hf_config(path)
    assert "intermediate_size" in str(info.value)
    assert str(path) in str(info.value)
    assert info.value.fix


def test_load_hf_config_missing_file(tmp_path):
    with pytest.raises(CatalogError, match="not found"):
        load_hf_config(tmp_path / "nope.json")


def test_load_hf_config_bad_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(CatalogError, match="invalid JSON"):
        load_hf_config(path)


def test_load_hf_config_bad_value(tmp_path):
    with pytest.raises(CatalogError, match="hidden_size"):
        load_hf_config(_write(tmp_path, {**LLAMA_31_8B_CONFIG, "hidden_size": "4096"}))


def test_load_hf_config_rejects_unsupported_moe_and_unknown_types(tmp_path):
    with pytest.raises(CatalogError, match="mixture-of-experts"):
        load_hf_config(_write(tmp_path, {**LLAMA_31_8B_CONFIG, "num_local_experts": 8}))  # model_type llama
    with pytest.raises(CatalogError, match="mixture-of-experts"):
        load_hf_config(_write(tmp_path, {**LLAMA_31_8B_CONFIG, "model_type": "jamba", "num_experts": 16}))
    with pytest.raises(CatalogError, match="unsupported model_type"):
        load_hf_config(_write(tmp_path, {**LLAMA_31_8B_CONFIG, "model_type": "gpt2"}))


# ----------------------------------------------------------------------------- GPUs

REQUIRED_GPUS = (
    "h100-sxm", "h100-pcie", "h200", "a100-80gb-sxm", "a100-40gb",
    "l40s", "l4", "a10g", "b200", "mi300x",
)  # fmt: skip


def test_catalog_has_required_gpus():
    assert set(REQUIRED_GPUS) <= set(GPU_CATALOG)
    assert list_gpus() == sorted(GPU_CATALOG)


@pytest.mark.parametrize("name", sorted(GPU_CATALOG))
def test_gpu_fields_complete_and_positive(name):
    gpu = GPU_CATALOG[name]
    assert isinstance(gpu, GPUSpec)
    assert gpu.name == name == name.lower()
    for field in GPUSpec.model_fields:
        if field not in ("aliases", "kernel_tables_from", "sustained_attention_fraction",
                         "collective_wait_power_fraction",
                         "visible_memory_gib"):  # optional by design
            assert getattr(gpu, field) is not None, field
    if gpu.kernel_tables_from:  # borrowed tables come from a catalog GPU of the same vendor
        donor = GPU_CATALOG[gpu.kernel_tables_from]
        assert donor.vendor == gpu.vendor and donor.num_sms == gpu.num_sms
    assert gpu.memory_gb > 0 and gpu.hbm_tbps > 0 and gpu.num_sms > 0 and gpu.l2_cache_mb > 0
    # Driver-visible memory is a little below the datasheet figure, never far off.
    assert 0.85 * gpu.memory_gb / 1.073741824 < gpu.usable_memory_gib <= gpu.memory_gb
    assert "bf16" in gpu.peak_tflops
    assert set(gpu.peak_tflops) <= set(TENSOR_DTYPES)
    assert all(v > 0 for v in gpu.peak_tflops.values())
    # Dense half-precision peaks beat FP32, and 8-bit peaks are about double 16-bit ones.
    assert gpu.peak_tflops["bf16"] > gpu.peak_tflops["fp32"]
    if "fp8" in gpu.peak_tflops:
        assert gpu.peak_tflops["fp8"] == pytest.approx(2 * gpu.peak_tflops["bf16"], rel=0.03)
    for link in (gpu.intra_node_link, gpu.inter_node_link, gpu.pcie):
        assert link.bandwidth_gbps > 0 and link.latency_us >= 0 and link.name
    assert gpu.cost_per_gpu_hour > 0


def test_h100_dense_peaks():
    h100 = get_gpu("h100-sxm")
    assert h100.peak_tflops_for("bf16") == pytest.approx(989, abs=1)
    assert h100.peak_tflops_for("fp8") == pytest.approx(1979, abs=1)
    assert h100.peak_tflops_for("bfloat16") == h100.peak_tflops_for("torch.bfloat16") == 989
    assert h100.peak_tflops_for("float8_e4m3fn") == h100.peak_tflops["fp8"]
    assert h100.hbm_tbps == 3.35
    assert h100.usable_memory_gib == pytest.approx(81559 / 1024)


def test_design_table_values():
    assert get_gpu("h200").peak_tflops["bf16"] == 989 and get_gpu("h200").hbm_tbps == 4.8
    assert get_gpu("h200").memory_gb == 141
    assert get_gpu("a100-80gb-sxm").peak_tflops["bf16"] == 312
    assert get_gpu("l40s").peak_tflops["bf16"] == pytest.approx(362, abs=1)
    assert get_gpu("mi300x").peak_tflops["bf16"] == pytest.approx(1307, abs=1)


def test_unsupported_dtype_names_supported_ones():
    with pytest.raises(CatalogError) as info:
        get_gpu("a100-80gb-sxm").peak_tflops_for("fp8")
    msg = str(info.value)
    assert "fp8" in msg and "bf16" in msg and "int8" in msg
    with pytest.raises(CatalogError, match="unknown compute dtype"):
        get_gpu("h100").peak_tflops_for("float128")


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("H100", "h100-sxm"),
        ("h100_sxm", "h100-sxm"),
        ("H100-SXM5-80GB", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # torch.cuda.get_device_name()
        ("H100 PCIe", "h100-pcie"),
        ("a100-80gb", "a100-80gb-sxm"),
        ("a100_sxm", "a100-80gb-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("H200", "h200"),
        ("L40S", "l40s"),
        ("NVIDIA L4", "l4"),
        ("A10G", "a10g"),
        ("B200", "b200"),
        ("AMD Instinct MI300X", "mi300x"),
    ],
)
def test_gpu_aliases(alias, expected):
    assert get_gpu(alias).name == expected


def test_unknown_gpu_guesses_or_lists_known_names():
    with pytest.raises(CatalogError) as info:
        get_gpu("h100-sxm4")
    assert "did you mean 'h100-sxm'" in str(info.value) and info.value.where == "hardware.gpu"
    with pytest.raises(CatalogError) as info:
        get_gpu("zzzzzzzz")
    for name in GPU_CATALOG:
        assert name in str(info.value)


def test_specs_are_immutable():
    with pytest.raises(ValueError):
        get_gpu("h100").memory_gb = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        ModelSpec.model_validate({**get_model("opt-13b").model_dump(), "extra_field": 1})


# ----------------------------------------------------------------------------- MoE

QWEN3_30B_A3B_CONFIG = {  # https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json (shape keys)
    "_name_or_path": "Qwen/Qwen3-30B-A3B", "model_type": "qwen3_moe", "num_hidden_layers": 48,
    "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
    "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": False,
}


@pytest.mark.parametrize("name", [n for n, m in sorted(MODEL_CATALOG.items()) if m.is_moe])
def test_moe_active_params_match_published(name):
    spec = MODEL_CATALOG[name]
    if spec.published_active_params_b is None:  # only a rounded name tag (GLM-4.7-Flash's "A3B")
        pytest.skip(f"{name}: no published activated count")
    # Publishers differ on whether the embedding and unembedding tables (and an idle vision
    # tower) count as "activated"; the shapes must match one of those conventions to 5%.
    table = spec.vocab_size * spec.hidden_size
    errors = [abs((spec.active_param_count - n * table - vision) / 1e9 / spec.published_active_params_b - 1)
              for n in (0, 1, 2) for vision in {0, spec.encoder_params}]
    assert min(errors) < 0.05, errors
    assert spec.active_param_count < spec.param_count / 3


def test_load_hf_config_qwen3_moe_matches_catalog(tmp_path):
    spec = load_hf_config(_write(tmp_path, QWEN3_30B_A3B_CONFIG))
    assert spec.is_moe and spec.qk_norm
    assert spec.param_count == get_model("qwen3-30b-a3b").param_count


def test_load_hf_config_mixtral_uses_intermediate_size_per_expert(tmp_path):
    cfg = {"_name_or_path": "mistralai/Mixtral-8x7B-v0.1", "model_type": "mixtral", "num_hidden_layers": 32,
           "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
           "max_position_embeddings": 32768}
    spec = load_hf_config(_write(tmp_path, cfg))
    assert spec.param_count == get_model("mixtral-8x7b").param_count


def test_load_hf_config_rejects_dense_layers_between_moe_layers(tmp_path):
    with pytest.raises(CatalogError, match="decoder_sparse_step"):
        load_hf_config(_write(tmp_path, {**QWEN3_30B_A3B_CONFIG, "mlp_only_layers": [0, 1]}))


def test_moe_spec_needs_consistent_expert_fields():
    with pytest.raises(ValueError, match="experts_per_token"):
        MODEL_CATALOG["qwen3-30b-a3b"].model_validate(
            {**MODEL_CATALOG["qwen3-30b-a3b"].model_dump(), "experts_per_token": 0})



@pytest.mark.parametrize("name, entry", [
    # aiconfigurator's model table leaves out what tells these entries apart.
    ("QWEN3_235B", "qwen3-235b-a22b"), ("QWEN3_480B", "qwen3-coder-480b-a35b"),
    ("MOE_Mixtral8x7B", "mixtral-8x7b"), ("MOE_Mixtral8x22B", "mixtral-8x22b"),
    # Mistral 7B's releases differ in vocabulary: v0.1/v0.2 32,000, v0.3 32,768.
    ("mistralai/Mistral-7B-v0.1", "mistral-7b-v0.1"), ("mistralai/Mistral-7B-Instruct-v0.1", "mistral-7b-v0.1"),
    ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b-v0.2"), ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
])
def test_names_benchmark_files_use_resolve(name, entry):
    model = get_model(name)
    assert model.name == entry
    if entry.startswith("mistral-7b"):
        assert model.vocab_size == (32768 if entry == "mistral-7b" else 32000)
        assert abs(model.param_count / 1e9 - model.published_params_b) / model.published_params_b < 0.01


@pytest.mark.parametrize(("gpu", "smi_mib"), [("b300", 275040), ("gb300", 284208)])
def test_blackwell_ultra_memory_is_what_nvidia_smi_reports(gpu, smi_mib):
    """aiconfigurator-core 0.12's system files record each board's nvidia-smi total; GB300's
    (284,208 MiB) is not B300's, which the catalog had borrowed (session-56 audit)."""
    from simulator.hardware import get_gpu

    assert get_gpu(gpu).usable_memory_gib == pytest.approx(smi_mib / 1024)

"""Models users benchmark that the first catalog lacked: Llama 3, the OPT family, small
Qwen2.5, Phi-3/4, Gemma 2 and 3, Mistral Large 2, Codestral, Yi, Llama 4 Scout, GLM-4.5,
DeepSeek-V2-Lite, Qwen3-VL, Granite 3.x, the Qwen coder models, and releases that reuse a
catalog model's shapes. Shapes are checked against published sizes in test_catalogs; here:
lookups, the loader reproducing each new family, and that each family runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.api import load
from simulator.errors import CatalogError
from simulator.memory import kv_bytes_per_token_per_gpu
from simulator.models import MODEL_CATALOG, get_model, load_hf_config
from simulator.simulation import Simulation

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"


@pytest.mark.parametrize(("name", "expected"), [
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
    ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b"),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),  # 3.1 still its own entry
    ("facebook/opt-66b", "opt-66b"),
    ("facebook/opt-6.7b", "opt-6.7b"),
    ("opt-175b", "opt-175b"),
    ("Qwen/Qwen2.5-0.5B-Instruct", "qwen2.5-0.5b"),
    ("Qwen/Qwen2.5-1.5B-Instruct", "qwen2.5-1.5b"),
    ("Qwen/Qwen2.5-3B-Instruct", "qwen2.5-3b"),
    ("microsoft/Phi-3-mini-4k-instruct", "phi-3-mini"),
    ("microsoft/Phi-3-mini-128k-instruct", "phi-3.5-mini"),
    ("microsoft/Phi-3.5-mini-instruct", "phi-3.5-mini"),
    ("microsoft/Phi-3-medium-4k-instruct", "phi-3-medium"),
    ("microsoft/phi-4", "phi-4"),
    ("google/gemma-2-9b-it", "gemma-2-9b"),
    ("google/gemma-2-27b-it", "gemma-2-27b"),
    ("mistralai/Mistral-Large-Instruct-2407", "mistral-large-2"),
    ("mistralai/Mistral-Large-Instruct-2411", "mistral-large-2"),
    ("mistralai/Codestral-22B-v0.1", "codestral-22b"),
    ("01-ai/Yi-34B-Chat", "yi-34b"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek-v2-lite"),
    ("Qwen/Qwen3-VL-8B-Instruct", "qwen3-vl-8b"),
    ("Qwen/Qwen3-VL-235B-A22B-Thinking", "qwen3-vl-235b-a22b"),
    ("Qwen/Qwen3-VL-30B-A3B-Instruct-FP8", "qwen3-vl-30b-a3b"),
    ("zai-org/GLM-4.5-Air-FP8", "glm-4.5-air"),
    ("zai-org/GLM-4.5", "glm-4.5"),
    ("zai-org/GLM-4.6-FP8", "glm-4.6"),
    ("google/gemma-3-27b-it", "gemma-3-27b"),
    ("google/gemma-3-1b-it", "gemma-3-1b"),
    # same shapes and context as a catalog entry
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "llama-3.1-70b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "llama-3.1-8b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "qwen2.5-32b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2.5-7b"),
    ("nvidia/Llama-3.1-Nemotron-70B-Instruct-HF", "llama-3.1-70b"),
    ("lmsys/vicuna-13b-v1.5", "llama-2-13b"),
    ("Qwen/Qwen2-72B-Instruct", "qwen2.5-72b"),
    ("Qwen/QwQ-32B", "qwen2.5-32b"),
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistral-small-24b"),
    ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral-small-24b"),
    ("ibm-granite/granite-3.3-8b-instruct", "granite-3.3-8b"),
    ("ibm-granite/granite-3.1-8b-base", "granite-3.3-8b"),
    ("Qwen/Qwen2.5-Coder-32B-Instruct", "qwen2.5-coder-32b"),
    ("Qwen/Qwen2.5-Coder-14B-Instruct-AWQ", "qwen2.5-coder-14b"),
    ("Qwen/Qwen2.5-Coder-7B-Instruct", "qwen2.5-coder-7b"),
    ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-1.5b"),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3-coder-30b-a3b"),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", "qwen3-coder-30b-a3b"),
    ("deepseek-ai/DeepSeek-V3.1-Terminus", "deepseek-v3"),
    ("deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct", "deepseek-v2-lite"),
    ("NousResearch/Hermes-3-Llama-3.1-8B", "llama-3.1-8b"),
    ("NousResearch/Hermes-3-Llama-3.1-70B", "llama-3.1-70b"),
    ("nvidia/Llama-3.1-Nemotron-Nano-8B-v1", "llama-3.1-8b"),
])
def test_new_names_resolve(name, expected):
    assert get_model(name).name == expected


def test_same_shape_releases_keep_the_base_entry_and_its_earlier_aliases():
    assert get_model("llama-3.3-70b").name == "llama-3.1-70b"
    assert get_model("meta-llama/Meta-Llama-3.1-8B").name == "llama-3.1-8b"
    # Llama 3 and 3.1 differ in context, so they are separate entries.
    assert get_model("llama-3-8b").max_position_embeddings == 8192
    assert get_model("llama-3.1-8b").max_position_embeddings == 131072


@pytest.mark.parametrize(("variant", "base", "context"), [
    ("qwen2.5-coder-7b", "qwen2.5-7b", 32768),
    ("qwen2.5-coder-14b", "qwen2.5-14b", 32768),
    ("qwen2.5-coder-32b", "qwen2.5-32b", 32768),
    ("qwen3-coder-30b-a3b", "qwen3-30b-a3b", 262144),
])
def test_coder_releases_are_their_base_shapes_at_their_own_context(variant, base, context):
    spec, shapes = get_model(variant), get_model(base)
    assert spec.max_position_embeddings == context != shapes.max_position_embeddings
    assert spec.param_count == shapes.param_count
    assert spec.active_param_count == shapes.active_param_count
    assert spec.kv_bytes_per_token(2) == shapes.kv_bytes_per_token(2)


def test_opt_family_scales_as_the_paper_lists():
    # Zhang et al. 2022, Table 1: heads x 128 = hidden from 6.7B up; ffn = 4 x hidden.
    for size in ("6.7b", "13b", "30b", "66b", "175b"):
        m = get_model(f"opt-{size}")
        assert m.head_dim == 128 and m.ffn_size == 4 * m.hidden_size and not m.gated_mlp
    assert get_model("opt-66b").num_layers == 64 and get_model("opt-175b").num_layers == 96


def test_qwen3_vl_is_its_qwen3_text_model_plus_an_idle_vision_tower():
    vl, text = get_model("qwen3-vl-8b"), get_model("qwen3-8b")
    for field in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "ffn_size"):
        assert getattr(vl, field) == getattr(text, field)
    assert 0.5e9 < vl.encoder_params < 0.65e9  # the model card's 8.77B less the 8.19B text model
    assert vl.param_count == text.param_count + vl.encoder_params
    assert vl.max_position_embeddings == 262144
    assert kv_bytes_per_token_per_gpu(vl, "bf16", 1, 1) == kv_bytes_per_token_per_gpu(text, "bf16", 1, 1)


def test_gemma_and_llama4_keep_a_window_of_kv_on_their_local_layers():
    gemma = get_model("gemma-2-9b")
    assert (gemma.sliding_layers, gemma.sliding_window, gemma.kv_layers) == (21, 4096, 21)
    gemma3 = get_model("gemma-3-27b")  # five local layers to each global one
    assert (gemma3.sliding_layers, gemma3.sliding_window, gemma3.kv_layers) == (52, 1024, 10)
    scout = get_model("llama-4-scout")
    assert (scout.sliding_layers, scout.sliding_window, scout.kv_layers) == (36, 8192, 12)
    assert scout.num_shared_experts == 1 and scout.experts_per_token == 1


# ------------------------------------------------------------------ the loader, per family
# Shape keys as published in each config.json (Llama 4 and Qwen3-VL: as carried by
# aiconfigurator-core 0.12, the vision config trimmed to the keys used).

PHI3_MINI = {"model_type": "phi3", "hidden_size": 3072, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 32064,
             "max_position_embeddings": 4096, "tie_word_embeddings": False}
GEMMA2_9B = {"model_type": "gemma2", "hidden_size": 3584, "num_hidden_layers": 42, "num_attention_heads": 16,
             "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336, "vocab_size": 256000,
             "max_position_embeddings": 8192, "sliding_window": 4096}
SCOUT = {"model_type": "llama4", "text_config": {
    "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 40,
    "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
    "attention_chunk_size": 8192, "vocab_size": 202048, "max_position_embeddings": 10485760}}
QWEN3_VL_8B = {"model_type": "qwen3_vl", "tie_word_embeddings": False,
               "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096, "num_hidden_layers": 36,
                               "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
                               "intermediate_size": 12288, "vocab_size": 151936,
                               "max_position_embeddings": 262144},
               "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
                                 "out_hidden_size": 4096, "deepstack_visual_indexes": [8, 16, 24]}}
DEEPSEEK_V2_LITE = {"model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27,
                    "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 10944,
                    "moe_intermediate_size": 1408, "n_routed_experts": 64, "num_experts_per_tok": 6,
                    "n_shared_experts": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
                    "kv_lora_rank": 512, "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                    "v_head_dim": 128, "vocab_size": 102400, "max_position_embeddings": 163840}

GLM_45_AIR = {"model_type": "glm4_moe", "hidden_size": 4096, "num_hidden_layers": 46, "num_attention_heads": 96,
              "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 10944, "moe_intermediate_size": 1408,
              "n_routed_experts": 128, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 1,
              "attention_bias": True, "use_qk_norm": False, "vocab_size": 151552,
              "max_position_embeddings": 131072, "tie_word_embeddings": False}
GEMMA3_27B = {"model_type": "gemma3", "vision_config": {"model_type": "siglip_vision_model"},
              "text_config": {"model_type": "gemma3_text", "hidden_size": 5376, "num_hidden_layers": 62,
                              "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                              "intermediate_size": 21504, "vocab_size": 262208,
                              "max_position_embeddings": 131072, "sliding_window": 1024,
                              "sliding_window_pattern": 6}}


# ibm-granite/granite-3.3-8b-instruct/config.json, shape keys and the multipliers verbatim.
GRANITE_33_8B = {"model_type": "granite", "hidden_size": 4096, "intermediate_size": 12800,
                 "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "vocab_size": 49159, "max_position_embeddings": 131072, "tie_word_embeddings": True,
                 "attention_bias": False, "mlp_bias": False, "attention_multiplier": 0.0078125,
                 "embedding_multiplier": 12.0, "logits_scaling": 16.0, "residual_multiplier": 0.22}


@pytest.mark.parametrize(("cfg", "catalog"), [
    (GRANITE_33_8B, "granite-3.3-8b"),
    (PHI3_MINI, "phi-3-mini"), (GEMMA2_9B, "gemma-2-9b"), (SCOUT, "llama-4-scout"),
    (QWEN3_VL_8B, "qwen3-vl-8b"), (DEEPSEEK_V2_LITE, "deepseek-v2-lite"), (GLM_45_AIR, "glm-4.5-air"),
    (GEMMA3_27B, "gemma-3-27b"),
])
def test_loader_reproduces_the_new_families(tmp_path, cfg, catalog):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec, want = load_hf_config(path, name=catalog), MODEL_CATALOG[catalog]
    fields = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "ffn_size", "vocab_size",
              "tied_embeddings", "num_experts", "experts_per_token", "moe_ffn_size", "num_shared_experts",
              "first_dense_layers", "kv_lora_rank", "q_lora_rank", "sliding_window", "sliding_layers",
              "encoder_params", "qkv_bias", "attention_bias", "qk_norm")
    assert {f: getattr(spec, f) for f in fields} == {f: getattr(want, f) for f in fields}
    assert spec.param_count == want.param_count


MAVERICK = {"model_type": "llama4", "text_config": {
    **SCOUT["text_config"], "num_local_experts": 128, "interleave_moe_layer_step": 2,
    "max_position_embeddings": 1048576}}


def _write(tmp_path: Path, cfg: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_loader_reads_llama4_maverick_interleaved_dense_layers(tmp_path):
    """Every other layer MoE: 24 dense layers of intermediate_size_mlp, 400B total, 17B active."""
    spec = load_hf_config(_write(tmp_path, MAVERICK), name="llama-4-maverick")
    want = MODEL_CATALOG["llama-4-maverick"]
    assert (spec.first_dense_layers, spec.moe_layers, spec.ffn_size) == (24, 24, 16384)
    assert spec.param_count == want.param_count
    assert spec.param_count / 1e9 == pytest.approx(400.0, rel=0.01)


def test_loader_refuses_a_bad_interleave_step_with_the_reason(tmp_path):
    bad = {**MAVERICK, "text_config": {**MAVERICK["text_config"], "interleave_moe_layer_step": 0}}
    with pytest.raises(CatalogError, match="interleave_moe_layer_step") as info:
        load_hf_config(_write(tmp_path, bad))
    assert info.value.fix


# ------------------------------------------------------------------ each family runs

@pytest.mark.parametrize(("model", "gpu", "tp", "extra"), [
    ("opt-66b", "a100-80gb-sxm", 4, ["model.weight_dtype=fp16", "model.activation_dtype=fp16",
                                      "model.kv_dtype=fp16"]),
    ("gemma-2-9b", "h100-sxm", 1, []),
    ("llama-4-scout", "h100-sxm", 4, ["model.max_model_len=32768"]),
    ("llama-4-maverick", "h200", 8, ["model.max_model_len=32768"]),
    ("qwen3-vl-8b", "h100-sxm", 1, []),
    ("deepseek-v2-lite", "h100-sxm", 1, []),
    ("glm-4.5-air", "h200", 2, []),
    ("gemma-3-27b", "h100-sxm", 1, []),
    ("phi-3-mini", "l4", 1, []),
    ("granite-3.3-8b", "l40s", 1, []),
    ("qwen3-coder-30b-a3b", "h100-sxm", 2, []),
])
def test_new_families_run_closed_loop_with_tokens_conserved_and_kv_freed(model, gpu, tp, extra):
    sim = Simulation(load(BENCH, [f"model.name={model}", f"hardware.gpu={gpu}", f"parallelism.tp={tp}",
                                  "workload.arrival.concurrency=8", "workload.num_requests=16",
                                  "workload.prompt_tokens.value=1024", "workload.output_tokens.value=32",
                                  "cost_model.backend=roofline", *extra]))
    result = sim.run()
    req = result.requests
    assert (req["status"] == "completed").all()
    assert int(req["output_tokens"].sum()) == 16 * 32
    assert 0 < result.summary["kv_cache"]["peak_utilization"] <= 1.0
    for engine in (e for rep in sim.replicas for e in rep.engines):
        assert engine.scheduler.kv.used == 0
    assert (req["ttft_ms"] > 0).all() and (req["tpot_ms"] > 0).all()

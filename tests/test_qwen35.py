"""Qwen3.5 / Qwen3.6 (Qwen3-Next's hybrid layers, dense and MoE, wrapped with a vision tower):
config loading, refusals, catalog sizes and a closed-loop run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_linear_attention import run_hybrid_closed_loop

from simulator.errors import CatalogError
from simulator.models import MODEL_CATALOG, get_model, load_hf_config
from simulator.models.catalog import qwen3_vl_encoder_params

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"


def _layer_types(layers: int) -> list[str]:
    return (["linear_attention"] * 3 + ["full_attention"]) * (layers // 4)


def _text(model_type: str, **shape) -> dict:
    """The shape keys every published Qwen3.5 text_config shares."""
    layers = shape["num_hidden_layers"]
    return {"model_type": model_type, "attention_bias": False, "attn_output_gate": True,
            "full_attention_interval": 4, "head_dim": 256, "layer_types": _layer_types(layers),
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
            "linear_value_head_dim": 128, "max_position_embeddings": 262144, "mtp_num_hidden_layers": 1,
            "vocab_size": 248320, "mamba_ssm_dtype": "float32", **shape}


def _moe_text(**shape) -> dict:
    width = shape.pop("moe_intermediate_size")
    return _text("qwen3_5_moe_text", mlp_only_layers=[], moe_intermediate_size=width,
                 shared_expert_intermediate_size=width, **shape)


def _wrapped(text: dict, out_hidden: int) -> dict:
    moe = text["model_type"] == "qwen3_5_moe_text"
    return {"architectures": ["Qwen3_5MoeForConditionalGeneration" if moe else "Qwen3_5ForConditionalGeneration"],
            "model_type": "qwen3_5_moe" if moe else "qwen3_5", "text_config": text, "tie_word_embeddings": False,
            "vision_config": {"deepstack_visual_indexes": [], "depth": 27, "hidden_size": 1152,
                              "intermediate_size": 4304, "num_heads": 16, "num_position_embeddings": 2304,
                              "out_hidden_size": out_hidden, "patch_size": 16, "spatial_merge_size": 2,
                              "temporal_patch_size": 2}}


# Shape keys of the published config.json files (sources in simulator/models/catalog.py).
CONFIGS = {
    "qwen3.5-35b-a3b": _wrapped(_moe_text(hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
                                          num_key_value_heads=2, linear_num_value_heads=32, num_experts=256,
                                          num_experts_per_tok=8, moe_intermediate_size=512), 2048),
    "qwen3.5-122b-a10b": _wrapped(_moe_text(hidden_size=3072, num_hidden_layers=48, num_attention_heads=32,
                                            num_key_value_heads=2, linear_num_value_heads=64, num_experts=256,
                                            num_experts_per_tok=8, moe_intermediate_size=1024), 3072),
    "qwen3.5-397b-a17b": _wrapped(_moe_text(hidden_size=4096, num_hidden_layers=60, num_attention_heads=32,
                                            num_key_value_heads=2, linear_num_value_heads=64, num_experts=512,
                                            num_experts_per_tok=10, moe_intermediate_size=1024), 4096),
    "qwen3.5-27b": _wrapped(_text("qwen3_5_text", hidden_size=5120, intermediate_size=17408, num_hidden_layers=64,
                                  num_attention_heads=24, num_key_value_heads=4, linear_num_value_heads=48), 5120),
}
CONFIGS["qwen3.6-35b-a3b"] = CONFIGS["qwen3.5-35b-a3b"]
CONFIGS["qwen3.6-27b"] = CONFIGS["qwen3.5-27b"]
KEEP = {"name", "hf_id", "aliases", "published_params_b", "published_active_params_b", "native_fp8"}


def _write(tmp_path: Path, cfg: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_wrapped_config_loads_into_the_catalog_entry(tmp_path, name):
    spec = load_hf_config(_write(tmp_path, CONFIGS[name]))
    assert spec.model_dump(exclude=KEEP) == MODEL_CATALOG[name].model_dump(exclude=KEEP)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_text_only_config_loads_the_language_model_without_the_tower(tmp_path, name):
    # A text-only checkpoint (Qwen3_5*ForCausalLM) carries the text tower's model_type at the top.
    cfg = {**CONFIGS[name]["text_config"], "tie_word_embeddings": False}
    spec = load_hf_config(_write(tmp_path, cfg))
    entry = MODEL_CATALOG[name]
    assert spec.encoder_params == 0
    assert spec.model_dump(exclude=KEEP | {"encoder_params"}) == entry.model_dump(exclude=KEEP | {"encoder_params"})
    # The interval alone, without layer_types, gives the same layers.
    del cfg["layer_types"]
    assert load_hf_config(_write(tmp_path, cfg)).linear_layers == entry.linear_layers == entry.num_layers * 3 // 4


def test_catalog_shapes_plus_the_mtp_layer_give_the_hub_tensor_counts():
    # The Hub's counts include the MTP layer (one full-attention layer, its MLP, a 2h x h fc,
    # four norms) that serving does not load; the catalog leaves it out.
    for name, hub_b in (("qwen3.5-27b", 27.78), ("qwen3.5-35b-a3b", 35.95), ("qwen3.6-35b-a3b", 35.95),
                        ("qwen3.5-122b-a10b", 125.0), ("qwen3.5-397b-a17b", 403.0)):
        m = MODEL_CATALOG[name]
        h = m.hidden_size
        mlp = ((m.num_experts + 1) * m._expert_params + h * (m.num_experts + 1) if m.is_moe
               else m._mlp_params(m.ffn_size))
        mtp = m._attention_params + mlp + 2 * h * h + 5 * h
        assert (m.param_count + mtp) / 1e9 == pytest.approx(hub_b, rel=0.002), name


def test_vision_tower_is_qwen3_vl_without_deepstack_mergers(tmp_path):
    m = MODEL_CATALOG["qwen3.5-35b-a3b"]
    assert m.encoder_params == qwen3_vl_encoder_params(27, 1152, 4304, 2048, deepstack=0)
    # A listed deepstack_visual_indexes adds no mergers: Qwen3.5's vision config drops the key.
    cfg = CONFIGS["qwen3.5-35b-a3b"]
    listed = {**cfg, "vision_config": {**cfg["vision_config"], "deepstack_visual_indexes": [8, 16, 24]}}
    assert load_hf_config(_write(tmp_path, listed)).encoder_params == m.encoder_params
    # A vision_config that does not give the tower's sizes is not counted.
    bare = {**cfg, "vision_config": {"model_type": "qwen3_5_moe"}}
    assert load_hf_config(_write(tmp_path, bare)).encoder_params == 0


def test_lookup_by_release_names():
    for hf_id, name in (("Qwen/Qwen3.5-35B-A3B", "qwen3.5-35b-a3b"), ("Qwen/Qwen3.5-35B-A3B-FP8", "qwen3.5-35b-a3b"),
                        ("Qwen/Qwen3.5-27B", "qwen3.5-27b"), ("Qwen/Qwen3.5-122B-A10B-FP8", "qwen3.5-122b-a10b"),
                        ("Qwen/Qwen3.5-397B-A17B", "qwen3.5-397b-a17b"), ("Qwen/Qwen3.6-35B-A3B", "qwen3.6-35b-a3b"),
                        ("Qwen/Qwen3.6-27B-FP8", "qwen3.6-27b")):
        assert get_model(hf_id).name == name


@pytest.mark.parametrize(("change", "field", "reason"), [
    (lambda t: t.update(shared_expert_intermediate_size=1024), "shared_expert_intermediate_size", "not modelled"),
    (lambda t: t.update(layer_types=["sliding_attention", *t["layer_types"][1:]]), "layer_types", "not modelled"),
    (lambda t: t.update(layer_types=t["layer_types"][:-4]), "layer_types", "num_hidden_layers is 40"),
    (lambda t: t.update(mlp_only_layers=[0]), "mlp_only_layers", "not modelled"),
    (lambda t: t.pop("linear_num_value_heads"), "linear_num_value_heads", "missing"),
])
def test_configs_the_spec_cannot_express_are_refused(tmp_path, change, field, reason):
    cfg = json.loads(json.dumps(CONFIGS["qwen3.5-35b-a3b"]))
    change(cfg["text_config"])
    with pytest.raises(CatalogError) as err:
        load_hf_config(_write(tmp_path, cfg))
    assert field in str(err.value) and reason in str(err.value)


def test_dense_qwen3_5_with_experts_is_refused(tmp_path):
    cfg = json.loads(json.dumps(CONFIGS["qwen3.5-27b"]))
    cfg["text_config"]["num_experts"] = 8
    with pytest.raises(CatalogError, match="num_experts=8, model_type 'qwen3_5'"):
        load_hf_config(_write(tmp_path, cfg))


def test_closed_loop_completes_conserves_tokens_and_frees_kv():
    sim, result = run_hybrid_closed_loop("Qwen/Qwen3.5-35B-A3B", 2)
    assert result.summary["kv_cache"]["state_blocks_per_sequence"] > 0
    for engine in (e for rep in sim.replicas for e in rep.engines):
        assert engine.scheduler.kv.used == 0
        assert engine.scheduler.kv.peak_used > 0


def test_the_delta_rule_state_is_float32_as_the_config_says_and_vllm_keeps_it(tmp_path):
    """Qwen3.5's config.json sets mamba_ssm_dtype float32, which vLLM copies into
    mamba_ssm_cache_dtype (Qwen3_5ForConditionalGenerationConfig); the conv state stays
    bf16. A config without the key (Qwen3-Next's) keeps the model dtype for both."""
    from simulator.memory import sequence_state_bytes_per_gpu

    spec = MODEL_CATALOG["qwen3.5-35b-a3b"]
    conv, delta = spec.linear_state_elements()
    assert spec.linear_ssm_bytes == 4.0
    assert sequence_state_bytes_per_gpu(spec, 2, 1) == 30 * (conv * 2 + delta * 4) / 2
    cfg = CONFIGS["qwen3.5-35b-a3b"]
    text = {k: v for k, v in cfg["text_config"].items() if k != "mamba_ssm_dtype"}
    assert load_hf_config(_write(tmp_path, {**cfg, "text_config": text})).linear_ssm_bytes == 2.0
    assert MODEL_CATALOG["qwen3-next-80b-a3b"].linear_ssm_bytes == 2.0
    bad = {**cfg, "text_config": {**text, "mamba_ssm_dtype": "int8"}}
    with pytest.raises(CatalogError, match="mamba_ssm_dtype 'int8'"):
        load_hf_config(_write(tmp_path, bad))

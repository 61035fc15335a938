"""A model outside the catalog, read from its Hugging Face config.json (`model.config_json`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simulator.errors import CatalogError, not_utf8
from simulator.models import hf_classic
from simulator.models.catalog import GEMMA3_VISION_PARAMS, qwen3_vl_encoder_params
from simulator.models.catalog_extra import KIMI_K3_VISION_PARAMS, STEP37_VISION_PARAMS
from simulator.models.config_keys import decoder_fields as _decoder_fields
from simulator.models.config_keys import optional as _optional
from simulator.models.config_keys import require as _require
from simulator.models.spec import ModelSpec, with_moe_routing

# Hugging Face config.json loader
# phi3 fuses qkv and gate/up into single tensors of the same total shape; gemma/gemma2
# default to tied embeddings and name their head_dim. granite (3.x) is llama with scalar
# multipliers on the embeddings, residuals, attention and logits, which cost nothing.
_GEMMA = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text"})
# mimo (MiMo-7B) is Qwen2 plus multi-token-prediction layers that plain serving never runs.
# internlm2: Llama's shapes under its own key names for nothing the cost model reads.
_LLAMA_STYLE = frozenset({"llama", "mistral", "qwen2", "qwen3", "phi3", "granite", "qwen3_5", "mimo",
                          "internlm2"}) | _GEMMA
# llama-style attention, a routed MLP (llama4: plus a shared expert; glm4_moe: shared
# experts and dense-first layers, as DeepSeek)
# qwen3_next, qwen3_5_moe: Gated DeltaNet layers between gated attention ones, a shared expert
_MOE_STYLE = frozenset({"mixtral", "qwen3_moe", "gpt_oss", "llama4", "glm4_moe", "qwen3_next", "qwen3_5_moe"})
# Hybrid linear attention (Qwen3-Next; Qwen3.5/3.6 dense qwen3_5 and MoE qwen3_5_moe)
_HYBRID = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_moe"})
# latent attention, shared experts, dense-first layers (deepseek_v32 and GLM-5's glm_moe_dsa:
# plus the sparse-attention indexer, index_n_heads / index_head_dim / index_topk)
_DSA = frozenset({"deepseek_v32", "glm_moe_dsa"})
_MLA_STYLE = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2"}) | _DSA
# Multimodal wrappers: the language model's config sits under text_config with its own
# model_type, which maps to the family above.
_TEXT_TOWERS = {"qwen3_vl_text": "qwen3", "qwen3_vl_moe_text": "qwen3_moe", "llama4_text": "llama4",
                "gemma3_text": "gemma3", "gemma4_text": "gemma4", "step3p5": "step3p5", "kimi_linear": "kimi_linear", "qwen3_5_text": "qwen3_5", "qwen3_5_moe_text": "qwen3_5_moe",
                **{t: t for t in _MLA_STYLE}}
# Text-only Qwen3.5 checkpoints (Qwen3_5*ForCausalLM) carry the text tower's model_type at the top.
_QWEN3_5_TEXT = {"qwen3_5_text": "qwen3_5", "qwen3_5_moe_text": "qwen3_5_moe"}
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
# MXFP4 experts (gpt-oss, Kimi-K3, DeepSeek-V4): 4-bit values and an 8-bit (E8M0) scale per 32.
_MXFP4_BITS = 4.25
# Gemma 4: sliding layers and full-attention layers of their own geometry (K = V on the latter);
# the 26B-A4B adds routed experts beside each layer's dense MLP.
_GEMMA4 = "gemma4"
# MiMo-V2-Flash: sliding-window and full-attention layers with their own KV heads, V narrower
# than Q and K, a dense first layer, then routed experts.
_MIMO_V2 = "mimo_v2_flash"
# Step-3.5-Flash (and Step-3.7-Flash's text tower): sliding-window layers with more query heads
# than the full-attention ones (attention_other_setting), a per-head output gate, dense first
# layers, then routed experts and one shared expert.
_STEP3P5 = "step3p5"
# MiniMax-M3: GQA whose sparse layers attend to the blocks an indexer selects, dense first layers
# of their own width, then routed experts and a shared one.
_MINIMAX_M3 = "minimax_m3"
# Kimi-K3's text tower (kimi_linear): Kimi Delta Attention layers between gated MLA ones, latent MoE.
_KIMI_LINEAR = "kimi_linear"
# DeepSeek-V4: windowed multi-query attention plus compressed KV per layer, hyper-connections.
_DEEPSEEK_V4 = "deepseek_v4"
# Nemotron-H (Nemotron-H, Nemotron 3 Nano): Mamba2, attention, MLP and MoE blocks as separate layers
_NEMOTRON_H = "nemotron_h"
# Llama-Nemotron's NAS-pruned Llama (DeciLM): per-layer block_configs
_NEMOTRON_NAS = "nemotron-nas"
# Its layer letters (hybrid_override_pattern) and names (layers_block_type, newer configs).
_NEMOTRON_BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def load_hf_config(path: str | Path, name: str | None = None) -> ModelSpec:
    """Build a ModelSpec from a Hugging Face config.json (or a directory holding one).

    Supports llama/mistral/qwen2/qwen3/phi3/granite/gemma 1-3-style dense models, OPT,
    Mixtral/Qwen3-MoE/gpt-oss/Llama-4 Scout and Maverick/GLM-4.5 mixture-of-experts models, the
    Qwen3-Next and Qwen3.5/3.6 hybrid (Gated DeltaNet) dense and MoE models, the Nemotron-H and
    Nemotron 3 hybrid (Mamba2) dense and MoE models, Llama-Nemotron's NAS-pruned Llama
    (nemotron-nas), DeepSeek-V2/V3/V3.2
    and Kimi-K2 (MLA) models, GLM-5/5.2 (sparse attention, shared indexers), MiMo-7B and
    MiMo-V2-Flash, Step-3.5-Flash (and Step-3.7-Flash's text tower), MiniMax-M3 (block-sparse
    attention), Kimi-K3 (Kimi Delta Attention beside gated MLA, latent MoE), DeepSeek-V4
    (windowed and compressed attention), and the
    Qwen3-VL, Qwen3.5, Gemma 3 and Gemma 4 text towers: the families whose config keys fully
    determine the shapes above.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    where = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogError(
            "model config file not found",
            where=where,
            fix="pass the path of a Hugging Face config.json "
            "(e.g. `huggingface-cli download <repo> config.json`)",
        ) from None
    except UnicodeDecodeError as exc:
        raise CatalogError(not_utf8(exc), where=where,
                           fix="pass the model's Hugging Face config.json, a JSON text file") from None
    except OSError as exc:
        raise CatalogError(f"cannot read model config: {exc}", where=where) from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            where=where,
            fix="re-download config.json from the model's Hugging Face repository",
        ) from None
    if not isinstance(cfg, dict):
        raise CatalogError(
            "config.json must be a JSON object", where=where, fix="use a HF config.json"
        )

    model_type = cfg.get("model_type", "llama")
    encoder_params = 0
    text = cfg.get("text_config")
    if isinstance(text, dict) and text.get("model_type") in _TEXT_TOWERS:
        # Multimodal wrappers (Kimi-K2.5, Qwen3-VL, Qwen3.5, Llama 4): the language model's shapes;
        # the Qwen3-VL and Qwen3.5 vision towers are counted as loaded-but-idle weights.
        if model_type.startswith("qwen3_vl"):
            encoder_params = _qwen3_vl_vision(cfg.get("vision_config"), _require(text, "hidden_size", where))
        elif model_type in ("qwen3_5", "qwen3_5_moe"):
            # Qwen3.5's tower is Qwen3-VL's without the deepstack mergers (transformers deletes
            # deepstack_visual_indexes from its vision config).
            encoder_params = _qwen3_vl_vision(cfg.get("vision_config"), _require(text, "hidden_size", where),
                                              deepstack=False)
        elif model_type == "gemma3" and isinstance(cfg.get("vision_config"), dict):
            encoder_params = GEMMA3_VISION_PARAMS
        elif model_type == "step3p7":
            encoder_params = STEP37_VISION_PARAMS
        elif model_type == "kimi_k3":
            encoder_params = KIMI_K3_VISION_PARAMS
        cfg = {"tie_word_embeddings": cfg.get("tie_word_embeddings"), **text}
        model_type = _TEXT_TOWERS[text["model_type"]]
    model_type = _QWEN3_5_TEXT.get(model_type, model_type)
    if model_type == "step3p7":  # a flattened Step-3.7-Flash config (aiconfigurator's): the text keys at the top
        model_type, encoder_params = _STEP3P5, STEP37_VISION_PARAMS
    if model_type == "deepseek_ref" and "DeepseekV4ForCausalLM" in (cfg.get("architectures") or []):
        model_type = _DEEPSEEK_V4  # SGLang's FP8 re-releases name V4's config so
    moe = [k for k in _MOE_KEYS if cfg.get(k)]
    if moe and model_type not in _MOE_FAMILIES:
        raise CatalogError(
            f"mixture-of-experts config ({moe[0]}={cfg[moe[0]]}, model_type {model_type!r}) is not supported",
            where=where,
            fix=f"supported MoE families: {', '.join(sorted(_MOE_FAMILIES))}",
        )
    try:
        fields = _architecture_fields(cfg, where, model_type)
    except (ZeroDivisionError, TypeError) as exc:
        # A zero count divides (layers per sliding-window pattern, heads into the width) or
        # a quoted number meets arithmetic before ModelSpec would name the field.
        raise CatalogError(f"a layer or head count in config.json is zero or not a number ({exc})",
                           where=where, fix="check the counts against the model's published config.json") from None

    name_or_path = cfg.get("_name_or_path")
    hf_id = name_or_path if isinstance(name_or_path, str) and name_or_path.count("/") == 1 else None
    if name is None:
        if isinstance(name_or_path, str) and name_or_path:
            name = name_or_path.rstrip("/").rsplit("/", 1)[-1].lower()
        else:
            name = (p.parent.name or p.stem).lower()
    quant = cfg.get("quantization_config")
    if isinstance(quant, dict) and quant.get("quant_method") == "fp8" and quant.get("weight_block_size"):
        fields.setdefault("native_fp8", True)
        fields.setdefault("released_in_fp8", True)  # the config is the checkpoint's own
    if encoder_params:
        fields["encoder_params"] = encoder_params
    try:
        return ModelSpec(name=name, hf_id=hf_id, **with_moe_routing(fields, model_type))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "config"
        raise CatalogError(
            f"invalid model config ({loc}: {first['msg']})",
            where=where,
            fix="check the value in config.json against the model's published config",
        ) from None


def _architecture_fields(cfg: dict[str, Any], where: str, model_type: str) -> dict[str, Any]:
    """ModelSpec fields of one supported architecture family."""
    own = _FAMILY_FIELDS.get(model_type)
    if own:
        return own(cfg, where)
    if model_type in _LLAMA_STYLE or model_type in _MOE_STYLE:
        fields = _llama_fields(cfg, where, model_type)
        if model_type in _MOE_STYLE:
            fields.update(_moe_fields(cfg, where, model_type))
        if model_type in _HYBRID:
            fields.update(_hybrid_fields(cfg, where, moe=model_type in _MOE_STYLE))
    elif model_type in _MLA_STYLE:
        fields = _mla_fields(cfg, where)
        if model_type in _DSA:
            fields.update(index_n_heads=_require(cfg, "index_n_heads", where),
                          index_head_dim=_require(cfg, "index_head_dim", where),
                          index_topk=_require(cfg, "index_topk", where),
                          indexer_layers=_shared_indexer_layers(cfg, where, fields["num_layers"]))
    else:
        raise CatalogError(
            f"unsupported model_type {model_type!r}",
            where=where,
            fix=f"supported: {', '.join(sorted(_LLAMA_STYLE | _MOE_STYLE | _MLA_STYLE | {*_FAMILY_FIELDS, *_QWEN3_5_TEXT}))}; "
            "for other architectures construct a ModelSpec directly",
        )
    return fields


def _nemotron_blocks(cfg: dict[str, Any], where: str) -> list[str]:
    """Nemotron-H's layers in order, as block names: layers_block_type where the config lists
    it, else hybrid_override_pattern's letters (M Mamba2, * attention, - MLP, E MoE)."""
    blocks = cfg.get("layers_block_type")
    if isinstance(blocks, list) and blocks:
        unknown = sorted({b for b in blocks if b not in _NEMOTRON_BLOCKS.values()}, key=str)
        if unknown:
            raise CatalogError(f"layers_block_type {unknown} are not modelled (only mamba, attention, mlp, moe)",
                               where=where, fix="use the layers_block_type of the model's published config.json")
        return blocks
    pattern = _require(cfg, "hybrid_override_pattern", where)
    unknown = sorted({c for c in str(pattern) if c not in _NEMOTRON_BLOCKS})
    if unknown:
        raise CatalogError(f"hybrid_override_pattern letters {unknown} are not modelled (only M, *, -, E)",
                           where=where, fix="use the hybrid_override_pattern of the model's published config.json")
    return [_NEMOTRON_BLOCKS[c] for c in str(pattern)]


def _nemotron_h_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Nemotron-H and Nemotron 3: Mamba2 and GQA attention mixers, each a layer of its own,
    and squared-ReLU MLP (Nemotron-H) or MoE (Nemotron 3: routed experts plus a shared expert
    of a whole number of expert widths; Super and Ultra run the routed experts on a
    moe_latent_size projection) layers between them. The mixers are the spec's
    layers; those not followed by an MLP are its ffn_free_layers. The MTP layer is not
    counted (serving without speculative decoding never runs it)."""
    blocks = _nemotron_blocks(cfg, where)
    mixers = blocks.count("mamba") + blocks.count("attention")
    ffns = blocks.count("mlp") + blocks.count("moe")
    if blocks.count("mlp") and blocks.count("moe"):
        raise CatalogError("a Nemotron-H config with both MLP and MoE layers is not modelled", where=where,
                           fix="use a config whose FFN layers are all MLP or all MoE")
    if not blocks.count("attention") or not ffns or ffns > mixers:
        raise CatalogError(
            f"{blocks.count('attention')} attention and {ffns} MLP layers for {mixers} mixers are not modelled "
            "(at least one of each, and no more MLPs than mixers)", where=where,
            fix="use the layer pattern of the model's published config.json")
    common = _decoder_fields(cfg, where)
    heads, hidden = common["num_heads"], common["hidden_size"]
    fields = {
        **common,
        "num_layers": mixers,
        "ffn_free_layers": mixers - ffns,
        "num_kv_heads": _optional(cfg, "num_key_value_heads", heads),
        "head_dim": cfg.get("head_dim") or cfg.get("attention_head_dim") or (hidden // heads if heads else 0),
        "ffn_size": _require(cfg, "intermediate_size", where),
        "gated_mlp": False,  # relu2: up and down only
        "linear_kind": "mamba2",
        "linear_layers": blocks.count("mamba"),
        "linear_num_key_heads": _require(cfg, "n_groups", where),
        "linear_key_head_dim": _require(cfg, "ssm_state_size", where),
        "linear_num_value_heads": _require(cfg, "mamba_num_heads", where),
        "linear_value_head_dim": _require(cfg, "mamba_head_dim", where),
        "linear_conv_kernel": _optional(cfg, "conv_kernel", 4),
        **_ssm_fields(cfg, where, "mamba_ssm_cache_dtype"),
    }
    if blocks.count("moe"):
        width = _require(cfg, "moe_intermediate_size", where)
        shared = _optional(cfg, "moe_shared_expert_intermediate_size", 0)
        if not (isinstance(shared, int) and isinstance(width, int) and width > 0 and shared % width == 0):
            raise CatalogError(
                f"a shared expert of width {shared} (moe_shared_expert_intermediate_size), not a whole number of "
                f"expert widths ({width}), is not modelled", where=where,
                fix="use the model's published config.json")
        fields.update(num_experts=_require(cfg, "n_routed_experts", where),
                      experts_per_token=_require(cfg, "num_experts_per_tok", where),
                      moe_ffn_size=width, num_shared_experts=shared // width,
                      moe_latent_size=_optional(cfg, "moe_latent_size", 0))
    return fields


def _gemma4_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Gemma 4's text tower: sliding-window layers (head_dim, num_key_value_heads) and
    full-attention layers of global_head_dim, whose KV heads are num_global_key_value_heads
    when attention_k_eq_v (V from the K projection, no v_proj); per-head q/k norms, GeGLU,
    tied embeddings. With enable_moe_block every layer also routes to experts beside its dense
    MLP, which enters as shared experts of the expert width. Per-layer embeddings and KV
    shared across layers (the E2B/E4B models) are not modelled."""
    if _optional(cfg, "hidden_size_per_layer_input", 0) or _optional(cfg, "num_kv_shared_layers", 0):
        raise CatalogError("per-layer embeddings (hidden_size_per_layer_input) and KV shared across layers "
                           "(num_kv_shared_layers), as in Gemma 4 E2B/E4B, are not modelled", where=where,
                           fix="use a Gemma 4 config without them (26B-A4B, 31B)")
    types = _require(cfg, "layer_types", where)
    layers = _require(cfg, "num_hidden_layers", where)
    if not isinstance(types, list) or len(types) != layers or not set(types) <= {"sliding_attention", "full_attention"}:
        raise CatalogError(f"layer_types must name sliding_attention or full_attention for each of the {layers} "
                           "layers", where=where, fix="use the layer_types of the model's published config.json")
    k_eq_v = bool(_optional(cfg, "attention_k_eq_v", False))
    fields = {
        **_decoder_fields(cfg, where),
        "tied_embeddings": _optional(cfg, "tie_word_embeddings", True),
        "num_layers": layers,
        "num_kv_heads": _require(cfg, "num_key_value_heads", where),
        "head_dim": _require(cfg, "head_dim", where),
        "ffn_size": _require(cfg, "intermediate_size", where),
        "gated_mlp": True,
        "qk_norm": True,
        "sliding_window": _require(cfg, "sliding_window", where),
        "sliding_layers": types.count("sliding_attention"),
        "global_head_dim": _optional(cfg, "global_head_dim", 0),
        "global_num_kv_heads": _optional(cfg, "num_global_key_value_heads", 0) if k_eq_v else 0,
        "global_k_eq_v": k_eq_v,
    }
    if _optional(cfg, "enable_moe_block", False):
        width, dense = _require(cfg, "moe_intermediate_size", where), fields["ffn_size"]
        if not (isinstance(width, int) and width > 0 and isinstance(dense, int) and dense % width == 0):
            raise CatalogError(f"a dense MLP of {dense} beside experts of {width} (intermediate_size, "
                               "moe_intermediate_size) is modelled only as a whole number of expert widths",
                               where=where, fix="use the model's published config.json")
        fields.update(num_experts=_require(cfg, "num_experts", where),
                      experts_per_token=_require(cfg, "top_k_experts", where),
                      moe_ffn_size=width, num_shared_experts=dense // width)
    return fields


def _binary_pattern(cfg: dict[str, Any], key: str, layers: int, where: str) -> list[int]:
    """A per-layer list of 0s and 1s (MiMo-V2-Flash's hybrid_layer_pattern, moe_layer_freq)."""
    pattern = _require(cfg, key, where)
    if not isinstance(pattern, list) or len(pattern) != layers or not set(pattern) <= {0, 1}:
        raise CatalogError(f"{key} must list 0 or 1 for each of the {layers} layers", where=where,
                           fix=f"use the {key} of the model's published config.json")
    return pattern


def _leading_dense(moe: list[int], key: str, where: str) -> int:
    """How many dense layers come before the MoE ones in a per-layer 0/1 MoE pattern; dense
    layers after the first MoE layer are refused."""
    dense = moe.index(1) if 1 in moe else len(moe)
    if 0 in moe[dense:]:
        raise CatalogError(f"dense layers after the first MoE layer ({key}) are not modelled", where=where,
                           fix="use a config whose dense layers all come first")
    return dense


def _mimo_v2_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """MiMo-V2-Flash: hybrid_layer_pattern marks each layer sliding-window (1) or full
    attention (0), each kind with its own heads (swa_* keys for the windowed layers); queries
    and keys are head_dim wide, values v_head_dim (the same on both kinds). moe_layer_freq's
    leading 0s are dense layers of intermediate_size, the rest routed experts with no shared
    one. The attention sinks (a bias per head) cost nothing; the MTP layers, which plain
    serving never runs, are not counted."""
    layers = _require(cfg, "num_hidden_layers", where)
    kinds = _binary_pattern(cfg, "hybrid_layer_pattern", layers, where)
    dense = _leading_dense(_binary_pattern(cfg, "moe_layer_freq", layers, where), "moe_layer_freq", where)
    v_dim = _require(cfg, "v_head_dim", where)
    if _optional(cfg, "swa_v_head_dim", v_dim) != v_dim:
        raise CatalogError("value widths that differ between the sliding-window and full-attention layers "
                           "(swa_v_head_dim, v_head_dim) are not modelled", where=where,
                           fix="use the model's published config.json")
    head_dim = _require(cfg, "head_dim", where)
    return {
        **_decoder_fields(cfg, where),
        "num_layers": layers,
        "num_heads": _optional(cfg, "swa_num_attention_heads", _require(cfg, "num_attention_heads", where)),
        "num_kv_heads": _require(cfg, "swa_num_key_value_heads", where),
        "head_dim": _optional(cfg, "swa_head_dim", head_dim),
        "v_head_dim": v_dim,
        "global_num_heads": _require(cfg, "num_attention_heads", where),
        "global_num_kv_heads": _require(cfg, "num_key_value_heads", where),
        "global_head_dim": head_dim,
        "sliding_window": _require(cfg, "sliding_window", where),
        "sliding_layers": sum(kinds),
        "ffn_size": _require(cfg, "intermediate_size", where),
        "gated_mlp": True,
        "num_experts": _require(cfg, "n_routed_experts", where),
        "experts_per_token": _require(cfg, "num_experts_per_tok", where),
        "moe_ffn_size": _require(cfg, "moe_intermediate_size", where),
        "num_shared_experts": _optional(cfg, "n_shared_experts", 0),
        "first_dense_layers": dense,
    }


def _step3p5_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Step-3.5-Flash: layer_types names each layer (the list runs on over the MTP layers,
    which plain serving never runs and are not counted); layers of
    attention_other_setting's type take its query heads, KV heads (num_attention_groups) and
    head_dim, the others the top-level ones. use_head_wise_attn_gate adds a per-head sigmoid
    gate; per-head q/k norms. MoE on the layers moe_layers_enum lists (all but the first by
    default), dense intermediate_size before them; share_expert_dim is the shared expert."""
    layers = _require(cfg, "num_hidden_layers", where)
    types = _require(cfg, "layer_types", where)
    if not isinstance(types, list) or len(types) < layers or not set(types[:layers]) <= {
            "sliding_attention", "full_attention"}:
        raise CatalogError(f"layer_types must name sliding_attention or full_attention for each of the {layers} "
                           "layers", where=where, fix="use the layer_types of the model's published config.json")
    types = types[:layers]
    full = {"num_heads": _require(cfg, "num_attention_heads", where),
            "num_kv_heads": _optional(cfg, "num_attention_groups", cfg.get("num_key_value_heads")),
            "head_dim": _require(cfg, "head_dim", where)}
    if full["num_kv_heads"] is None:
        _require(cfg, "num_attention_groups", where)
    other = cfg.get("attention_other_setting") or {}
    if other and other.get("attention_type") != "sliding_attention":
        raise CatalogError(f"attention_other_setting for {other.get('attention_type')!r} layers is not modelled "
                           "(only sliding_attention)", where=where, fix="use the model's published config.json")
    sliding = {"num_heads": other.get("num_attention_heads", full["num_heads"]),
               "num_kv_heads": other.get("num_attention_groups", full["num_kv_heads"]),
               "head_dim": other.get("head_dim", full["head_dim"])}
    enum = cfg.get("moe_layers_enum")
    moe_layers = ([int(i) for i in str(enum).strip().split(",")] if enum is not None
                  else list(range(_optional(cfg, "first_k_dense_replace", 1), layers)))
    dense = _leading_dense([int(i in moe_layers) for i in range(layers)], "moe_layers_enum", where)
    width = _optional(cfg, "moe_intermediate_size", 0)
    shared = _optional(cfg, "share_expert_dim", 0)
    if not (isinstance(width, int) and width > 0 and isinstance(shared, int) and shared % width == 0):
        raise CatalogError(f"a shared expert of width {shared} (share_expert_dim), not a whole number of expert "
                           f"widths ({width}), is not modelled", where=where, fix="use the model's published config.json")
    fields = {
        **_decoder_fields(cfg, where),
        **sliding,
        "num_layers": layers,
        "ffn_size": _require(cfg, "intermediate_size", where),
        "gated_mlp": True,
        "qk_norm": True,
        "attn_head_gate": bool(_optional(cfg, "use_head_wise_attn_gate", False)),
        "num_experts": _optional(cfg, "moe_num_experts", cfg.get("num_experts")),
        "experts_per_token": _optional(cfg, "moe_top_k", cfg.get("num_experts_per_tok")),
        "moe_ffn_size": width,
        "num_shared_experts": shared // width,
        "first_dense_layers": dense,
    }
    if "sliding_attention" in types:
        fields.update(sliding_window=_require(cfg, "sliding_window", where),
                      sliding_layers=types.count("sliding_attention"))
        if sliding != full:
            fields.update(global_num_heads=full["num_heads"], global_num_kv_heads=full["num_kv_heads"],
                          global_head_dim=full["head_dim"])
    elif sliding != full:
        fields.update(full)
    if fields["num_experts"] is None or fields["experts_per_token"] is None:
        _require(cfg, "moe_num_experts", where)
        _require(cfg, "moe_top_k", where)
    return fields


def _minimax_m3_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """MiniMax-M3: GQA with per-head q/k norms; moe_layer_freq's leading 0s are dense layers of
    dense_intermediate_size, the rest routed experts of moe_intermediate_size plus
    n_shared_experts of the same width. sparse_attention_config marks the sparse layers
    (sparse_attention_freq): an indexer of sparse_num_index_heads x sparse_index_dim scores
    the tokens and attention reads the sparse_topk_blocks best blocks of sparse_block_size
    (the forced local and initial blocks are among them). Indexers that also project values
    (sparse_disable_index_value 0) and an attention output gate are not modelled; the MTP
    modules, which plain serving never runs, are not counted."""
    layers = _require(cfg, "num_hidden_layers", where)
    dense = _leading_dense(_binary_pattern(cfg, "moe_layer_freq", layers, where), "moe_layer_freq", where)
    if _optional(cfg, "attention_output_gate", False):
        raise CatalogError("an attention output gate (attention_output_gate) is not modelled for minimax_m3",
                           where=where, fix="use the model's published config.json")
    width = _require(cfg, "moe_intermediate_size", where)
    fields = {
        **_decoder_fields(cfg, where),
        "num_layers": layers,
        "num_kv_heads": _require(cfg, "num_key_value_heads", where),
        "head_dim": _require(cfg, "head_dim", where),
        "ffn_size": _optional(cfg, "dense_intermediate_size", width),
        "gated_mlp": True,
        "qk_norm": bool(_optional(cfg, "use_qk_norm", False)) and _optional(cfg, "qk_norm_type", "per_head") == "per_head",
        "qk_norm_spans_heads": bool(_optional(cfg, "use_qk_norm", False)) and cfg.get("qk_norm_type") not in (None, "per_head"),
        "num_experts": _require(cfg, "num_local_experts", where),
        "experts_per_token": _require(cfg, "num_experts_per_tok", where),
        "moe_ffn_size": width,
        "num_shared_experts": _optional(cfg, "n_shared_experts", 0),
        "first_dense_layers": dense,
    }
    sparse = cfg.get("sparse_attention_config")
    if isinstance(sparse, dict) and sparse.get("use_sparse_attention"):
        where_sparse = f"{where} (sparse_attention_config)"
        kinds = _binary_pattern(sparse, "sparse_attention_freq", layers, where_sparse)
        plain = _optional(sparse, "sparse_disable_index_value", [1] * layers)
        if not isinstance(plain, list) or len(plain) != layers or any(
                k and not v for k, v in zip(kinds, plain, strict=True)):
            raise CatalogError("indexers that also project values (sparse_disable_index_value 0 on a sparse layer) "
                               "are not modelled", where=where_sparse, fix="use the model's published config.json")
        block = _require(sparse, "sparse_block_size", where_sparse)
        fields.update(index_n_heads=_require(sparse, "sparse_num_index_heads", where_sparse),
                      index_head_dim=_require(sparse, "sparse_index_dim", where_sparse),
                      index_topk=_require(sparse, "sparse_topk_blocks", where_sparse) * block,
                      sparse_block_size=block, indexer_layers=sum(kinds))
    return fields


def _kimi_linear_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Kimi-K3's text tower: linear_attn_config lists its Kimi Delta Attention layers
    (kda_layers, 1-based) and their heads; the rest are MLA, with a sigmoid output gate when
    mla_use_output_gate. Layers before first_k_dense_replace keep a dense MLP; the others route
    to experts computed on a routed_expert_hidden_size latent, beside shared experts on the
    hidden state. The KDA state is fp32 (vLLM's). Routed experts quantised alone to MXFP4
    (compressed-tensors with attention, shared experts and dense MLPs ignored) enter as native
    FP4 experts. A low-rank KDA output gate (Kimi-Linear's) is not modelled; neither are the
    attention residuals' few weights and element-wise mixing."""
    lin = _require(cfg, "linear_attn_config", where)
    where_lin = f"{where} (linear_attn_config)"
    if not isinstance(lin, dict):
        raise CatalogError("linear_attn_config must be an object", where=where,
                           fix="use the model's published config.json")
    if not _optional(lin, "use_full_rank_gate", False):
        raise CatalogError("a low-rank KDA output gate (use_full_rank_gate false, as in Kimi-Linear) is not "
                           "modelled", where=where_lin, fix="use a Kimi-K3 config (use_full_rank_gate true)")
    layers = _require(cfg, "num_hidden_layers", where)
    kda = _require(lin, "kda_layers", where_lin)
    if not isinstance(kda, list) or not set(kda) <= set(range(1, layers + 1)) or len(set(kda)) != len(kda):
        raise CatalogError(f"kda_layers must list distinct 1-based layer numbers up to {layers}", where=where_lin,
                           fix="use the kda_layers of the model's published config.json")
    heads, dim = _require(lin, "num_heads", where_lin), _require(lin, "head_dim", where_lin)
    if _optional(cfg, "moe_layer_freq", 1) != 1:
        raise CatalogError("MoE layers interleaved with dense ones (moe_layer_freq != 1) are not modelled",
                           where=where, fix="use a config with moe_layer_freq 1")
    hidden = _require(cfg, "hidden_size", where)
    latent = _optional(cfg, "routed_expert_hidden_size", hidden)
    quant = _optional(cfg, "quantization_config", {})
    mxfp4 = isinstance(quant, dict) and quant.get("format") == "mxfp4-pack-quantized"
    return {
        **_decoder_fields(cfg, where),
        "num_layers": layers,
        "num_kv_heads": _require(cfg, "num_attention_heads", where),
        "head_dim": _require(cfg, "qk_nope_head_dim", where),
        "kv_lora_rank": _require(cfg, "kv_lora_rank", where),
        "q_lora_rank": _optional(cfg, "q_lora_rank", 0),
        "qk_rope_head_dim": _require(cfg, "qk_rope_head_dim", where),
        "v_head_dim": _require(cfg, "v_head_dim", where),
        "attn_output_gate": bool(_optional(cfg, "mla_use_output_gate", False)),
        "ffn_size": _require(cfg, "intermediate_size", where),
        "gated_mlp": True,
        "num_experts": _require(cfg, "num_experts", where),
        "experts_per_token": _require(cfg, "num_experts_per_token", where),
        "moe_ffn_size": _require(cfg, "moe_intermediate_size", where),
        "num_shared_experts": _optional(cfg, "num_shared_experts", 0),
        "first_dense_layers": _optional(cfg, "first_k_dense_replace", 0),
        "moe_latent_size": latent if latent != hidden else 0,
        "linear_kind": "kda",
        "linear_layers": len(kda),
        "linear_num_key_heads": heads,
        "linear_num_value_heads": heads,
        "linear_key_head_dim": dim,
        "linear_value_head_dim": dim,
        "linear_conv_kernel": _optional(lin, "short_conv_kernel_size", 4),
        "linear_ssm_bytes": 4.0,
        "native_expert_dtype": "fp4" if mxfp4 else None,
        "native_expert_bits": _MXFP4_BITS if mxfp4 else None,
    }


def _deepseek_v4_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """DeepSeek-V4: compress_ratios gives each layer's compression (0 window only, 4 the
    indexer's top-k of a 4:1 compressed KV, 128 all of a 128:1 one; its extra last entry is
    the MTP layer's, which plain serving never runs and is not counted); one KV head of
    head_dim, a q_lora_rank query, grouped output projection (o_groups, o_lora_rank),
    hc_mult residual streams. Every layer is MoE (the first num_hash_layers route by token id,
    at the same cost). expert_dtype fp4: the release's routed experts are MXFP4."""
    layers = _require(cfg, "num_hidden_layers", where)
    ratios = _require(cfg, "compress_ratios", where)
    if not isinstance(ratios, list) or len(ratios) < layers or not set(ratios[:layers]) <= {0, 4, 128}:
        raise CatalogError(f"compress_ratios must give 0, 4 or 128 for each of the {layers} layers", where=where,
                           fix="use the compress_ratios of the model's published config.json")
    ratios = ratios[:layers]
    if _optional(cfg, "num_key_value_heads", 1) != 1:
        raise CatalogError("DeepSeek-V4 attention with more than one KV head is not modelled", where=where,
                           fix="use the model's published config.json (num_key_value_heads 1)")
    fp4 = _optional(cfg, "expert_dtype", None) == "fp4"
    # NVIDIA's NVFP4 re-release: an FP8 scale per 16 values (4.5 bits); DeepSeek's MXFP4 one per 32.
    groups = (cfg.get("quantization_config") or {}).get("config_groups") or {}
    nvfp4 = any(((g or {}).get("weights") or {}).get("group_size") == 16 for g in groups.values())
    return {
        **_decoder_fields(cfg, where),
        "num_layers": layers,
        "num_kv_heads": 1,
        "head_dim": _require(cfg, "head_dim", where),
        "q_lora_rank": _require(cfg, "q_lora_rank", where),
        "qk_rope_head_dim": _require(cfg, "qk_rope_head_dim", where),
        "ffn_size": _require(cfg, "moe_intermediate_size", where),
        "gated_mlp": True,
        "num_experts": _require(cfg, "n_routed_experts", where),
        "experts_per_token": _require(cfg, "num_experts_per_tok", where),
        "moe_ffn_size": _require(cfg, "moe_intermediate_size", where),
        "num_shared_experts": _optional(cfg, "n_shared_experts", 0),
        "compressed": {
            "window": _require(cfg, "sliding_window", where), "csa_layers": ratios.count(4),
            "hca_layers": ratios.count(128), "topk": _require(cfg, "index_topk", where),
            "index_heads": _require(cfg, "index_n_heads", where), "index_dim": _require(cfg, "index_head_dim", where),
            "o_lora_rank": _require(cfg, "o_lora_rank", where), "o_groups": _require(cfg, "o_groups", where),
            "hc_mult": _optional(cfg, "hc_mult", 1)},
        "native_expert_dtype": "fp4" if fp4 else None,
        "native_expert_bits": (4.5 if nvfp4 else _MXFP4_BITS) if fp4 else None,
    }


def _nas_ffn_width(ffn_mult: Any, hidden: int) -> int:
    """A NAS block's MLP width: 2/3 of ffn_mult x hidden, rounded up to a multiple of 256
    (DeciLM's rule, as Llama's 8/3 x hidden SwiGLU width)."""
    width = int(2 * ffn_mult * hidden / 3)
    return -(-width // 256) * 256


def _nemotron_nas_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Llama-Nemotron's NAS-pruned Llama (Llama-3.3-Nemotron-Super-49B): Llama 3 layers whose
    block_configs drop some layers' attention (no_op) and give each MLP its own width. The
    attention that remains must be one GQA grouping (n_heads_in_group); the MLP widths enter
    as their mean. Attention or MLPs replaced by a single linear layer are not modelled."""
    blocks = _require(cfg, "block_configs", where)
    common = _decoder_fields(cfg, where)
    hidden, heads = common["hidden_size"], common["num_heads"]
    if not isinstance(blocks, list) or not blocks or not all(isinstance(b, dict) for b in blocks):
        raise CatalogError("block_configs must list one block per layer", where=where,
                           fix="use the block_configs of the model's published config.json")
    attention = [b.get("attention") or {} for b in blocks]
    ffn = [b.get("ffn") or {} for b in blocks]
    if any(a.get("replace_with_linear") or f.get("replace_with_linear") or f.get("no_op")
           for a, f in zip(attention, ffn, strict=True)):
        raise CatalogError("NAS blocks that replace attention or the MLP with one linear layer, or drop an MLP, "
                           "are not modelled", where=where,
                           fix="use a config whose blocks keep every MLP and keep or drop (no_op) attention")
    groups = {a.get("n_heads_in_group") for a in attention if not a.get("no_op")}
    if len(groups) != 1 or not isinstance(next(iter(groups)), int):
        raise CatalogError(f"attention groupings {sorted(groups, key=str)} (n_heads_in_group): only one GQA "
                           "grouping across the attention layers is modelled", where=where,
                           fix="use the model's published config.json")
    widths = [_nas_ffn_width(f.get("ffn_mult", 0), hidden) for f in ffn]
    return {
        **common,
        "num_layers": len(blocks),
        "mixer_free_layers": sum(1 for a in attention if a.get("no_op")),
        "num_kv_heads": heads // next(iter(groups)),
        "head_dim": _optional(cfg, "head_dim", hidden // heads if heads else 0),
        "ffn_size": round(sum(widths) / len(widths)),
        "gated_mlp": True,
    }


# mamba_ssm_dtype values a config may give, as bytes per element of the delta-rule state.
_SSM_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}


def _ssm_fields(cfg: dict[str, Any], where: str, key: str = "mamba_ssm_dtype") -> dict[str, float]:
    """The recurrent state's element size when the config names one (Qwen3.5's
    mamba_ssm_dtype, Nemotron 3's mamba_ssm_cache_dtype: float32), which vLLM adopts when
    --mamba-ssm-cache-dtype is left at auto; without it ModelSpec's default, the model
    dtype, stands."""
    value = cfg.get(key)
    if value is None:
        return {}
    if value not in _SSM_DTYPE_BYTES:
        raise CatalogError(f"{key} {value!r} is not one of {', '.join(_SSM_DTYPE_BYTES)}",
                           where=where, fix="use the value of the model's published config.json")
    return {"linear_ssm_bytes": _SSM_DTYPE_BYTES[value]}


def _llama_fields(cfg: dict[str, Any], where: str, model_type: str) -> dict[str, Any]:
    hidden = _require(cfg, "hidden_size", where)
    heads = _require(cfg, "num_attention_heads", where)
    # A non-positive count is left to ModelSpec's own check, which names the field.
    head_dim_default = hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 else 0
    return {
        "num_layers": _require(cfg, "num_hidden_layers", where),
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": _optional(cfg, "num_key_value_heads", heads),
        "head_dim": _optional(cfg, "head_dim", head_dim_default),
        # Qwen3.5 MoE configs have no dense width (every layer is MoE): the expert width stands in.
        "ffn_size": (_optional(cfg, "intermediate_size", cfg.get("moe_intermediate_size"))
                     if model_type == "qwen3_5_moe" else _require(cfg, "intermediate_size", where)),
        "gated_mlp": True,
        "vocab_size": _require(cfg, "vocab_size", where),
        "tied_embeddings": _optional(cfg, "tie_word_embeddings", model_type in _GEMMA),
        "max_position_embeddings": _require(cfg, "max_position_embeddings", where),
        # GLM-4.5's attention_bias puts biases on q, k and v only; MiMo's is Qwen2's q/k/v bias.
        "attention_bias": _optional(cfg, "attention_bias", False) and model_type not in ("glm4_moe", "mimo"),
        "mlp_bias": _optional(cfg, "mlp_bias", False),
        # Qwen2 (and MiMo, built on it) hard-codes q/k/v biases
        "qkv_bias": model_type in ("qwen2", "mimo") or (model_type == "glm4_moe" and _optional(cfg, "attention_bias", False)),
        "qk_norm": model_type in ("qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_moe", "gemma3", "gemma3_text")
        or (model_type == "glm4_moe" and _optional(cfg, "use_qk_norm", False)),
        "norm": "rmsnorm",
        **_gemma_sliding(cfg, model_type),
    }


def _gemma_sliding(cfg: dict[str, Any], model_type: str) -> dict[str, Any]:
    """Gemma 2 alternates sliding-window (even) and global (odd) layers; Gemma 3 runs
    five sliding layers to each global one (layer_types lists them in newer configs)."""
    window = _optional(cfg, "sliding_window", 0) if model_type in _GEMMA - {"gemma"} else 0
    if not window:
        return {}
    layers = _optional(cfg, "num_hidden_layers", 0)
    types = _optional(cfg, "layer_types", [])
    if types:
        sliding = sum(t == "sliding_attention" for t in types)
    elif model_type == "gemma2":
        sliding = (layers + 1) // 2
    else:
        sliding = layers - layers // _optional(cfg, "sliding_window_pattern", 6)
    return {"sliding_window": window, "sliding_layers": sliding}


def _qwen3_vl_vision(vision: Any, text_hidden: Any, deepstack: bool = True) -> int:
    """Qwen3-VL's (or Qwen3.5's, deepstack=False) vision-tower parameters from its vision_config:
    0, so not counted, when it is absent or lacks depth, hidden_size or intermediate_size."""
    if not isinstance(vision, dict) or not isinstance(text_hidden, int):
        return 0
    try:
        return qwen3_vl_encoder_params(int(vision["depth"]), int(vision["hidden_size"]),
                                        int(vision["intermediate_size"]),
                                        int(vision.get("out_hidden_size", text_hidden)),
                                        len(vision.get("deepstack_visual_indexes", [])) if deepstack else 0)
    except (KeyError, TypeError, ValueError):
        return 0


def _moe_fields(cfg: dict[str, Any], where: str, model_type: str) -> dict[str, Any]:
    if model_type == "glm4_moe":
        return {"num_experts": _require(cfg, "n_routed_experts", where),
                "experts_per_token": _require(cfg, "num_experts_per_tok", where),
                "moe_ffn_size": _require(cfg, "moe_intermediate_size", where),
                "num_shared_experts": _optional(cfg, "n_shared_experts", 0),
                "first_dense_layers": _optional(cfg, "first_k_dense_replace", 0)}
    if model_type in ("qwen3_moe", "qwen3_next", "qwen3_5_moe"):
        if _optional(cfg, "decoder_sparse_step", 1) != 1 or _optional(cfg, "mlp_only_layers", []):
            raise CatalogError(
                "dense layers between the MoE layers (decoder_sparse_step / mlp_only_layers) are not modelled",
                where=where, fix="use a config whose every layer is MoE (decoder_sparse_step 1, no mlp_only_layers)")
        experts, width = _require(cfg, "num_experts", where), _require(cfg, "moe_intermediate_size", where)
    else:  # mixtral, gpt_oss, llama4: every expert has intermediate_size
        experts, width = _require(cfg, "num_local_experts", where), _require(cfg, "intermediate_size", where)
    fields = {"num_experts": experts, "experts_per_token": _require(cfg, "num_experts_per_tok", where),
              "moe_ffn_size": width}
    if model_type == "llama4":
        fields.update(_llama4_fields(cfg, where))
    if model_type == "gpt_oss":
        # Biases on q/k/v/o and on every expert; alternate layers use a sliding window; the
        # published checkpoints store only the experts in MXFP4.
        sliding = sum(t == "sliding_attention" for t in _optional(cfg, "layer_types", []))
        quant = _optional(cfg, "quantization_config", {})
        mxfp4 = isinstance(quant, dict) and quant.get("quant_method") == "mxfp4"
        fields.update(attention_bias=True, mlp_bias=True, sliding_layers=sliding,
                      sliding_window=_optional(cfg, "sliding_window", 0) if sliding else 0,
                      native_expert_dtype="fp4" if mxfp4 else None,
                      native_expert_bits=_MXFP4_BITS if mxfp4 else None)
    return fields


def _hybrid_fields(cfg: dict[str, Any], where: str, moe: bool) -> dict[str, Any]:
    """Qwen3-Next / Qwen3.5 / Qwen3.6: Gated DeltaNet layers with one gated full-attention layer
    every full_attention_interval (layer_types lists them where present). The MoE models add a
    sigmoid-gated shared expert of shared_expert_intermediate_size, which must equal the routed
    experts' width (the one width the spec gives every expert). The MTP layer
    (mtp_num_hidden_layers) is not counted: serving without speculative decoding never runs it."""
    layers = _require(cfg, "num_hidden_layers", where)
    types = _optional(cfg, "layer_types", [])
    if types:
        unknown = sorted({t for t in types if t not in ("linear_attention", "full_attention")}, key=str)
        if unknown:
            raise CatalogError(
                f"layer_types {unknown} are not modelled (only linear_attention and full_attention)",
                where=where, fix="use the layer_types of the model's published config.json")
        if len(types) != layers:
            raise CatalogError(f"layer_types lists {len(types)} layers, num_hidden_layers is {layers}",
                               where=where, fix="use the model's published config.json")
        linear = types.count("linear_attention")
    else:
        interval = _optional(cfg, "full_attention_interval", 4)
        if not isinstance(interval, int) or not isinstance(layers, int) or interval < 1:
            raise CatalogError(f"full_attention_interval must be a positive integer, got {interval!r}",
                               where=where, fix="use the value of the model's published config.json")
        linear = layers - layers // interval
    fields = {"linear_layers": linear,
              "linear_num_key_heads": _require(cfg, "linear_num_key_heads", where),
              "linear_num_value_heads": _require(cfg, "linear_num_value_heads", where),
              "linear_key_head_dim": _require(cfg, "linear_key_head_dim", where),
              "linear_value_head_dim": _require(cfg, "linear_value_head_dim", where),
              "linear_conv_kernel": _optional(cfg, "linear_conv_kernel_dim", 4),
              "attn_output_gate": _optional(cfg, "attn_output_gate", True), **_ssm_fields(cfg, where)}
    if not moe:
        return fields
    shared = _optional(cfg, "shared_expert_intermediate_size", 0)
    if shared and shared != cfg.get("moe_intermediate_size"):
        raise CatalogError(
            f"a shared expert of width {shared} (shared_expert_intermediate_size), unlike the routed experts' "
            f"{cfg.get('moe_intermediate_size')} (moe_intermediate_size), is not modelled", where=where,
            fix="use a config whose shared_expert_intermediate_size equals moe_intermediate_size")
    return {**fields, "num_shared_experts": 1 if shared else 0, "shared_expert_gate": bool(shared)}


def _llama4_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Llama 4: a shared expert beside the routed ones; chunked local attention on the
    layers that use RoPE (no_rope_layers marks them 1), every fourth layer global. With
    interleave_moe_layer_step s (Maverick: 2) every s-th layer is MoE and the others keep a
    dense intermediate_size_mlp MLP; where they sit changes no cost, so they are counted as
    first_dense_layers."""
    step = _optional(cfg, "interleave_moe_layer_step", 1)
    layers = _require(cfg, "num_hidden_layers", where)
    if not isinstance(step, int) or not 1 <= step <= layers:
        raise CatalogError(f"interleave_moe_layer_step must be an integer from 1 to {layers}, got {step!r}",
                           where=where, fix="use the value of the model's published config.json")
    chunk = _optional(cfg, "attention_chunk_size", 0)
    rope_flags = _optional(cfg, "no_rope_layers", [])
    local = sum(1 for f in rope_flags if f) if rope_flags else layers - layers // 4
    return {"num_shared_experts": 1, "ffn_size": _optional(cfg, "intermediate_size_mlp", cfg["intermediate_size"]),
            "first_dense_layers": layers - layers // step,
            "sliding_window": chunk if chunk else 0, "sliding_layers": local if chunk else 0}


def _mla_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """DeepSeek-V3-style: MLA attention, shared experts, the first layers dense."""
    if _optional(cfg, "moe_layer_freq", 1) != 1:
        raise CatalogError("MoE layers interleaved with dense ones (moe_layer_freq != 1) are not modelled",
                           where=where, fix="use a config with moe_layer_freq 1")
    heads = _require(cfg, "num_attention_heads", where)
    quant = _optional(cfg, "quantization_config", {})
    # Kimi-K2-Thinking/K2.5 ship INT4 routed experts (compressed-tensors, attention ignored).
    experts_only = isinstance(quant, dict) and quant.get("quant_method") == "compressed-tensors"
    return {
        "num_layers": _require(cfg, "num_hidden_layers", where),
        "hidden_size": _require(cfg, "hidden_size", where),
        "num_heads": heads,
        "num_kv_heads": heads,
        "head_dim": _require(cfg, "qk_nope_head_dim", where),
        "ffn_size": _require(cfg, "intermediate_size", where),
        "gated_mlp": True,
        "vocab_size": _require(cfg, "vocab_size", where),
        "tied_embeddings": _optional(cfg, "tie_word_embeddings", False),
        "max_position_embeddings": _require(cfg, "max_position_embeddings", where),
        "num_experts": _require(cfg, "n_routed_experts", where),
        "experts_per_token": _require(cfg, "num_experts_per_tok", where),
        "moe_ffn_size": _require(cfg, "moe_intermediate_size", where),
        "num_shared_experts": _optional(cfg, "n_shared_experts", 0),
        "first_dense_layers": _optional(cfg, "first_k_dense_replace", 0),
        "kv_lora_rank": _require(cfg, "kv_lora_rank", where),
        "q_lora_rank": _optional(cfg, "q_lora_rank", 0),
        "qk_rope_head_dim": _require(cfg, "qk_rope_head_dim", where),
        "v_head_dim": _require(cfg, "v_head_dim", where),
        "native_expert_dtype": "int4" if experts_only else None,
    }


def _shared_indexer_layers(cfg: dict[str, Any], where: str, layers: int) -> int:
    """ModelSpec.indexer_layers: how many layers run their own lightning indexer, 0 when all
    of them do. GLM-5.2's IndexShare marks the rest "shared" in indexer_types (or "S" in
    index_topk_pattern); without either list, vLLM's schedule skips layer i unless
    max(i - index_skip_topk_offset + 1, 0) is a multiple of index_topk_freq (offset 2 and
    frequency 1 by default: every layer indexes)."""
    types = cfg.get("indexer_types")
    if isinstance(types, list) and types:
        unknown = sorted({str(t) for t in types} - {"full", "shared"})
        if unknown or len(types) != layers:
            raise CatalogError(
                f"indexer_types must name 'full' or 'shared' for each of the {layers} layers "
                f"(got {len(types)} entries{', and ' + ', '.join(unknown) if unknown else ''})",
                where=where, fix="use the indexer_types of the model's published config.json")
        indexed = types.count("full")
    elif isinstance(pattern := cfg.get("index_topk_pattern"), str) and pattern:
        indexed = sum(1 for c in pattern[:layers] if c != "S")
    else:
        freq, offset = _optional(cfg, "index_topk_freq", 1), _optional(cfg, "index_skip_topk_offset", 2)
        if not isinstance(freq, int) or not isinstance(offset, int) or freq < 1:
            raise CatalogError(f"index_topk_freq {freq!r} must be a positive whole number", where=where,
                               fix="use the index_topk_freq of the model's published config.json")
        indexed = sum(1 for i in range(layers) if max(i - offset + 1, 0) % freq == 0)
    if not indexed:
        raise CatalogError("no layer runs an indexer of its own, so no layer has a top-k to share",
                           where=where, fix="use the indexer schedule of the model's published config.json")
    return 0 if indexed >= layers else indexed


def _opt_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    hidden = _require(cfg, "hidden_size", where)
    heads = _require(cfg, "num_attention_heads", where)
    proj = _optional(cfg, "word_embed_proj_dim", hidden)
    if proj != hidden:
        raise CatalogError(
            f"word_embed_proj_dim={proj} differs from hidden_size={hidden} "
            "(embedding projections, as in OPT-350m, are not modelled)",
            where=where,
            fix="use an OPT size whose word_embed_proj_dim equals hidden_size",
        )
    # enable_bias covers attention and fc1/fc2 alike. do_layer_norm_before only moves the
    # norms (post-LN exists only in OPT-350m, rejected above), so it is not read.
    bias = _optional(cfg, "enable_bias", True)
    return {
        "num_layers": _require(cfg, "num_hidden_layers", where),
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": heads,
        "head_dim": hidden // heads if isinstance(hidden, int) and isinstance(heads, int) else 0,
        "ffn_size": _require(cfg, "ffn_dim", where),
        "gated_mlp": False,
        "vocab_size": _require(cfg, "vocab_size", where),
        "tied_embeddings": _optional(cfg, "tie_word_embeddings", True),
        "max_position_embeddings": _require(cfg, "max_position_embeddings", where),
        "attention_bias": bias,
        "mlp_bias": bias,
        "norm": "layernorm",
        "learned_pos_embeddings": True,
    }


# Families with a reader of their own (the rest share the llama, MoE and MLA readers above);
# adding one is an entry here.
_FAMILY_FIELDS = {
    "opt": _opt_fields, _NEMOTRON_H: _nemotron_h_fields, _NEMOTRON_NAS: _nemotron_nas_fields,
    _GEMMA4: _gemma4_fields, _MIMO_V2: _mimo_v2_fields, _STEP3P5: _step3p5_fields,
    _MINIMAX_M3: _minimax_m3_fields, _KIMI_LINEAR: _kimi_linear_fields, _DEEPSEEK_V4: _deepseek_v4_fields,
    **hf_classic.DENSE_FAMILIES, **hf_classic.MOE_FAMILIES,
}
# Families whose configs may route to experts (OPT, the NAS-pruned Llama and the classic
# dense decoders are dense).
_MOE_FAMILIES = _MOE_STYLE | _MLA_STYLE | (frozenset(_FAMILY_FIELDS) - {"opt", _NEMOTRON_NAS}
                                           - frozenset(hf_classic.DENSE_FAMILIES))

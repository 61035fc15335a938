"""Config readers for the decoder families before Llama's conventions settled, and a few
later ones that name their keys their own way: Falcon, BLOOM, GPT-J, MPT, StarCoder
(gpt_bigcode), StarCoder2, Phi-2, Nemotron-4/Minitron, Cohere's Command R/R+/A, DBRX,
Qwen1.5-MoE, DeepSeekMoE and Phi-3.5-MoE.

Each maps its config.json onto ModelSpec's fields. What the cost model cannot tell apart is
not read: attention and MLP computed in parallel off one norm (Falcon, GPT-J, Phi-2,
Cohere) cost what they cost in sequence, and ALiBi or partial rotary embeddings cost no more
than full rotary ones. Key names follow the transformers configuration classes of each
family (configuration_falcon.py, configuration_bloom.py, ...), including the older aliases
the original checkpoints still carry.
"""

from __future__ import annotations

from typing import Any

from simulator.errors import CatalogError
from simulator.models.config_keys import decoder_fields, first_of, optional, require


def _per_head(hidden: Any, heads: Any) -> int:
    return hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 else 0


def _fc_mlp(hidden: Any, width: Any) -> Any:
    """A plain fc-in/fc-out MLP's width: given, or the classic 4 x hidden."""
    return width if width is not None else (4 * hidden if isinstance(hidden, int) else hidden)


def _gpt_style(*, layers: Any, hidden: Any, heads: Any, kv_heads: Any, ffn: Any, vocab: Any, tied: bool,
               context: Any, attention_bias: bool, mlp_bias: bool, **extra: Any) -> dict[str, Any]:
    """The fields of a GPT-2-lineage decoder: LayerNorm and a two-matrix GELU MLP."""
    return {"num_layers": layers, "hidden_size": hidden, "num_heads": heads, "num_kv_heads": kv_heads,
            "head_dim": _per_head(hidden, heads), "ffn_size": ffn, "gated_mlp": False, "vocab_size": vocab,
            "tied_embeddings": tied, "max_position_embeddings": context, "attention_bias": attention_bias,
            "mlp_bias": mlp_bias, "norm": "layernorm", **extra}


def falcon_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Falcon: multi-query attention (7B) or grouped KV heads (new_decoder_architecture:
    40B, 180B); a GELU MLP; LayerNorm; the LM head tied to the embeddings."""
    hidden = first_of(cfg, ("hidden_size", "n_embed"), where)
    heads = first_of(cfg, ("num_attention_heads", "n_head"), where)
    if optional(cfg, "new_decoder_architecture", False):
        kv = first_of(cfg, ("num_kv_heads", "n_head_kv"), where)
    else:
        kv = 1 if optional(cfg, "multi_query", True) else heads
    bias = optional(cfg, "bias", False)
    return _gpt_style(layers=first_of(cfg, ("num_hidden_layers", "n_layer"), where), hidden=hidden, heads=heads,
                      kv_heads=kv, ffn=_fc_mlp(hidden, cfg.get("ffn_hidden_size")),
                      vocab=require(cfg, "vocab_size", where), tied=optional(cfg, "tie_word_embeddings", True),
                      context=optional(cfg, "max_position_embeddings", 2048), attention_bias=bias, mlp_bias=bias)


def bloom_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """BLOOM: multi-head attention with ALiBi (no position table: its training length,
    seq_length, stands for the context), a 4 x hidden GELU MLP, biases, LayerNorm, tied head."""
    hidden = first_of(cfg, ("hidden_size", "n_embed"), where)
    heads = first_of(cfg, ("n_head", "num_attention_heads"), where)
    return _gpt_style(layers=first_of(cfg, ("n_layer", "num_hidden_layers"), where), hidden=hidden, heads=heads,
                      kv_heads=heads, ffn=_fc_mlp(hidden, None), vocab=require(cfg, "vocab_size", where),
                      tied=optional(cfg, "tie_word_embeddings", True), context=optional(cfg, "seq_length", 2048),
                      attention_bias=True, mlp_bias=True)


def gptj_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """GPT-J: multi-head attention without biases, a GELU MLP with them, LayerNorm, an
    untied LM head."""
    hidden = require(cfg, "n_embd", where)
    heads = require(cfg, "n_head", where)
    return _gpt_style(layers=require(cfg, "n_layer", where), hidden=hidden, heads=heads, kv_heads=heads,
                      ffn=_fc_mlp(hidden, cfg.get("n_inner")), vocab=require(cfg, "vocab_size", where),
                      tied=optional(cfg, "tie_word_embeddings", False), context=optional(cfg, "n_positions", 2048),
                      attention_bias=False, mlp_bias=True)


def mpt_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """MPT: ALiBi attention (grouped KV heads where attn_config names kv_n_heads), an
    expansion_ratio x d_model GELU MLP, no biases (no_bias), LayerNorm, the embedding
    matrix as LM head."""
    hidden = require(cfg, "d_model", where)
    heads = require(cfg, "n_heads", where)
    attn = optional(cfg, "attn_config", {})
    ratio = optional(cfg, "expansion_ratio", 4)
    bias = not optional(cfg, "no_bias", True)
    return _gpt_style(layers=require(cfg, "n_layers", where), hidden=hidden, heads=heads,
                      kv_heads=optional(attn, "kv_n_heads", heads) if isinstance(attn, dict) else heads,
                      ffn=int(ratio * hidden) if isinstance(hidden, int) and isinstance(ratio, int | float) else ratio,
                      vocab=require(cfg, "vocab_size", where), tied=True,
                      context=optional(cfg, "max_seq_len", 2048), attention_bias=bias, mlp_bias=bias)


def gpt_bigcode_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """StarCoder / SantaCoder (gpt_bigcode): GPT-2 with multi-query attention; learned
    positions, biases, LayerNorm, a GELU MLP, tied head."""
    hidden = require(cfg, "n_embd", where)
    heads = require(cfg, "n_head", where)
    return _gpt_style(layers=require(cfg, "n_layer", where), hidden=hidden, heads=heads,
                      kv_heads=1 if optional(cfg, "multi_query", True) else heads,
                      ffn=_fc_mlp(hidden, cfg.get("n_inner")), vocab=require(cfg, "vocab_size", where),
                      tied=optional(cfg, "tie_word_embeddings", True), context=require(cfg, "n_positions", where),
                      attention_bias=True, mlp_bias=True, learned_pos_embeddings=True)


def _plain_decoder(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """The transformers-standard keys (hidden_size, num_hidden_layers, ...)."""
    fields = decoder_fields(cfg, where)
    return {**fields, "num_layers": require(cfg, "num_hidden_layers", where),
            "num_kv_heads": optional(cfg, "num_key_value_heads", fields["num_heads"]),
            "head_dim": optional(cfg, "head_dim", _per_head(fields["hidden_size"], fields["num_heads"])),
            "ffn_size": require(cfg, "intermediate_size", where)}


def starcoder2_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """StarCoder2: grouped KV heads, a GELU MLP, biases (use_bias), LayerNorm, tied head. Its
    sliding window covers every layer; like Mistral 7B v0.1's it is not entered (the memory
    plan needs a layer that keeps the whole context), so prompts past it cost full attention."""
    bias = optional(cfg, "use_bias", True)
    return {**_plain_decoder(cfg, where), "gated_mlp": False,
            "tied_embeddings": optional(cfg, "tie_word_embeddings", True),
            "attention_bias": bias, "mlp_bias": bias, "norm": "layernorm"}


def phi_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Phi-1.5 / Phi-2: multi-head attention and a GELU MLP in parallel off one LayerNorm,
    biases throughout, an untied head."""
    return {**_plain_decoder(cfg, where), "gated_mlp": False,
            "tied_embeddings": optional(cfg, "tie_word_embeddings", False),
            "attention_bias": True, "mlp_bias": True, "norm": "layernorm"}


def nemotron_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Nemotron-4 and Minitron (model_type nemotron): a squared-ReLU MLP of two matrices,
    LayerNorm (1p), partial rotary embeddings, an untied head; the head width is kv_channels
    where head_dim is absent."""
    fields = {**_plain_decoder(cfg, where), "gated_mlp": False,
              "tied_embeddings": optional(cfg, "tie_word_embeddings", False), "norm": "layernorm"}
    if cfg.get("head_dim") is None and cfg.get("kv_channels") is not None:
        fields["head_dim"] = cfg["kv_channels"]
    return fields


def cohere_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Command R / R+ (cohere) and Command A / R7B (cohere2): a SwiGLU MLP in parallel with
    attention off one LayerNorm, a tied head, a per-head norm on q and k where use_qk_norm
    (R+). cohere2 windows three layers in four (sliding_window_pattern)."""
    fields = {**_plain_decoder(cfg, where), "gated_mlp": True,
              "tied_embeddings": optional(cfg, "tie_word_embeddings", True),
              "attention_bias": optional(cfg, "attention_bias", False), "norm": "layernorm",
              "qk_norm": optional(cfg, "use_qk_norm", False)}
    window = optional(cfg, "sliding_window", 0)
    if cfg.get("model_type") == "cohere2" and window:
        pattern = require(cfg, "sliding_window_pattern", where)
        layers = fields["num_layers"]
        if not isinstance(pattern, int) or not isinstance(layers, int) or pattern < 1:
            raise CatalogError(f"sliding_window_pattern must be a positive integer, got {pattern!r}",
                               where=where, fix="use the value of the model's published config.json")
        fields.update(sliding_window=window, sliding_layers=layers - layers // pattern)
    return fields


def dbrx_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """DBRX: grouped KV heads (attn_config.kv_n_heads), every layer a mixture of GLU experts
    (ffn_config: moe_num_experts, moe_top_k, ffn_hidden_size), LayerNorm, an untied head."""
    hidden = require(cfg, "d_model", where)
    heads = require(cfg, "n_heads", where)
    attn, ffn = optional(cfg, "attn_config", {}), require(cfg, "ffn_config", where)
    if not isinstance(attn, dict) or not isinstance(ffn, dict):
        raise CatalogError("attn_config and ffn_config must be objects", where=where,
                           fix="use the model's published config.json")
    width = require(ffn, "ffn_hidden_size", where)
    return {
        "num_layers": require(cfg, "n_layers", where),
        "hidden_size": hidden, "num_heads": heads, "num_kv_heads": optional(attn, "kv_n_heads", heads),
        "head_dim": _per_head(hidden, heads), "ffn_size": width, "gated_mlp": True,
        "vocab_size": require(cfg, "vocab_size", where), "tied_embeddings": optional(cfg, "tie_word_embeddings", False),
        "max_position_embeddings": require(cfg, "max_seq_len", where), "norm": "layernorm",
        "num_experts": require(ffn, "moe_num_experts", where), "experts_per_token": require(ffn, "moe_top_k", where),
        "moe_ffn_size": width,
    }


def _every_layer_moe(cfg: dict[str, Any], where: str, step_key: str) -> None:
    if optional(cfg, step_key, 1) != 1 or optional(cfg, "mlp_only_layers", []):
        raise CatalogError(
            f"dense layers between the MoE layers ({step_key} / mlp_only_layers) are not modelled",
            where=where, fix=f"use a config whose every layer is MoE ({step_key} 1, no mlp_only_layers)")


def qwen2_moe_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Qwen1.5-MoE / Qwen2-MoE: Qwen2 attention (q/k/v biases), routed experts plus one shared
    expert behind a sigmoid gate, counted as shared_expert_intermediate_size over the routed
    width experts of that width."""
    _every_layer_moe(cfg, where, "decoder_sparse_step")
    width = require(cfg, "moe_intermediate_size", where)
    shared = optional(cfg, "shared_expert_intermediate_size", 0)
    if shared and (not isinstance(width, int) or width <= 0 or shared % width):
        raise CatalogError(f"shared_expert_intermediate_size {shared} is not a multiple of moe_intermediate_size "
                           f"{width}", where=where, fix="use the model's published config.json")
    return {**_plain_decoder(cfg, where), "gated_mlp": True,
            "tied_embeddings": optional(cfg, "tie_word_embeddings", False), "qkv_bias": True,
            "num_experts": require(cfg, "num_experts", where),
            "experts_per_token": require(cfg, "num_experts_per_tok", where), "moe_ffn_size": width,
            "num_shared_experts": shared // width if shared else 0, "shared_expert_gate": bool(shared)}


def deepseek_moe_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """DeepSeekMoE (model_type deepseek): Llama attention, fine-grained routed experts plus
    shared ones, dense first layers (first_k_dense_replace)."""
    _every_layer_moe(cfg, where, "moe_layer_freq")
    return {**_plain_decoder(cfg, where), "gated_mlp": True,
            "tied_embeddings": optional(cfg, "tie_word_embeddings", False),
            "num_experts": require(cfg, "n_routed_experts", where),
            "experts_per_token": require(cfg, "num_experts_per_tok", where),
            "moe_ffn_size": require(cfg, "moe_intermediate_size", where),
            "num_shared_experts": optional(cfg, "n_shared_experts", 0),
            "first_dense_layers": optional(cfg, "first_k_dense_replace", 0)}


def phimoe_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """Phi-3.5-MoE: grouped KV heads with biases, every layer's experts of intermediate_size,
    LayerNorm, an untied head."""
    fields = {**_plain_decoder(cfg, where), "gated_mlp": True,
              "tied_embeddings": optional(cfg, "tie_word_embeddings", False),
              "attention_bias": optional(cfg, "attention_bias", True), "norm": "layernorm",
              "num_experts": require(cfg, "num_local_experts", where),
              "experts_per_token": require(cfg, "num_experts_per_tok", where)}
    fields["moe_ffn_size"] = fields["ffn_size"]
    return fields


# model_type -> reader; the dense ones may not carry routed-expert keys.
DENSE_FAMILIES = {"falcon": falcon_fields, "RefinedWeb": falcon_fields, "RefinedWebModel": falcon_fields,
                  "bloom": bloom_fields, "gptj": gptj_fields, "mpt": mpt_fields, "gpt_bigcode": gpt_bigcode_fields,
                  "starcoder2": starcoder2_fields, "phi": phi_fields, "nemotron": nemotron_fields,
                  "cohere": cohere_fields, "cohere2": cohere_fields}
MOE_FAMILIES = {"dbrx": dbrx_fields, "qwen2_moe": qwen2_moe_fields, "deepseek": deepseek_moe_fields,
                "phimoe": phimoe_fields}

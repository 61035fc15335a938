"""Reading keys out of a Hugging Face config.json: required ones fail with the fix."""

from __future__ import annotations

from typing import Any

from simulator.errors import CatalogError


def require(cfg: dict[str, Any], key: str, where: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise CatalogError(
            f"missing required key {key!r}",
            where=where,
            fix=f"add {key!r} to config.json (copy it from the model's published config)",
        )
    return cfg[key]


def optional(cfg: dict[str, Any], key: str, default: Any) -> Any:
    value = cfg.get(key)
    return default if value is None else value


def first_of(cfg: dict[str, Any], keys: tuple[str, ...], where: str) -> Any:
    """The first of `keys` the config sets (older checkpoints name the same field otherwise:
    Falcon's RW configs n_embed, transformers' hidden_size)."""
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return require(cfg, keys[0], where)


def decoder_fields(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """The transformers-standard keys every plain decoder shares: widths, vocabulary,
    context, biases (layer counts and MLP widths, which families spell apart, are not read)."""
    return {
        "hidden_size": require(cfg, "hidden_size", where),
        "num_heads": require(cfg, "num_attention_heads", where),
        "vocab_size": require(cfg, "vocab_size", where),
        "tied_embeddings": optional(cfg, "tie_word_embeddings", False),
        "max_position_embeddings": require(cfg, "max_position_embeddings", where),
        "attention_bias": optional(cfg, "attention_bias", False),
        "mlp_bias": optional(cfg, "mlp_bias", False),
    }

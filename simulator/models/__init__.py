"""Model catalog and Hugging Face config.json loader.

The simulator needs shapes, not weights: layer count and matrix sizes give GEMM shapes,
parameter count gives weight bytes, KV heads x head_dim gives KV bytes per token. Each
catalog entry copies a published config.json; ``param_count`` is derived from the shapes
and checked against the published size in the tests, which catches a wrong shape.
"""

from __future__ import annotations

from simulator.models.catalog import MODEL_CATALOG, get_model, list_models
from simulator.models.hf_config import load_hf_config
from simulator.models.spec import ModelSpec

__all__ = ["MODEL_CATALOG", "ModelSpec", "get_model", "list_models", "load_hf_config"]

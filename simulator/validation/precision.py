"""A benchmark's precision (a sweep column, or a checkpoint name's token) mapped to the
scenario's weight, activation, expert and KV dtypes for the model and GPU."""

from __future__ import annotations

import re

from simulator.errors import CatalogError
from simulator.hardware import get_gpu
from simulator.models import get_model

PRECISIONS = {
    # precision column -> (weight, activation, kv) dtypes. FP8 serving on Hopper (vLLM
    # --quantization fp8 --kv-cache-dtype fp8) quantises the KV cache too; see docs/fidelity.md.
    "fp8": ("fp8", "fp8", "fp8"),
    "fp16": ("fp16", "fp16", "fp16"),
    "bf16": ("bf16", "bf16", "bf16"),
    "fp4": ("fp4", "fp4", "fp8"),  # NVFP4 W4A4 on Blackwell tensor cores, FP8 KV
    "int4": ("int4", "bf16", "bf16"),  # weight-only (W4A16)
    "int8": ("int8", "int8", "bf16"),  # W8A8 INT8 (e.g. compressed-tensors w8a8): KV stays 16-bit
}


# Other spellings of the same formats in benchmark tables and checkpoint names.
PRECISION_ALIASES = {
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "nvfp4": "fp4", "mxfp4": "fp4",
    "w4a4": "fp4", "fp8_block": "fp8", "fp8-block": "fp8", "w8a8_fp8": "fp8", "float8": "fp8",
    "w4a16": "int4", "awq": "int4", "gptq": "int4", "w8a8": "int8", "w8a8_int8": "int8",
}


def canonical_precision(text: str) -> str | None:
    """A precision column value in PRECISIONS' terms, or None if it is not one we know."""
    key = text.strip().lower()
    key = PRECISION_ALIASES.get(key, key)
    return key if key in PRECISIONS else None


# A blank precision cell (pandas reads it as NaN) or one of these words means "what the
# checkpoint is": the model name's quantisation token, else the model's native format.
UNSTATED_PRECISIONS = ("", "nan", "none", "auto", "default", "native")


def precision_overrides(prec: str, model_name: str, gpu_name: str) -> list[str]:
    """Scenario overrides for a row's precision column, given what the model and GPU support.

    - Checkpoints that quantise only their routed experts (gpt-oss MXFP4, Kimi-K2.5 INT4)
      keep attention, shared experts and the KV cache in bf16 when the row names that
      native format; another format (Kimi fp4 = NVIDIA's NVFP4 checkpoint) maps as below.
    - NVIDIA's NVFP4 checkpoints of some MoE models quantise the experts only
      (`nvfp4_experts_only`: MiniMax-M2.5, Kimi-K2.5): attention stays bf16, the experts run
      W4A4, and the KV cache is FP8 as in every ModelOpt NVFP4 checkpoint.
    - FP4 on a GPU without FP4 tensor cores (Hopper), and FP8 on one without FP8 tensor
      cores (Ampere), run weight-only: vLLM dequantises in the GEMM (Marlin) and computes
      in bf16.
    - FP8 of a model whose publisher ships a block-scaled FP8 checkpoint (`native_fp8`)
      keeps a bf16 KV cache: that checkpoint has no KV scales and vLLM's default KV dtype
      follows the model. ModelOpt FP8 checkpoints (the others) quantise the KV cache too.
    """
    w, a, kv = PRECISIONS[prec]
    try:
        model = get_model(model_name)
    except CatalogError:  # reported later as unsimulatable, with the catalog's reason
        model = None
    try:
        peaks = get_gpu(gpu_name).peak_tflops
    except CatalogError:
        peaks = {"fp4": 1.0, "fp8": 1.0}
    expert = None
    if model is not None and model.native_expert_dtype == w:
        w, a, kv, expert = "bf16", "bf16", "bf16", w
    elif prec == "fp4" and model is not None and model.nvfp4_experts_only:
        w, expert = "bf16", "fp4"
    if a in ("fp4", "fp8") and not peaks.get(a):
        a = "bf16"
    if prec == "fp8" and model is not None and model.native_fp8:
        kv = "bf16"
    out = [f"model.weight_dtype={w}", f"model.activation_dtype={a}", f"model.kv_dtype={kv}"]
    return [*out, f"model.expert_weight_dtype={expert or 'null'}"]


# Quantisation tokens in checkpoint names, for runs that name their model (vLLM's model_id).
_ID_PRECISION_TOKENS = (("nvfp4", "fp4"), ("mxfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"),
                        ("awq", "int4"), ("gptq", "int4"), ("int4", "int4"), ("w4a16", "int4"),
                        ("w8a8", "int8"), ("int8", "int8"))


def checkpoint_precision(model_id: str) -> str:
    """The precision a checkpoint name implies: its quantisation token, else the model's native format."""
    tokens = re.split(r"[-_./\s]+", model_id.lower())
    for token, prec in _ID_PRECISION_TOKENS:
        if token in tokens:
            return prec
    model = get_model(model_id)
    if model.native_expert_dtype:
        return model.native_expert_dtype
    return "fp8" if model.released_in_fp8 else "bf16"


def model_id_overrides(model_id: str | None, base_model: str | None, gpu_name: str) -> list[str]:
    """Overrides that make a run follow the model its result file names.

    Empty when the file names no model, a model outside the catalog (a local path), the
    model the base scenario already serves (whose dtypes the scenario then decides), or
    when the scenario's own model is not a catalog entry (a config.json it loads).
    Otherwise the catalog entry and the precision its checkpoint name implies.
    """
    if not model_id or not base_model:  # no name, or a scenario model loaded from config.json
        return []
    try:
        model = get_model(model_id)
        same = get_model(base_model).name == model.name
    except CatalogError:
        return []
    if same:
        return []
    prec = checkpoint_precision(model_id)
    return [f"model.name={model.name}", "model.config_json=null", *precision_overrides(prec, model.name, gpu_name)]


def unknown_model_id_note(model_id: str | None, scenario_model: str) -> str | None:
    """What a run says when its file names a model outside the catalog: it is simulated as
    the scenario's model, which may not be the one measured (the user may mean it so)."""
    if not model_id:
        return None
    try:
        get_model(model_id)
    except CatalogError:
        return (f"its model_id {model_id!r} is not in the catalog; simulated as {scenario_model} "
                "(set model.name or model.config_json to choose)")
    return None

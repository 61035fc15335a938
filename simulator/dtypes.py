"""Element sizes of the numeric formats the cost and memory models understand."""

from __future__ import annotations

from typing import Literal

Dtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}


# Bytes a stored weight takes with its quantisation scales, where those are not negligible:
# NVFP4 keeps one FP8 scale per 16 values (NVIDIA ModelOpt); 4-bit integer checkpoints
# (GPTQ/AWQ) one 16-bit scale per group of 128. Per-tensor and 128x128-block FP8 scales
# are a rounding error. Checkpoints with another layout say so (ModelSpec.native_expert_bits).
STORED_WEIGHT_BYTES: dict[str, float] = {"fp4": 0.5 + 1 / 16, "int4": 0.5 + 2 / 128}


# Formats that run at the same tensor-core peak as another on every GPU where that other
# one's sustained clock was measured (FP16 and BF16 everywhere; INT8 and FP8 from Hopper on,
# the only GPUs with FP8), so the measurement of one stands for the other.
SAME_TENSOR_RATE: dict[str, str] = {"fp16": "bf16", "int8": "fp8"}


def tensor_rate_dtype(dtype: str) -> str:
    """The format whose tensor-core measurements stand for `dtype`'s."""
    return SAME_TENSOR_RATE.get(dtype, dtype)


def stored_weight_bytes(dtype: str) -> float:
    """Memory per weight in `dtype`, scale factors included (for the memory plan)."""
    return STORED_WEIGHT_BYTES.get(dtype, DTYPE_BYTES[dtype])


def gemm_compute_dtype(weight_dtype: str, activation_dtype: str) -> str:
    """The tensor-core format a GEMM runs in.

    W8A8/FP8 runs on the 8-bit tensor cores, W4A4 (NVFP4) on the 4-bit ones; weight-only
    quantisation (W4A16, W8A16) dequantises to the activation dtype and computes there.
    """
    if DTYPE_BYTES[weight_dtype] >= 2.0:  # an unquantised layer quantises no activations
        return activation_dtype if activation_dtype in ("bf16", "fp16") else "bf16"
    if activation_dtype == "fp4" and weight_dtype == "fp4":
        return "fp4"
    if DTYPE_BYTES[activation_dtype] <= 1.0 and DTYPE_BYTES[weight_dtype] <= 1.0:
        return activation_dtype if activation_dtype in ("fp8", "int8") else "fp8"
    return "bf16" if activation_dtype == "fp32" else activation_dtype

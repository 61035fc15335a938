"""What a GPU and a link are: the datasheet figures the cost and memory models read, and
the tensor dtypes a GPU's peaks are keyed by."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from simulator.errors import CatalogError
from simulator.strict import StrictModel

TENSOR_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")

# Spellings of a dtype (torch, HF config, vLLM flags) -> the peak_tflops key.
_DTYPE_SPELLINGS: dict[str, str] = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "f32": "fp32",
    "tf32": "tf32", "tensorfloat32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp8": "fp8", "float8": "fp8", "fp8e4m3": "fp8", "fp8e5m2": "fp8",
    "float8e4m3fn": "fp8", "float8e4m3fnuz": "fp8", "float8e5m2": "fp8", "e4m3": "fp8",
    "e5m2": "fp8", "w8a8fp8": "fp8",
    "int8": "int8", "i8": "int8", "w8a8": "int8", "w8a8int8": "int8",
    "fp4": "fp4", "nvfp4": "fp4", "mxfp4": "fp4", "float4": "fp4", "float4e2m1fn": "fp4",
}  # fmt: skip


def canonical_dtype(dtype: str) -> str:
    """Map any common spelling ("torch.bfloat16", "float8_e4m3fn") to a peak_tflops key."""
    key = re.sub(r"[^a-z0-9]", "", dtype.lower().removeprefix("torch."))
    if key not in _DTYPE_SPELLINGS:
        raise CatalogError(
            f"unknown compute dtype {dtype!r}",
            where="dtype",
            fix=f"use one of {', '.join(TENSOR_DTYPES)}",
        )
    return _DTYPE_SPELLINGS[key]


class LinkSpec(StrictModel):
    """A link as collectives see it: alpha (latency) + bytes / beta (bandwidth)."""

    name: str
    bandwidth_gbps: float = Field(gt=0)  # GB/s per GPU, one direction (bounds ring bus bw)
    latency_us: float = Field(ge=0)  # per-message alpha term of collectives


class GPUSpec(StrictModel):
    """One accelerator's datasheet figures plus what the driver actually hands out."""

    name: str
    display_name: str
    vendor: str
    # GPU generation: which kernels an engine runs on it (vLLM's attention back end on
    # Hopper is FlashAttention-3, on Blackwell FlashInfer/TRT-LLM); "" if unknown.
    architecture: Literal["", "ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4"] = ""
    memory_gb: float = Field(gt=0)  # datasheet capacity, GB (1e9 B)
    usable_memory_gib: float = Field(gt=0)  # driver-reported total, GiB
    # The total CUDA reports (torch's total_memory, cudaMemGetInfo), which vLLM sizes its
    # budget from, where measured; None: usable_memory_gib less memory.CUDA_INVISIBLE_GIB.
    visible_memory_gib: float | None = Field(default=None, gt=0)
    hbm_tbps: float = Field(gt=0)  # datasheet memory bandwidth, TB/s (1e12 B/s)
    peak_tflops: dict[str, float]  # dense tensor peaks; unsupported dtypes omitted
    num_sms: int = Field(gt=0)  # SMs (NVIDIA) / CUs (AMD), for wave quantization
    l2_cache_mb: float = Field(gt=0)
    intra_node_link: LinkSpec
    inter_node_link: LinkSpec
    pcie: LinkSpec
    cost_per_gpu_hour: float = Field(ge=0)  # default on-demand $/GPU-hour; user overrides
    aliases: tuple[str, ...] = ()  # extra names get_gpu() accepts (e.g. torch device names)
    # A GPU with the same die, memory and clocks class whose measured kernel tables stand
    # in when none were measured on this one (GB200 runs B200's kernels). Its table times
    # are used as measured, so a GPU with higher power limits comes out slightly slow.
    kernel_tables_from: str | None = None
    # Measured fraction of the short-burst tensor rate a compute-bound GEMM keeps when the
    # GPU runs it back to back for seconds (its power limit pulls the clocks down), per
    # dtype, from benchmarks/sustained_gemm.py on this GPU. It overrides the fraction the
    # calibrated back end reads off a kernel table's long rows (simulator/cost/sustained.py).
    sustained_tensor_fraction: dict[str, float] = Field(default_factory=dict)
    # Measured fraction of its short-burst speed that prefill attention keeps inside a long
    # prefill run back to back (benchmarks/sustained_gemm.py --op layer). Attention slows with
    # the SM clock, which the power limit lowers for the whole chip, more than the GEMMs
    # around it do. None: prefill attention takes its dtype's sustained_tensor_fraction.
    sustained_attention_fraction: float | None = Field(default=None, gt=0, le=1)
    # Share of the board's power limit the GPU draws while a TP iteration waits on its
    # collectives, fitted to in-layer runs with such waits (benchmarks/duty_cycle_fit.py).
    # A wait that draws less than the limit lets the clocks, and so the two sustained
    # fractions above, rise for the rest of the iteration (cost/sustained.py's
    # power_relief). None: the waits give nothing back (the fractions apply whole).
    collective_wait_power_fraction: float | None = Field(default=None, ge=0, lt=1)

    @model_validator(mode="after")
    def _check_peaks(self) -> GPUSpec:
        bad = sorted(set(self.peak_tflops) - set(TENSOR_DTYPES))
        if bad:
            raise ValueError(f"unknown peak_tflops keys {bad}; allowed: {list(TENSOR_DTYPES)}")
        if any(v <= 0 for v in self.peak_tflops.values()):
            raise ValueError("peak_tflops values must be > 0 (omit unsupported dtypes)")
        odd = sorted(d for d, f in self.sustained_tensor_fraction.items()
                     if d not in self.peak_tflops or not 0 < f <= 1)
        if odd:
            raise ValueError(f"sustained_tensor_fraction {odd}: give a fraction in (0, 1] for a dtype "
                             "of peak_tflops")
        return self

    @property
    def supported_dtypes(self) -> list[str]:
        return [d for d in TENSOR_DTYPES if d in self.peak_tflops]

    def peak_tflops_for(self, dtype: str) -> float:
        """Dense peak for a compute dtype; an unsupported one is an error, not a silent fallback.

        Silently running FP8 at the BF16 rate on an A100 would hide a configuration mistake
        (vLLM would fall back to weight-only FP8 there), so the user must choose.
        """
        key = canonical_dtype(dtype)
        if key not in self.peak_tflops:
            raise CatalogError(
                f"{self.display_name} has no {key} tensor-core support "
                f"(supported: {', '.join(self.supported_dtypes)})",
                where=f"gpu {self.name}",
                fix=f"pick a compute dtype from {', '.join(self.supported_dtypes)} "
                "or a GPU that supports " + key,
            )
        return self.peak_tflops[key]

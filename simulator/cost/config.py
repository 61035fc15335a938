"""Cost-model settings in the scenario: which back end, its efficiencies, and overheads."""

from __future__ import annotations

from pydantic import Field

from simulator.strict import StrictModel


class RooflineEfficiency(StrictModel):
    """Fractions of datasheet peaks that kernels reach at large, well-shaped sizes.

    Defaults follow public H100/A100 measurements: dense GEMMs reach ~70-80% of the
    tensor peak, bandwidth-bound kernels 80-90% of HBM bandwidth, FlashAttention-2
    prefill ~50% of peak, paged decode attention ~70% of bandwidth. Shape effects
    (wave quantisation, small messages) are modelled on top, not folded in here.
    """

    gemm_compute: float = Field(0.72, gt=0, le=1, description="GEMM fraction of dense tensor peak")
    gemm_memory: float = Field(0.85, gt=0, le=1, description="GEMM fraction of HBM bandwidth")
    attention_compute: float = Field(0.5, gt=0, le=1, description="prefill attention fraction of tensor peak")
    attention_memory: float = Field(0.72, gt=0, le=1, description="attention fraction of HBM bandwidth (KV reads)")
    elementwise_memory: float = Field(0.8, gt=0, le=1, description="norm/activation fraction of HBM bandwidth")
    collective_bandwidth: float = Field(0.75, gt=0, le=1, description="collective fraction of link bandwidth")
    kernel_latency_us: float = Field(2.0, ge=0, description="fixed cost per kernel launch, µs")


class CostModelConfig(StrictModel):
    """How iteration times are computed (DESIGN.md §5)."""

    backend: str = Field("roofline", description="cost back end: `roofline` (or `calibrated` with hardware.profile)")
    framework_overhead_ms: float = Field(
        0.6, ge=0, description="fixed per-iteration CPU cost: scheduling, input prep, output processing, ms")
    per_sequence_overhead_us: float = Field(
        3.0, ge=0, description="extra per-iteration cost for each scheduled sequence (sampling, detokenise), µs")
    efficiency: RooflineEfficiency = Field(default_factory=RooflineEfficiency)

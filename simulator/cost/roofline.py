"""Roofline back end: each op takes max(compute time, memory time) plus a launch cost.

Shape awareness that matters in serving: GEMM wave quantisation (a tile grid that does
not fill the last wave of SMs wastes it) and the latency floor of small collectives.
"""

from __future__ import annotations

import math

import numpy as np

from simulator.cost.config import RooflineEfficiency
from simulator.cost.ops import Op
from simulator.hardware import GPUSpec, LinkSpec

TILE_N = 128


class RooflineTimer:
    """Op times from datasheet peaks scaled by documented efficiencies."""

    name = "roofline"

    def __init__(self, gpu: GPUSpec, eff: RooflineEfficiency, kernel_latency_us: float = 3.5):
        self.gpu = gpu
        self.eff = eff
        self.bw = gpu.hbm_tbps * 1e12
        self.latency = kernel_latency_us * 1e-6
        self._links: dict[str, LinkSpec] = {"intra": gpu.intra_node_link, "inter": gpu.inter_node_link}
        self._peaks: dict[str, float] = {}

    def peak(self, dtype: str) -> float:
        v = self._peaks.get(dtype)
        if v is None:
            v = self._peaks[dtype] = self.gpu.peak_tflops_for(dtype) * 1e12
        return v

    def attn_decode_times(self, flops: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        """Vectorised decode-attention roofline, for fast-forwarded decode stretches."""
        compute = flops / (self.peak("bf16") * self.eff.attention_compute)
        memory = nbytes / (self.bw * self.eff.attention_memory)
        return np.maximum(compute, memory) + self.latency

    def gemm_time(self, m: int, n: int, k: int, flops: float, nbytes: float, dtype: str) -> float:
        # Up to 16 rows (a decode batch of a few sequences) libraries run narrow-tile or
        # GEMV-like kernels, not a 64-row tile 4-64x padded: on a compute-starved GPU (H20:
        # 31 FLOP per byte at these efficiencies) 64 rows would make batch-1 decode
        # compute-bound. Elsewhere such GEMMs are memory-bound either way.
        tile_m = 128 if m >= 128 else 64 if m > 16 else 16
        tiles = math.ceil(m / tile_m) * math.ceil(n / TILE_N)
        sms = self.gpu.num_sms
        if tiles >= sms:
            # Wave quantisation: the last, partial wave of tiles costs a full wave.
            padded_flops = math.ceil(tiles / sms) * sms * 2.0 * tile_m * TILE_N * k
        else:
            # Too few tiles to fill the GPU: libraries split K across SMs instead.
            padded_flops = 2.0 * math.ceil(m / tile_m) * tile_m * n * k
        compute = max(flops, padded_flops) / (self.peak(dtype) * self.eff.gemm_compute)
        memory = nbytes / (self.bw * self.eff.gemm_memory)
        return max(compute, memory) + self.latency * self._gemm_kernels(dtype)

    def moe_time(self, op: Op) -> float:
        """Fused MoE: two grouped GEMMs over the active experts, each expert's rows padded to
        the kernel's M tile (16/64/128 rows, as vLLM's tuned fused_moe configs pick by batch
        size), reading only the active experts' weights; plus the activation traffic of
        align, activation and sum at elementwise bandwidth."""
        compute, memory, rest = self.moe_parts(op)
        return max(compute, memory) + rest

    def moe_parts(self, op: Op) -> tuple[float, float, float]:
        """moe_time's terms: the grouped GEMMs' compute and weight-read times, and the rest
        (activation traffic and launches)."""
        m, hidden, inter, top_k, _experts, up_n, active, gemm_bytes, ep, _routing, _label = op.shape
        rows = m * top_k / ep / active if active else 0.0
        tile_m = 16 if rows <= 16 else 64 if rows <= 64 else 128
        padded = 2.0 * active * math.ceil(rows / tile_m) * tile_m * (up_n * hidden + hidden * inter)
        compute = max(op.flops, padded) / (self.peak(op.dtype) * self.eff.gemm_compute)
        memory = gemm_bytes / (self.bw * self.eff.gemm_memory)
        rest = max(op.bytes - gemm_bytes, 0.0) / (self.bw * self.eff.elementwise_memory)
        return compute, memory, rest + self.latency * op.kernels

    @staticmethod
    def _gemm_kernels(dtype: str) -> int:
        # FP8/INT8 GEMMs quantise their input activations in a separate kernel.
        return 2 if dtype in ("fp8", "int8") else 1

    def collective_time(self, family: str, nbytes: float, ranks: int, link: str) -> float:
        spec = self._links[link]
        bw = spec.bandwidth_gbps * 1e9 * self.eff.collective_bandwidth
        alpha = spec.latency_us * 1e-6
        if family == "p2p":
            return nbytes / bw + alpha
        # Ring all-reduce moves 2(p-1)/p of the message per GPU, all-gather (p-1)/p.
        factor = 2.0 * (ranks - 1) / ranks if family == "allreduce" else (ranks - 1) / ranks
        return factor * nbytes / bw + alpha * 2 * math.ceil(math.log2(ranks))

    def op_time(self, op: Op) -> float:
        f = op.family
        if f == "gemm":
            m, n, k = op.shape
            return self.gemm_time(m, n, k, op.flops, op.bytes, op.dtype)
        if f == "moe":
            return self.moe_time(op)
        if f in ("attn_prefill", "attn_decode"):
            compute = op.flops / (self.peak("bf16") * self.eff.attention_compute)
            memory = op.bytes / (self.bw * self.eff.attention_memory)
            return max(compute, memory) + self.latency
        if f == "elementwise":
            return op.bytes / (self.bw * self.eff.elementwise_memory) + self.latency * op.kernels
        if f in ("allreduce", "allgather", "p2p"):
            nbytes, ranks, link = op.shape
            return self.collective_time(f, nbytes, ranks, link)
        if f in ("attn_sparse", "indexer", "linear_attn", "mamba2"):
            # DeepSeek-V3.2's FlashMLA sparse and DeepGEMM FP8 logits, the Gated DeltaNet
            # recurrence (FLA's Triton kernels) and Mamba2's scan: attention's efficiencies.
            peak = self.peak(op.dtype if op.dtype in self.gpu.peak_tflops else "bf16")
            compute = op.flops / (peak * self.eff.attention_compute)
            memory = op.bytes / (self.bw * self.eff.attention_memory)
            return max(compute, memory) + self.latency * op.kernels
        raise ValueError(f"unknown op family {f!r}")

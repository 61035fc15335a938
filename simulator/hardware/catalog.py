"""GPU catalog: the datasheet figures the cost and memory models are built on.

Adding a GPU is one entry in ``_GPUS``. Every figure carries its source, because a
simulator is only as credible as its constants; figures we could not source are marked
"estimate". Peaks are DENSE (datasheets headline the 2:4-sparsity numbers, twice as
large); achievable throughput is lower and comes from calibration, not from here.
Prices are defaults for cost reports, meant to be overridden by the user.
"""

from __future__ import annotations

import re

from simulator.catalog import AliasIndex
from simulator.hardware.links import (
    ETH_200G,
    ETH_AWS_100G,
    ETH_AWS_G6E,
    IB_HDR,
    IB_NDR,
    IB_XDR800,
    INFINITY_FABRIC,
    INFINITY_FABRIC_CDNA4,
    NVLINK3,
    NVLINK3_8LINKS,
    NVLINK4,
    NVLINK4_8LINKS,
    NVLINK5,
    NVLINK_C2C,
    NVLINK_C2C_GRACE_BLACKWELL,
    PCIE4,
    PCIE5,
)
from simulator.hardware.spec import GPUSpec

# Dense tensor peaks shared by several parts: the GH100 die at SXM clocks (H100 SXM, H200,
# H800, GH200; NVIDIA H100 SXM datasheet's sparse figures halved: BF16/FP16 1979* -> 989,
# FP8/INT8 3958* -> 1979, TF32 989* -> 494.5; FP32 non-tensor 67) and CDNA3 (MI300X, MI325X;
# AMD datasheets: BF16/FP16 1307.4, FP8/INT8 2614.9, TF32 653.7, FP32 163.4 dense).
_GH100_SXM_PEAKS = {"fp32": 67.0, "tf32": 494.5, "bf16": 989.0, "fp16": 989.0, "fp8": 1979.0, "int8": 1979.0}
# The GH100 on a PCIe NVL board (H100 NVL, H200 NVL; NVIDIA H100 and H200 datasheets,
# sparse figures halved: BF16/FP16 1,671* -> 835.5, FP8/INT8 3,341* -> 1,670.5, TF32 835*
# -> 417.5; FP32 (non-tensor) 60).
_GH100_NVL_PEAKS = {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "int8": 1670.5}
# GA100 (A100 40/80 GB, A800; NVIDIA A100 datasheet, dense: BF16/FP16 312, INT8 624,
# TF32 156, FP32 19.5; no FP8).
_GA100_PEAKS = {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0}
# What CUDA hands out on an A100 (torch's total_memory; vLLM's budget starts from it): torch
# OOM messages read "79.15 GiB total capacity" on the 80 GB boards and "39.59 GiB" on the
# 40 GB ones, 0.85 GiB below nvidia-smi's 81920 MiB where an H100 loses 0.45. vLLM 0.2's
# block count for Llama-2-7B on one A100-80GB (7,449, vllm-project/vllm#2031, whose profile
# subtracted only torch's own peak) implies 79.0 GiB with the plan's weights and activations.
A100_80GB_VISIBLE_GIB = 79.15
A100_40GB_VISIBLE_GIB = 39.59
_MI300_PEAKS = {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9}

# CDNA4 (MI350X, MI355X): 256 CUs (32 per XCD; ROCm GPU specifications), each 8,192 dense
# FP8 FLOP per clock (AMD, ISSCC 2026: twice CDNA3's 4,096); BF16/FP16 at half that rate,
# MXFP4/MXFP6 at twice it; INT8 as FP8. No TF32 matrix path. Peak clocks: MI355X 2.4 GHz,
# MI350X 2.2 GHz (AMD, Hot Chips 2025). AMD's datasheets round these to 2.5/5.0/10.1 PF
# (MI355X) and 2.3/4.6/9.2 PF (MI350X); FP32 vector 157.3 and 144.2 TF.
def _cdna4_peaks(clock_ghz: float) -> dict[str, float]:
    """Dense peaks (TFLOPS) of the 256-CU CDNA4 die at `clock_ghz`."""
    fp8 = 8192 * 256 * clock_ghz / 1e3  # TFLOPS
    fp32 = 256 * 256 * clock_ghz / 1e3  # vector: 256 FP32 FLOP per clock per CU
    return {"fp32": fp32, "bf16": fp8 / 2, "fp16": fp8 / 2,
            "fp8": fp8, "int8": fp8, "fp4": fp8 * 2}




_GPUS: list[GPUSpec] = [
    GPUSpec(
        name="h100-sxm",
        display_name="NVIDIA H100 SXM5 80GB",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=80.0,  # NVIDIA H100 Tensor Core GPU datasheet (SXM): 80 GB HBM3
        # nvidia-smi reports 81559 MiB (modal-labs/modal-client PR #2797 lists per-GPU
        # totals). cudaMemGetInfo's total is ~0.5 GiB lower (a vLLM H100 OOM reports
        # "total capacity of 79.11 GiB"); that gap belongs in the runtime-overhead term.
        usable_memory_gib=81559 / 1024,
        hbm_tbps=3.35,  # NVIDIA H100 datasheet (SXM): 3.35 TB/s
        # NVIDIA H100 datasheet (SXM) quotes sparse figures; dense = half: BF16/FP16 1979* ->
        # 989, FP8/INT8 3958* -> 1979, TF32 989* -> 494.5; FP32 (non-tensor) 67.
        # DESIGN.md section 5 uses 989 / 1979.
        peak_tflops=_GH100_SXM_PEAKS,
        num_sms=132,  # NVIDIA Hopper architecture whitepaper: H100 SXM5 has 132 SMs
        l2_cache_mb=50.0,  # NVIDIA Hopper whitepaper: 50 MB L2
        intra_node_link=NVLINK4,
        inter_node_link=IB_NDR,
        pcie=PCIE5,  # H100 datasheet: PCIe Gen5 128 GB/s (bidirectional)
        cost_per_gpu_hour=2.99,  # typical on-demand price, Lambda Cloud 8x H100 SXM list, 2025
        aliases=("h100", "h100-80gb", "h100-sxm5", "h100-sxm5-80gb", "h100-80gb-hbm3"),
        # benchmarks/sustained_gemm.py on one H100 SXM (700 W, driver 580.159.04), 2026-11-26:
        # steady per-call time after ~0.2 s back to back against the unthrottled time, GEMMs
        # 8192x28672x8192 and 2048x10240x8192: FP8 0.835, 0.825; BF16 0.849, 0.843 (SM clock
        # 1980 -> 1215-1320 MHz at 690-698 W). docs/fidelity.md item 16.
        sustained_tensor_fraction={"fp8": 0.83, "bf16": 0.85},
        # benchmarks/sustained_gemm.py --op layer, same H100: Llama-3.1-70B FP8 layer at TP1 on
        # 8,192 tokens, attention 1,705 -> 2,293 µs after 8 s back to back (0.744; SM clock
        # 1320 MHz). benchmarks/logs/2026-11-26-h100-calibration-and-layers.log.
        sustained_attention_fraction=0.74,
        # calibration/power.py (simulate calibrate's layer-power step) on one H100 SXM, 2026-11-27:
        # the TP1 layer above with a copy+spin wait at each all-reduce point, 0.17-0.19 of the
        # pass; four runs fit q = 0.70, 0.78, 0.78, 0.73 (attention 0.73-0.75, as above).
        # benchmarks/logs/2026-11-27-h100-layer-power-repeat2.log. Until then it borrowed the H200's.
        # Another H100, 2026-11-28 (the shipped h100_sxm-measured, which uses its own): q = 0.63,
        # attention 0.746; the median of the five runs is 0.73.
        collective_wait_power_fraction=0.75,
    ),
    GPUSpec(
        name="h100-pcie",
        display_name="NVIDIA H100 PCIe 80GB",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=80.0,  # NVIDIA H100 datasheet (PCIe): 80 GB HBM2e
        usable_memory_gib=81559 / 1024,  # estimate: same 80 GB part as SXM, 81559 MiB
        hbm_tbps=2.0,  # NVIDIA H100 datasheet (PCIe): 2 TB/s
        # NVIDIA H100 datasheet (PCIe), sparse figures halved: BF16/FP16 1513* -> 756,
        # FP8/INT8 3026* -> 1513, TF32 756* -> 378; FP32 51.
        peak_tflops={
            "fp32": 51.0,
            "tf32": 378.0,
            "bf16": 756.0,
            "fp16": 756.0,
            "fp8": 1513.0,
            "int8": 1513.0,
        },
        num_sms=114,  # NVIDIA Hopper whitepaper: H100 PCIe has 114 SMs
        l2_cache_mb=50.0,  # NVIDIA Hopper whitepaper: 50 MB L2
        # NVLink bridges join only pairs of cards, so a TP group of 4-8 talks over PCIe;
        # Gen5 x16 per NVIDIA H100 datasheet (PCIe).
        intra_node_link=PCIE5,
        inter_node_link=ETH_200G,
        pcie=PCIE5,
        cost_per_gpu_hour=2.49,  # typical on-demand price, Lambda Cloud 1x H100 PCIe list, 2025
        aliases=("h100-pcie-80gb", "h100pcie"),
    ),
    GPUSpec(
        name="h100-nvl",
        display_name="NVIDIA H100 NVL 94GB",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=94.0,  # NVIDIA H100 datasheet (H100 NVL): 94 GB HBM3
        usable_memory_gib=95830 / 1024,  # nvidia-smi reports 95830 MiB on H100 NVL (public logs)
        hbm_tbps=3.9,  # NVIDIA H100 datasheet (H100 NVL): 3.9 TB/s
        peak_tflops=_GH100_NVL_PEAKS,
        num_sms=132,  # CUDA device query on H100 NVL: 132 SMs (the SXM5 configuration)
        l2_cache_mb=50.0,  # NVIDIA Hopper whitepaper: 50 MB L2
        # NVIDIA H100 datasheet (NVL): NVLink bridge 600 GB/s bidirectional, but it joins only
        # pairs of cards, so (as for h100-pcie) a TP group of 4-8 talks over PCIe Gen5; a
        # bridged TP=2 pair is faster than modelled here.
        intra_node_link=PCIE5,
        inter_node_link=ETH_200G,
        pcie=PCIE5,  # NVIDIA H100 datasheet (NVL): PCIe Gen5 128 GB/s
        # estimate: between the H100 PCIe (2.49) and SXM (2.99) lists above; neocloud H100 NVL
        # offers sit in that range, 2025
        cost_per_gpu_hour=2.79,
        aliases=("h100-nvl-94gb", "h100-94gb"),
    ),
    GPUSpec(
        name="h200",
        display_name="NVIDIA H200 SXM 141GB",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=141.0,  # NVIDIA H200 datasheet (SXM): 141 GB HBM3e
        usable_memory_gib=143771 / 1024,  # nvidia-smi reports 143771 MiB on H200 SXM
        hbm_tbps=4.8,  # NVIDIA H200 datasheet (SXM): 4.8 TB/s
        # NVIDIA H200 datasheet (SXM): same GH100 compute as H100 SXM; sparse figures halved.
        peak_tflops=_GH100_SXM_PEAKS,
        num_sms=132,  # NVIDIA H200 (GH100, same die config as H100 SXM5): 132 SMs
        l2_cache_mb=50.0,  # NVIDIA Hopper whitepaper: 50 MB L2
        intra_node_link=NVLINK4,  # NVIDIA H200 datasheet: NVLink 900 GB/s
        inter_node_link=IB_NDR,
        pcie=PCIE5,  # NVIDIA H200 datasheet: PCIe Gen5 128 GB/s
        cost_per_gpu_hour=3.50,  # typical on-demand price, neocloud lists (e.g. Nebius), 2025
        aliases=("h200-sxm", "h200-141gb", "h200-sxm-141gb"),
        # benchmarks/sustained_gemm.py on one H200 (700 W, driver 580.159.04), two runs on
        # 2026-11-26: FP8 8192x28672x8192 0.922, 0.929 and 2048x10240x8192 0.830, 0.819 (median
        # 0.876); BF16 8192x28672x8192 0.850 (SM clock 1980 -> 1320-1455 MHz at 683-690 W).
        # docs/fidelity.md item 16. Another H200, 2026-11-28 (the shipped h200_sxm-measured): FP8
        # 0.855, 0.828; BF16 0.904, 0.835. Per-shape medians over the three runs leave these values.
        sustained_tensor_fraction={"fp8": 0.88, "bf16": 0.85},
        # benchmarks/sustained_gemm.py --op layer, same H200: Llama-3.1-70B FP8 layer, attention's
        # unthrottled over steady time, TP1 8,192 tokens 0.696 and 0.716, TP2 4,096 tokens 0.701
        # and 0.734 (two runs; SM clock 1350-1425 MHz). benchmarks/logs/2026-11-26-h200-layers-*.log.
        sustained_attention_fraction=0.71,
        # The same layer at TP2-8 with a wait at each all-reduce that moves the ring's HBM
        # traffic (a copy, then a spin), 2026-11-27: 0.576 of the 700 W limit fits its 18
        # kernel fractions to 1.1% (idle spins alone: 0.42). A real all-reduce also drives
        # NVLink, so this is a floor. benchmarks/logs/2026-11-27-h200-duty-cycle-run*.log.
        collective_wait_power_fraction=0.58,
    ),
    GPUSpec(
        name="h200-nvl",
        display_name="NVIDIA H200 NVL 141GB",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=141.0,  # NVIDIA H200 datasheet (H200 NVL): 141 GB HBM3e
        usable_memory_gib=143771 / 1024,  # estimate: H200 SXM's 143771 MiB (the same HBM3e stacks)
        hbm_tbps=4.8,  # NVIDIA H200 datasheet (H200 NVL): 4.8 TB/s
        # NVIDIA H200 datasheet (H200 NVL, up to 600 W): the H100 NVL's peaks.
        peak_tflops=_GH100_NVL_PEAKS,
        num_sms=132,  # the GH100 configuration of H200 SXM
        l2_cache_mb=50.0,  # NVIDIA Hopper whitepaper: 50 MB L2
        # NVIDIA H200 datasheet (NVL): a 2- or 4-way NVLink bridge (900 GB/s) joins at most four
        # cards; as for h100-nvl, the TP link is taken as PCIe Gen5 (slow for a bridged TP2-4).
        intra_node_link=PCIE5,
        inter_node_link=ETH_200G,
        pcie=PCIE5,  # NVIDIA H200 datasheet (NVL): PCIe Gen5 128 GB/s
        cost_per_gpu_hour=3.20,  # estimate: no on-demand list checked; a little under H200 SXM's
        aliases=("h200-nvl-141gb", "nvidia-h200-nvl"),
        # No kernel tables borrowed: H200 SXM's run at 700 W, this card at up to 600 W.
    ),
    GPUSpec(
        name="h800",
        display_name="NVIDIA H800 SXM5 80GB",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=80.0,  # NVIDIA H800 product brief (SXM): 80 GB HBM3, as H100 SXM
        usable_memory_gib=81559 / 1024,  # nvidia-smi reports 81559 MiB on H800 (public logs), as H100
        hbm_tbps=3.35,  # NVIDIA H800 product brief (SXM): 3.35 TB/s, as H100 SXM
        # NVIDIA H800 (SXM) keeps H100 SXM's tensor throughput (only NVLink and FP64 are cut):
        # the H100 SXM datasheet's sparse figures halved, as for h100-sxm.
        peak_tflops=_GH100_SXM_PEAKS,
        num_sms=132,  # same GH100 configuration as H100 SXM5: 132 SMs
        l2_cache_mb=50.0,  # NVIDIA Hopper whitepaper: 50 MB L2
        intra_node_link=NVLINK4_8LINKS,  # NVLink 400 GB/s bidirectional (H800 product brief)
        inter_node_link=IB_NDR,  # DeepSeek-V3 report: 400 Gb/s InfiniBand per H800
        pcie=PCIE5,
        cost_per_gpu_hour=2.99,  # estimate: not rented on public clouds outside China; H100 SXM's list
        aliases=("h800-sxm", "h800-sxm5", "h800-80gb", "h800-sxm5-80gb"),
        kernel_tables_from="h100-sxm",
    ),
    GPUSpec(
        name="h20",
        display_name="NVIDIA H20 96GB",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=96.0,  # NVIDIA H20 datasheet: 96 GB HBM3
        usable_memory_gib=97871 / 1024,  # nvidia-smi reports 97871 MiB on H20 (public logs)
        hbm_tbps=4.0,  # NVIDIA H20 datasheet: 4.0 TB/s
        # NVIDIA H20 datasheet, dense: BF16/FP16 148, FP8/INT8 296, TF32 74; FP32 44. Hopper
        # with most tensor throughput fused off: ~15% of H100 SXM, so no H100 tables stand in.
        peak_tflops={
            "fp32": 44.0,
            "tf32": 74.0,
            "bf16": 148.0,
            "fp16": 148.0,
            "fp8": 296.0,
            "int8": 296.0,
        },
        num_sms=78,  # CUDA device query on H20: 78 SMs (SGLang/DeepEP notes on H20)
        l2_cache_mb=60.0,  # estimate: public H20 spec tables list 60 MB L2
        intra_node_link=NVLINK4,  # NVIDIA H20 datasheet: NVLink 900 GB/s
        inter_node_link=IB_NDR,  # estimate: HGX H20 servers ship a 400 Gb/s NIC per GPU
        pcie=PCIE5,  # NVIDIA H20 datasheet: PCIe Gen5 128 GB/s
        # estimate: not rented on public clouds outside China; about half H100 SXM's list
        # (more memory, ~15% of the compute)
        cost_per_gpu_hour=1.50,
        aliases=("h20-96gb", "h20-sxm", "h20-sxm-96gb"),
    ),
    GPUSpec(
        name="gh200",
        display_name="NVIDIA GH200 96GB HBM3 (Grace Hopper)",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=96.0,  # NVIDIA GH200 Grace Hopper Superchip datasheet: 96 GB HBM3
        usable_memory_gib=97871 / 1024,  # nvidia-smi reports 97871 MiB on "NVIDIA GH200 480GB"
        hbm_tbps=4.0,  # NVIDIA GH200 datasheet: 4 TB/s (96 GB HBM3)
        # NVIDIA GH200 datasheet: same H100 compute (sparse BF16 1979*, FP8 3958*); halved.
        peak_tflops=_GH100_SXM_PEAKS,
        num_sms=132,  # CUDA/OpenCL device query on GH200 480GB: 132 SMs
        l2_cache_mb=50.0,  # estimate: the H100 SXM5 configuration (Hopper whitepaper: 50 MB L2)
        # No kernel tables borrowed: H100 SXM's memory is 3.35 TB/s and H200's 4.8, both too
        # far from 4.0 for memory-bound kernels.
        intra_node_link=NVLINK4,  # NVIDIA GH200 datasheet: NVLink 900 GB/s GPU to GPU (NVL2/NVL32)
        inter_node_link=IB_NDR,  # estimate: one ConnectX-7 400 Gb/s per superchip
        pcie=NVLINK_C2C,  # the GPU's host link is NVLink-C2C, not PCIe (GH200 datasheet)
        cost_per_gpu_hour=1.49,  # typical on-demand price, Lambda Cloud 1x GH200 list, 2025
        aliases=("gh200-96gb", "gh200-480gb", "gh200-120gb", "grace-hopper"),
    ),
    GPUSpec(
        name="gh200-144gb",
        display_name="NVIDIA GH200 144GB HBM3e (Grace Hopper)",
        vendor="nvidia",
        architecture="hopper",
        memory_gb=144.0,  # NVIDIA GH200 datasheet: 144 GB HBM3e
        usable_memory_gib=146831 / 1024,  # nvidia-smi reports 146831 MiB on "NVIDIA GH200 144G HBM3e"
        hbm_tbps=4.9,  # NVIDIA GH200 datasheet: 4.9 TB/s (144 GB HBM3e)
        # NVIDIA GH200 datasheet: same H100 compute; sparse figures halved.
        peak_tflops=_GH100_SXM_PEAKS,
        num_sms=132,  # same GH100 configuration as H100 SXM5 / H200: 132 SMs
        l2_cache_mb=50.0,  # estimate: the H100 SXM5 configuration (Hopper whitepaper: 50 MB L2)
        intra_node_link=NVLINK4,  # NVIDIA GH200 datasheet: NVLink 900 GB/s GPU to GPU
        inter_node_link=IB_NDR,  # estimate: one ConnectX-7 400 Gb/s per superchip
        pcie=NVLINK_C2C,  # the GPU's host link is NVLink-C2C, not PCIe (GH200 datasheet)
        cost_per_gpu_hour=3.50,  # estimate: no on-demand list checked; H200's price (same GPU and memory)
        aliases=("gh200-144g-hbm3e", "gh200-hbm3e", "gh200-144gb-hbm3e"),
        # H200's die and HBM3e stacks (141 of 144 GB exposed there, 4.8 vs 4.9 TB/s).
        kernel_tables_from="h200",
    ),
    GPUSpec(
        name="a100-80gb-sxm",
        display_name="NVIDIA A100 SXM4 80GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=80.0,  # NVIDIA A100 datasheet: 80 GB HBM2e
        # nvidia-smi reports 81920 MiB (modal-labs/modal-client PR #2797).
        usable_memory_gib=81920 / 1024,
        visible_memory_gib=A100_80GB_VISIBLE_GIB,
        hbm_tbps=2.039,  # NVIDIA A100 datasheet (80GB SXM): 2,039 GB/s
        # NVIDIA A100 datasheet: BF16/FP16 312, TF32 156, INT8 624 (dense), FP32 19.5. No FP8.
        peak_tflops=_GA100_PEAKS,
        num_sms=108,  # NVIDIA Ampere GA100 whitepaper: A100 has 108 SMs
        l2_cache_mb=40.0,  # NVIDIA Ampere whitepaper: 40 MB L2
        intra_node_link=NVLINK3,
        inter_node_link=IB_HDR,
        pcie=PCIE4,  # NVIDIA A100 datasheet: PCIe Gen4 64 GB/s (bidirectional)
        cost_per_gpu_hour=1.79,  # typical on-demand price, Lambda Cloud 8x A100 80GB SXM, 2025
        aliases=("a100", "a100-80gb", "a100-sxm", "a100-sxm4", "a100-sxm4-80gb", "a100-80gb-sxm4"),
    ),
    GPUSpec(
        name="a100-40gb",
        display_name="NVIDIA A100 SXM4 40GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=40.0,  # NVIDIA A100 datasheet: 40 GB HBM2
        usable_memory_gib=40960 / 1024,  # nvidia-smi 40960 MiB (modal-client PR #2797)
        visible_memory_gib=A100_40GB_VISIBLE_GIB,
        hbm_tbps=1.555,  # NVIDIA A100 datasheet (40GB): 1,555 GB/s
        # NVIDIA A100 datasheet (same compute as the 80 GB part).
        peak_tflops=_GA100_PEAKS,
        num_sms=108,  # NVIDIA Ampere whitepaper
        l2_cache_mb=40.0,  # NVIDIA Ampere whitepaper
        intra_node_link=NVLINK3,
        inter_node_link=IB_HDR,
        pcie=PCIE4,
        cost_per_gpu_hour=1.29,  # typical on-demand price, Lambda Cloud 1x A100 40GB SXM, 2025
        aliases=("a100-40gb-sxm", "a100-sxm4-40gb", "a100-40gb-sxm4"),
    ),
    GPUSpec(
        name="a100-80gb-pcie",
        display_name="NVIDIA A100 PCIe 80GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=80.0,  # NVIDIA A100 datasheet (80GB PCIe): 80 GB HBM2e
        usable_memory_gib=81920 / 1024,  # estimate: the same 80 GB part as the SXM4 board, 81920 MiB
        visible_memory_gib=A100_80GB_VISIBLE_GIB,  # the same part
        hbm_tbps=1.935,  # NVIDIA A100 datasheet (80GB PCIe): 1,935 GB/s
        # NVIDIA A100 datasheet: the SXM4 part's tensor peaks (BF16/FP16 312 dense) at a 300 W
        # limit, which long compute-bound work feels more than the SXM4's 400 W.
        peak_tflops=_GA100_PEAKS,
        num_sms=108,  # NVIDIA Ampere GA100 whitepaper: every A100 has 108 SMs
        l2_cache_mb=40.0,  # NVIDIA Ampere whitepaper: 40 MB L2
        # NVLink bridges join only pairs of cards (600 GB/s, NVIDIA A100 datasheet), so a TP
        # group of 4-8 talks over PCIe Gen4, as for h100-pcie.
        intra_node_link=PCIE4,
        inter_node_link=ETH_200G,
        pcie=PCIE4,  # NVIDIA A100 datasheet (PCIe): Gen4 64 GB/s (bidirectional)
        cost_per_gpu_hour=1.50,  # estimate: below the SXM4 80GB list above; neocloud PCIe offers, 2025
        aliases=("a100-pcie", "a100-pcie-80gb", "a100-80gb-pcie4", "a100pcie"),
    ),
    GPUSpec(
        name="a100-40gb-pcie",
        display_name="NVIDIA A100 PCIe 40GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=40.0,  # NVIDIA A100 datasheet (40GB PCIe): 40 GB HBM2
        usable_memory_gib=40960 / 1024,  # estimate: as the SXM4 40GB board, 40960 MiB
        visible_memory_gib=A100_40GB_VISIBLE_GIB,  # the same part
        hbm_tbps=1.555,  # NVIDIA A100 datasheet (40GB PCIe): 1,555 GB/s
        peak_tflops=_GA100_PEAKS,  # NVIDIA A100 datasheet: same tensor peaks, 250 W limit
        num_sms=108,  # NVIDIA Ampere whitepaper
        l2_cache_mb=40.0,  # NVIDIA Ampere whitepaper
        intra_node_link=PCIE4,  # bridged pairs only, as a100-80gb-pcie
        inter_node_link=ETH_200G,
        pcie=PCIE4,
        cost_per_gpu_hour=1.10,  # estimate: below the SXM4 40GB list above
        aliases=("a100-pcie-40gb", "a100-40gb-pcie4"),
    ),
    GPUSpec(
        name="a800-80gb-sxm",
        display_name="NVIDIA A800 SXM4 80GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=80.0,  # NVIDIA A800 datasheet: 80 GB HBM2e
        usable_memory_gib=81920 / 1024,  # nvidia-smi reports 81920 MiB on A800-SXM4-80GB (public logs)
        visible_memory_gib=A100_80GB_VISIBLE_GIB,  # A100's 80 GB part
        hbm_tbps=2.039,  # NVIDIA A800 datasheet (80GB SXM): 2,039 GB/s, as A100
        # NVIDIA A800 datasheet: A100's compute (BF16/FP16 312, TF32 156, INT8 624 dense,
        # FP32 19.5); only NVLink is cut. No FP8.
        peak_tflops=_GA100_PEAKS,
        num_sms=108,  # the A100 GA100 configuration: 108 SMs
        l2_cache_mb=40.0,  # NVIDIA Ampere whitepaper: 40 MB L2
        intra_node_link=NVLINK3_8LINKS,  # NVIDIA A800 datasheet: NVLink 400 GB/s bidirectional
        inter_node_link=IB_HDR,
        pcie=PCIE4,  # NVIDIA A800 datasheet: PCIe Gen4 64 GB/s
        cost_per_gpu_hour=1.79,  # estimate: not rented on public clouds outside China; A100 80GB SXM's list
        aliases=("a800", "a800-80gb", "a800-sxm", "a800-sxm4", "a800-sxm4-80gb", "a800-80gb-sxm4"),
        kernel_tables_from="a100-80gb-sxm",
    ),
    GPUSpec(
        name="l40s",
        display_name="NVIDIA L40S 48GB",
        vendor="nvidia",
        architecture="ada",
        memory_gb=48.0,  # NVIDIA L40S datasheet: 48 GB GDDR6 with ECC
        usable_memory_gib=46068 / 1024,  # nvidia-smi 46068 MiB (modal-client PR #2797)
        hbm_tbps=0.864,  # NVIDIA L40S datasheet: 864 GB/s
        # NVIDIA L40S datasheet, sparse figures halved: BF16/FP16 733* -> 362 (listed
        # 362.05), FP8/INT8 1466* -> 733, TF32 366* -> 183; FP32 91.6.
        peak_tflops={
            "fp32": 91.6,
            "tf32": 183.0,
            "bf16": 362.05,
            "fp16": 362.05,
            "fp8": 733.0,
            "int8": 733.0,
        },
        num_sms=142,  # NVIDIA Ada (AD102) whitepaper / L40S: 142 SMs
        l2_cache_mb=96.0,  # NVIDIA Ada whitepaper: AD102 96 MB L2
        intra_node_link=PCIE4,  # no NVLink on L40S (datasheet); peer traffic over PCIe Gen4
        inter_node_link=ETH_AWS_G6E,
        pcie=PCIE4,  # NVIDIA L40S datasheet: PCIe Gen4 x16
        cost_per_gpu_hour=1.86,  # typical on-demand price, AWS g6e.xlarge us-east-1 list, 2025
        aliases=("l40s-48gb",),
    ),
    GPUSpec(
        name="l40",
        display_name="NVIDIA L40 48GB",
        vendor="nvidia",
        architecture="ada",
        memory_gb=48.0,  # NVIDIA L40 datasheet: 48 GB GDDR6 with ECC
        usable_memory_gib=46068 / 1024,  # nvidia-smi reports 46068 MiB on L40 with ECC on (public logs)
        hbm_tbps=0.864,  # NVIDIA L40 datasheet: 864 GB/s
        # NVIDIA L40 datasheet, sparse figures halved: BF16/FP16 362.1* -> 181.05, FP8/INT8
        # 724* -> 362, TF32 181* -> 90.5; FP32 90.5. Half L40S's tensor rates on the same
        # AD102 (FP32-accumulate rate), FP8 included (Ada has FP8 tensor cores).
        peak_tflops={
            "fp32": 90.5,
            "tf32": 90.5,
            "bf16": 181.05,
            "fp16": 181.05,
            "fp8": 362.0,
            "int8": 362.0,
        },
        num_sms=142,  # NVIDIA Ada (AD102) whitepaper / L40: 142 SMs, as L40S
        l2_cache_mb=96.0,  # NVIDIA Ada whitepaper: AD102 96 MB L2
        intra_node_link=PCIE4,  # no NVLink on L40 (datasheet); peer traffic over PCIe Gen4
        inter_node_link=ETH_200G,
        pcie=PCIE4,  # NVIDIA L40 datasheet: PCIe Gen4 x16
        cost_per_gpu_hour=0.99,  # estimate: neocloud L40 offers run ~$1/h, 2025 (no hyperscaler list)
        aliases=("l40-48gb",),
    ),
    GPUSpec(
        name="l4",
        display_name="NVIDIA L4 24GB",
        vendor="nvidia",
        architecture="ada",
        memory_gb=24.0,  # NVIDIA L4 datasheet: 24 GB GDDR6
        usable_memory_gib=23034 / 1024,  # nvidia-smi 23034 MiB (modal-client PR #2797)
        hbm_tbps=0.3,  # NVIDIA L4 datasheet: 300 GB/s
        # NVIDIA L4 datasheet, sparse figures halved: BF16/FP16 242* -> 121, FP8/INT8
        # 485* -> 242.5, TF32 120* -> 60; FP32 30.3.
        peak_tflops={
            "fp32": 30.3,
            "tf32": 60.0,
            "bf16": 121.0,
            "fp16": 121.0,
            "fp8": 242.5,
            "int8": 242.5,
        },
        num_sms=58,  # NVIDIA Ada (AD104) in L4 configuration: 58 SMs
        l2_cache_mb=48.0,  # NVIDIA Ada whitepaper: AD104 48 MB L2
        intra_node_link=PCIE4,  # no NVLink (datasheet)
        inter_node_link=ETH_AWS_100G,
        pcie=PCIE4,  # NVIDIA L4 datasheet: PCIe Gen4 x16
        cost_per_gpu_hour=0.80,  # typical on-demand price, AWS g6.xlarge us-east-1 list, 2025
        aliases=("l4-24gb",),
    ),
    GPUSpec(
        name="a30",
        display_name="NVIDIA A30 24GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=24.0,  # NVIDIA A30 datasheet: 24 GB HBM2
        usable_memory_gib=24576 / 1024,  # estimate: 24 GiB as nvidia-smi lists HBM2 parts (no public log read)
        hbm_tbps=0.933,  # NVIDIA A30 datasheet: 933 GB/s
        # NVIDIA A30 datasheet, dense (sparse figures halved): BF16/FP16 165, TF32 82, INT8 330;
        # FP32 10.3. A GA100 with 56 SMs at a 165 W limit; no FP8.
        peak_tflops={"fp32": 10.3, "tf32": 82.0, "bf16": 165.0, "fp16": 165.0, "int8": 330.0},
        num_sms=56,  # NVIDIA A30: 3,584 FP32 cores = 56 GA100 SMs
        l2_cache_mb=24.0,  # NVIDIA A30: 24 MB L2 (half the GA100's 48 MB; A100 enables 40)
        # NVLink bridges join pairs only (200 GB/s, datasheet); a TP group of 4-8 uses PCIe Gen4.
        intra_node_link=PCIE4,
        inter_node_link=ETH_200G,
        pcie=PCIE4,  # NVIDIA A30 datasheet: PCIe Gen4 64 GB/s
        cost_per_gpu_hour=0.60,  # estimate: below the A10's list; few clouds rent A30s by the hour, 2025
        aliases=("a30-24gb", "a30-pcie"),
    ),
    GPUSpec(
        name="a10g",
        display_name="NVIDIA A10G 24GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=24.0,  # AWS EC2 G5 page: A10G with 24 GB GDDR6
        usable_memory_gib=23028 / 1024,  # nvidia-smi 23028 MiB on g5 (NVIDIA/DCGM issue #232)
        hbm_tbps=0.6,  # AWS/NVIDIA A10-class GA102: 600 GB/s
        # No public NVIDIA datasheet for the AWS-only A10G. Estimate from GA102 with 80 SMs
        # at ~1.71 GHz and GeForce-rate FP32-accumulate tensor math: ~70 BF16/FP16, ~35 TF32,
        # ~140 INT8, ~35 FP32 (commonly quoted A10G figures). No FP8.
        peak_tflops={"fp32": 35.0, "tf32": 35.0, "bf16": 70.0, "fp16": 70.0, "int8": 140.0},
        num_sms=80,  # estimate: commonly reported A10G configuration (GA102, 80 SMs)
        l2_cache_mb=6.0,  # NVIDIA Ampere GA102 whitepaper: 6 MB L2
        intra_node_link=PCIE4,  # no NVLink on g5 instances
        inter_node_link=ETH_AWS_100G,
        pcie=PCIE4,
        cost_per_gpu_hour=1.006,  # typical on-demand price, AWS g5.xlarge us-east-1 list, 2025
        aliases=("a10g-24gb",),
    ),
    GPUSpec(
        name="a10",
        display_name="NVIDIA A10 24GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=24.0,  # NVIDIA A10 datasheet: 24 GB GDDR6
        usable_memory_gib=23028 / 1024,  # nvidia-smi reports 23028 MiB on A10 (public logs), as A10G
        hbm_tbps=0.6,  # NVIDIA A10 datasheet: 600 GB/s
        # NVIDIA A10 datasheet, dense: BF16/FP16 125, TF32 62.5, INT8 250; FP32 31.2. No FP8.
        # 72 SMs at full-rate FP32 accumulate, where the a10g entry above (AWS's 80-SM part,
        # no datasheet) is estimated at the GeForce half rate: 70 there vs 125 here.
        peak_tflops={"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "int8": 250.0},
        num_sms=72,  # NVIDIA A10 (GA102): 72 SMs (9,216 CUDA cores)
        l2_cache_mb=6.0,  # NVIDIA Ampere GA102 whitepaper: 6 MB L2
        intra_node_link=PCIE4,  # no NVLink on A10 (datasheet)
        inter_node_link=ETH_200G,
        pcie=PCIE4,  # NVIDIA A10 datasheet: PCIe Gen4 x16
        cost_per_gpu_hour=0.75,  # typical on-demand price, Lambda Cloud 1x A10 list, 2025
        aliases=("a10-24gb", "a10-pcie"),
    ),
    GPUSpec(
        name="rtx-a6000",
        display_name="NVIDIA RTX A6000 48GB",
        vendor="nvidia",
        architecture="ampere",
        memory_gb=48.0,  # NVIDIA RTX A6000 datasheet: 48 GB GDDR6 with ECC
        usable_memory_gib=49140 / 1024,  # nvidia-smi reports 49140 MiB on RTX A6000 (public logs)
        hbm_tbps=0.768,  # NVIDIA RTX A6000 datasheet: 768 GB/s
        # NVIDIA Ampere GA102 whitepaper (RTX A6000 column), dense: BF16/FP16 with FP32
        # accumulate 154.8 (full rate on this professional card; datasheet 309.7* sparse),
        # TF32 77.4, INT8 309.7; FP32 38.7. No FP8.
        peak_tflops={"fp32": 38.7, "tf32": 77.4, "bf16": 154.8, "fp16": 154.8, "int8": 309.7},
        num_sms=84,  # NVIDIA Ampere GA102 whitepaper: RTX A6000 has 84 SMs
        l2_cache_mb=6.0,  # NVIDIA Ampere GA102 whitepaper: 6 MB L2
        # NVIDIA RTX A6000 datasheet: NVLink bridge 112.5 GB/s bidirectional, pairs of cards
        # only, so (as for h100-pcie) TP groups talk over PCIe Gen4.
        intra_node_link=PCIE4,
        inter_node_link=ETH_200G,
        pcie=PCIE4,  # NVIDIA RTX A6000 datasheet: PCIe Gen4 x16
        cost_per_gpu_hour=0.80,  # typical on-demand price, Lambda Cloud 1x A6000 list, 2025
        aliases=("a6000", "rtx-a6000-48gb"),
    ),
    GPUSpec(
        name="rtx-4090",
        display_name="NVIDIA GeForce RTX 4090 24GB",
        vendor="nvidia",
        architecture="ada",
        memory_gb=24.0,  # NVIDIA Ada whitepaper (RTX 4090): 24 GB GDDR6X
        usable_memory_gib=24564 / 1024,  # nvidia-smi reports 24564 MiB on RTX 4090 (public logs)
        hbm_tbps=1.008,  # NVIDIA Ada whitepaper (RTX 4090): 1,008 GB/s
        # NVIDIA Ada whitepaper appendix (RTX 4090), dense. GeForce runs FP16/BF16 with FP32
        # accumulate at half the FP16-accumulate rate (165.2 vs 330.3), and FP8 likewise
        # (330.3 vs 660.6); cuBLAS/PyTorch GEMMs accumulate in FP32, so those rates are used.
        # TF32 82.6, INT8 660.6 (INT32 accumulate, full rate); FP32 82.6.
        peak_tflops={
            "fp32": 82.6,
            "tf32": 82.6,
            "bf16": 165.2,
            "fp16": 165.2,
            "fp8": 330.3,
            "int8": 660.6,
        },
        num_sms=128,  # NVIDIA Ada whitepaper: RTX 4090 has 128 SMs
        l2_cache_mb=72.0,  # NVIDIA Ada whitepaper: RTX 4090 72 MB L2
        # No NVLink, and GeForce drivers disable PCIe P2P: NCCL stages through host memory,
        # so real collectives reach less than PCIe Gen4 (calibrate).
        intra_node_link=PCIE4,
        inter_node_link=ETH_200G,  # estimate
        pcie=PCIE4,  # NVIDIA Ada whitepaper (RTX 4090): PCIe Gen4 x16
        # estimate: RunPod lists RTX 4090 at ~$0.34 (community) to ~$0.69 (secure cloud), 2025
        cost_per_gpu_hour=0.69,
        aliases=("4090", "rtx4090-24gb", "geforce-rtx-4090"),
    ),
    GPUSpec(
        name="b200",
        display_name="NVIDIA B200 180GB",
        vendor="nvidia",
        architecture="blackwell",
        memory_gb=180.0,  # NVIDIA DGX/HGX B200 datasheet: 1,440 GB HBM3e for 8 GPUs
        usable_memory_gib=183359 / 1024,  # nvidia-smi 183359 MiB (NVIDIA/TensorRT-LLM #10278)
        # NVIDIA DGX B200 datasheet: 64 TB/s for 8 GPUs. Driver-reported bus width implies
        # ~7.7 TB/s (pytorch/ao PR #4002); calibration absorbs the difference.
        hbm_tbps=8.0,
        # NVIDIA HGX B200 datasheet (8 GPUs, sparse): FP4 144 PF, FP8 72 PF, BF16 36 PF,
        # TF32 18 PF, INT8 72 POPS, FP32 600 TF. Per GPU, dense = /8 /2.
        peak_tflops={
            "fp32": 75.0,
            "tf32": 1125.0,
            "bf16": 2250.0,
            "fp16": 2250.0,
            "fp8": 4500.0,
            "int8": 4500.0,
            "fp4": 9000.0,
        },
        num_sms=148,  # CUDA device query on B200: 148 SMs (pytorch/ao PR #4002)
        l2_cache_mb=126.5,  # CUDA device query on B200: 126.50 MB L2 (pytorch/ao PR #4002)
        intra_node_link=NVLINK5,
        inter_node_link=IB_NDR,  # DGX B200 datasheet: 8x ConnectX-7 400 Gb/s
        pcie=PCIE5,
        cost_per_gpu_hour=4.99,  # typical on-demand price, Lambda Cloud 8x B200 list, 2025
        aliases=("b200-sxm", "b200-180gb", "hgx-b200", "b200-sxm-180gb"),
    ),
    GPUSpec(
        name="gb200",
        display_name="NVIDIA GB200 (Blackwell GPU of a GB200 NVL72)",
        vendor="nvidia",
        architecture="blackwell",
        memory_gb=186.0,  # NVIDIA GB200 NVL72 datasheet: 13.4 TB HBM3e for 72 GPUs
        # Estimate: B200's nvidia-smi / datasheet ratio (183359 MiB / 180 GB) applied to 186 GB.
        usable_memory_gib=189471 / 1024,
        hbm_tbps=8.0,  # NVIDIA GB200 NVL72 datasheet: 576 TB/s for 72 GPUs
        # NVIDIA GB200 NVL72 datasheet (72 GPUs, sparse): FP4 1,440 PF, FP8/FP6 720 PF,
        # FP16/BF16 360 PF, TF32 180 PF, INT8 720 POPS, FP32 5,760 TF. Per GPU, dense = /72 /2.
        peak_tflops={
            "fp32": 80.0,
            "tf32": 1250.0,
            "bf16": 2500.0,
            "fp16": 2500.0,
            "fp8": 5000.0,
            "int8": 5000.0,
            "fp4": 10000.0,
        },
        num_sms=148,  # same Blackwell die as B200 (148 SMs)
        l2_cache_mb=126.5,  # same die as B200
        intra_node_link=NVLINK5,  # NVL72: 1.8 TB/s NVLink 5 per GPU within the rack
        inter_node_link=IB_NDR,
        pcie=NVLINK_C2C_GRACE_BLACKWELL,  # the GPU's host link (swap copies) is NVLink-C2C to Grace, not PCIe
        cost_per_gpu_hour=6.0,  # estimate: no public on-demand list price checked; override per plan
        aliases=("gb200-nvl72", "gb200-sxm"),
        kernel_tables_from="b200",
    ),
    GPUSpec(
        name="b300",
        display_name="NVIDIA B300 288GB (Blackwell Ultra)",
        vendor="nvidia",
        architecture="blackwell",
        memory_gb=288.0,  # NVIDIA Blackwell Ultra datasheet: 288 GB HBM3e per GPU
        usable_memory_gib=275040 / 1024,  # nvidia-smi 275040 MiB (aiconfigurator-core 0.12 b300_sxm.yaml)
        hbm_tbps=7.75,  # NVIDIA Blackwell Ultra datasheet: 62 TB/s for 8 GPUs (as b300_sxm.yaml)
        # NVIDIA Blackwell Ultra datasheet, dense per GPU (as aiconfigurator's b300_sxm.yaml):
        # FP4 14 PF, FP8 4.5 PF, BF16 2.25 PF, INT8 cut to 153.5 TOPS.
        peak_tflops={
            "fp32": 75.0,
            "tf32": 1125.0,
            "bf16": 2250.0,
            "fp16": 2250.0,
            "fp8": 4500.0,
            "int8": 153.5,
            "fp4": 14000.0,
        },
        num_sms=160,  # estimate: Blackwell Ultra enables 160 SMs (NVIDIA Blackwell Ultra blog)
        l2_cache_mb=126.5,  # estimate: B200's L2
        intra_node_link=NVLINK5,
        inter_node_link=IB_XDR800,
        pcie=PCIE5,  # estimate: B300 moves to PCIe Gen6 but host links stay Gen5 on most boards
        cost_per_gpu_hour=6.5,  # estimate: no public on-demand list price checked; override per plan
        aliases=("b300-sxm", "b300_sxm", "b300-288gb", "hgx-b300", "blackwell-ultra", "b300-sxm6-ac"),
    ),
    GPUSpec(
        name="gb300",
        display_name="NVIDIA GB300 (Blackwell Ultra GPU of a GB300 NVL72)",
        vendor="nvidia",
        architecture="blackwell",
        memory_gb=288.0,  # NVIDIA GB300 NVL72 datasheet: 20.7 TB HBM3e for 72 GPUs (288 GB each)
        usable_memory_gib=284208 / 1024,  # nvidia-smi 284208 MiB (aiconfigurator-core 0.12 gb300.yaml)
        hbm_tbps=8.0,  # NVIDIA GB300 NVL72 datasheet: 576 TB/s for 72 GPUs
        # NVIDIA GB300 NVL72 datasheet (72 GPUs): FP4 1,080 PF dense, FP8/FP6 720 PF sparse,
        # BF16 360 PF sparse, TF32 180 PF sparse, INT8 24 POPS, FP32 6 PF. Per GPU dense:
        # FP4 15 PF, FP8 5 PF, BF16 2.5 PF, TF32 1.25 PF, INT8 0.167 POPS, FP32 83 TF.
        peak_tflops={
            "fp32": 83.0,
            "tf32": 1250.0,
            "bf16": 2500.0,
            "fp16": 2500.0,
            "fp8": 5000.0,
            "int8": 167.0,
            "fp4": 15000.0,
        },
        num_sms=160,  # estimate: the Blackwell Ultra die of B300
        l2_cache_mb=126.5,  # estimate: B200's L2
        intra_node_link=NVLINK5,  # NVL72: 1.8 TB/s NVLink 5 per GPU within the rack
        inter_node_link=IB_XDR800,  # ConnectX-8, 800 Gb/s per GPU
        pcie=NVLINK_C2C_GRACE_BLACKWELL,  # the GPU's host link (swap copies) is NVLink-C2C to Grace, not PCIe
        cost_per_gpu_hour=7.0,  # estimate: no public on-demand list price checked; override per plan
        aliases=("gb300-nvl72", "gb300-sxm"),
        kernel_tables_from="b300",
    ),
    GPUSpec(
        name="rtx-pro-6000",
        display_name="NVIDIA RTX PRO 6000 Blackwell Server Edition 96GB",
        vendor="nvidia",
        architecture="blackwell",
        memory_gb=96.0,  # NVIDIA RTX PRO 6000 Blackwell datasheet: 96 GB GDDR7 with ECC
        usable_memory_gib=97887 / 1024,  # nvidia-smi 97887 MiB (aiconfigurator-core 0.12 rtx_pro_6000_server.yaml)
        hbm_tbps=1.792,  # NVIDIA RTX PRO 6000 Blackwell: 512-bit GDDR7 at 28 Gbps = 1,792 GB/s
        # NVIDIA RTX PRO 6000 Blackwell: 4,000 AI TOPS (FP4, 2:4 sparse) and 125 TFLOPS FP32 at
        # ~2.6 GHz boost; dense FP4 2,000, FP8/INT8 1,000, BF16/FP16 500, TF32 250. (The
        # aiconfigurator system file scales these to the 2,430 MHz its node reported: 1,871 /
        # 936 / 468; the shipped kernel tables carry whatever clock the card held.)
        peak_tflops={
            "fp32": 125.0,
            "tf32": 250.0,
            "bf16": 500.0,
            "fp16": 500.0,
            "fp8": 1000.0,
            "int8": 1000.0,
            "fp4": 2000.0,
        },
        num_sms=188,  # NVIDIA RTX PRO 6000 Blackwell: 24,064 CUDA cores = 188 SMs of GB202
        l2_cache_mb=128.0,  # GB202 with its full 128 MB L2 (RTX PRO 6000 launch coverage)
        intra_node_link=PCIE5,  # no NVLink: peer traffic over PCIe Gen5 (rtx_pro_6000_server.yaml)
        inter_node_link=ETH_200G,  # estimate: a PCIe server with one 200 Gb/s NIC per GPU
        pcie=PCIE5,  # NVIDIA RTX PRO 6000 Blackwell: PCIe Gen5 x16
        cost_per_gpu_hour=1.8,  # estimate: no public on-demand list price checked; override per plan
        aliases=("rtx_pro_6000_server", "rtx-pro-6000-server", "rtx-pro-6000-blackwell",
                 "rtx-pro-6000-blackwell-server", "rtx-pro-6000-96gb", "rtxpro6000",
                 "rtx-pro-6000-blackwell-server-edition"),  # nvidia-smi's name, without "NVIDIA"
    ),
    GPUSpec(
        name="mi300x",
        display_name="AMD Instinct MI300X 192GB",
        vendor="amd",
        architecture="cdna3",
        memory_gb=192.0,  # AMD Instinct MI300X datasheet: 192 GB HBM3
        usable_memory_gib=191.98,  # estimate: HIP/torch total for 192 GiB of HBM3
        hbm_tbps=5.3,  # AMD Instinct MI300X datasheet: 5.3 TB/s
        # AMD Instinct MI300X datasheet, dense: FP16/BF16 1307.4, FP8/INT8 2614.9,
        # TF32 653.7, FP32 matrix 163.4. No FP4 on CDNA3.
        peak_tflops=_MI300_PEAKS,
        num_sms=304,  # AMD MI300X datasheet / rocminfo: 304 compute units
        # rocminfo: 256 MB Infinity Cache, the last-level cache shared by all CUs (the role
        # NVIDIA's L2 plays); the CDNA3 L2 proper is only 4 MB per XCD.
        l2_cache_mb=256.0,
        intra_node_link=INFINITY_FABRIC,
        inter_node_link=IB_NDR,  # estimate: typical MI300X platforms ship a 400 Gb/s NIC per GPU
        pcie=PCIE5,  # AMD MI300X datasheet: PCIe Gen5 x16
        cost_per_gpu_hour=2.50,  # typical on-demand price, neocloud lists (e.g. Vultr), 2025
        aliases=("mi300", "instinct-mi300x", "mi300x-192gb"),
    ),
    GPUSpec(
        name="mi325x",
        display_name="AMD Instinct MI325X 256GB",
        vendor="amd",
        architecture="cdna3",
        memory_gb=256.0,  # AMD Instinct MI325X datasheet: 256 GB HBM3E
        usable_memory_gib=255.98,  # estimate: as mi300x, HIP/torch total for 256 GiB of HBM3E
        hbm_tbps=6.0,  # AMD Instinct MI325X datasheet: 6 TB/s
        # AMD Instinct MI325X datasheet, dense: the MI300X's CDNA3 compute (FP16/BF16 1307.4,
        # FP8/INT8 2614.9, TF32 653.7, FP32 matrix 163.4); only memory grows. No FP4.
        peak_tflops=_MI300_PEAKS,
        num_sms=304,  # AMD MI325X datasheet: 304 compute units, as MI300X
        l2_cache_mb=256.0,  # AMD MI325X datasheet: 256 MB Infinity Cache (see mi300x)
        intra_node_link=INFINITY_FABRIC,  # AMD MI325X datasheet: 896 GB/s aggregate, as MI300X
        inter_node_link=IB_NDR,  # estimate: typical MI325X platforms ship a 400 Gb/s NIC per GPU
        pcie=PCIE5,  # AMD MI325X datasheet: PCIe Gen5 x16
        cost_per_gpu_hour=2.75,  # estimate: no public on-demand list checked; MI300X's 2.50 plus 10%
        aliases=("instinct-mi325x", "mi325x-256gb", "mi325"),
    ),
    GPUSpec(
        name="mi355x",
        display_name="AMD Instinct MI355X 288GB",
        vendor="amd",
        architecture="cdna4",
        memory_gb=288.0,  # AMD Instinct MI355X datasheet: 288 GB HBM3E
        usable_memory_gib=287.98,  # estimate: as mi300x, HIP/torch total (ROCm specs: 288 GiB VRAM)
        hbm_tbps=8.0,  # AMD Instinct MI355X datasheet: 8 TB/s
        peak_tflops=_cdna4_peaks(2.4),  # see _cdna4_peaks
        num_sms=256,  # ROCm GPU specifications: 256 compute units (32 per XCD)
        l2_cache_mb=256.0,  # ROCm GPU specifications: 256 MiB Infinity Cache (L3; see mi300x)
        intra_node_link=INFINITY_FABRIC_CDNA4,
        inter_node_link=IB_NDR,  # estimate: a 400 Gb/s NIC per GPU, as MI300X platforms
        pcie=PCIE5,  # AMD Instinct MI355X datasheet: PCIe Gen5 x16
        cost_per_gpu_hour=3.50,  # estimate: no public on-demand list checked; override per plan
        aliases=("instinct-mi355x", "mi355x-288gb", "mi355"),
    ),
    GPUSpec(
        name="mi350x",
        display_name="AMD Instinct MI350X 288GB",
        vendor="amd",
        architecture="cdna4",
        memory_gb=288.0,  # AMD Instinct MI350X datasheet: 288 GB HBM3E
        usable_memory_gib=287.98,  # estimate: as mi355x
        hbm_tbps=8.0,  # AMD Instinct MI350X datasheet: 8 TB/s
        peak_tflops=_cdna4_peaks(2.2),  # the MI355X's die at its lower clock (air-cooled, 1,000 W)
        num_sms=256,  # ROCm GPU specifications: 256 compute units, as MI355X
        l2_cache_mb=256.0,  # ROCm GPU specifications: 256 MiB Infinity Cache
        intra_node_link=INFINITY_FABRIC_CDNA4,
        inter_node_link=IB_NDR,  # estimate: as mi355x
        pcie=PCIE5,  # AMD Instinct MI350X datasheet: PCIe Gen5 x16
        cost_per_gpu_hour=3.00,  # estimate: no public on-demand list checked; override per plan
        aliases=("instinct-mi350x", "mi350x-288gb", "mi350"),
    ),
]

GPU_CATALOG: dict[str, GPUSpec] = {g.name: g for g in _GPUS}


def _key(name: str) -> str:
    """Lookup key that ignores case, vendor prefixes and separators ("NVIDIA H100_SXM")."""
    s = name.strip().lower()
    for prefix in ("nvidia ", "nvidia-", "amd instinct ", "amd ", "amd-"):
        s = s.removeprefix(prefix)
    return re.sub(r"[^a-z0-9.]", "", s)


_GPU_INDEX = AliasIndex(
    "GPU", GPU_CATALOG, lambda g: (g.name, g.display_name, *g.aliases), _key, cutoff=0.5,
    field="hardware.gpu",
    fix="use a name from `simulate list gpus`; a GPU not listed is one GPUSpec entry in "
        "simulator/hardware/catalog.py")


def list_gpus() -> list[str]:
    return sorted(GPU_CATALOG)


def get_gpu(name: str) -> GPUSpec:
    """Look a GPU up by canonical name, alias, or torch/nvidia-smi device name."""
    return _GPU_INDEX.get(name)

"""GPU catalog: the datasheet figures the cost and memory models are built on.

Adding a GPU is one entry in ``_GPUS``. Every figure carries its source, because a
simulator is only as credible as its constants; figures we could not source are marked
"estimate". Peaks are DENSE (datasheets headline the 2:4-sparsity numbers, twice as
large); achievable throughput is lower and comes from calibration, not from here.
Prices are defaults for cost reports, meant to be overridden by the user.
"""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from simulator.catalog import AliasIndex
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
    memory_gb: float = Field(gt=0)  # datasheet capacity, GB (1e9 B)
    usable_memory_gib: float = Field(gt=0)  # driver-reported total, GiB
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

    @model_validator(mode="after")
    def _check_peaks(self) -> GPUSpec:
        bad = sorted(set(self.peak_tflops) - set(TENSOR_DTYPES))
        if bad:
            raise ValueError(f"unknown peak_tflops keys {bad}; allowed: {list(TENSOR_DTYPES)}")
        if any(v <= 0 for v in self.peak_tflops.values()):
            raise ValueError("peak_tflops values must be > 0 (omit unsupported dtypes)")
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


# ---------------------------------------------------------------------------------------
# Links. Bandwidths are per GPU per direction; NVIDIA quotes NVLink bidirectional totals.
# Latencies are alpha terms for the collective model: estimates, to be replaced by
# measured nccl-tests / rccl-tests tables when present.
# ---------------------------------------------------------------------------------------
_NVLINK3 = LinkSpec(
    name="NVLink3 (NVSwitch)",
    bandwidth_gbps=300.0,  # NVIDIA A100 datasheet: 600 GB/s bidirectional -> 300 per direction
    latency_us=2.0,  # estimate
)
_NVLINK4 = LinkSpec(
    name="NVLink4 (NVSwitch)",
    bandwidth_gbps=450.0,  # NVIDIA H100/H200 datasheet: 900 GB/s bidirectional -> 450 each way
    latency_us=2.0,  # estimate
)
_NVLINK5 = LinkSpec(
    name="NVLink5 (NVSwitch)",
    bandwidth_gbps=900.0,  # NVIDIA HGX B200 datasheet: 1.8 TB/s per GPU bidirectional
    latency_us=2.0,  # estimate
)
_INFINITY_FABRIC = LinkSpec(
    name="AMD Infinity Fabric (MI300X OAM mesh)",
    # AMD Instinct MI300X datasheet: 7 links, 896 GB/s aggregate peak (bidirectional) ->
    # 448 GB/s per direction. A single peer link is 64 GB/s/dir; rings over the full mesh
    # reach far less than the aggregate, which calibration captures.
    bandwidth_gbps=448.0,
    latency_us=3.0,  # estimate
)
_PCIE4 = LinkSpec(
    name="PCIe Gen4 x16",
    bandwidth_gbps=32.0,  # PCI-SIG Gen4: 16 GT/s x16 ~ 31.5 GB/s per direction
    latency_us=10.0,  # estimate (host-staged P2P / DMA setup)
)
_PCIE5 = LinkSpec(
    name="PCIe Gen5 x16",
    bandwidth_gbps=64.0,  # PCI-SIG Gen5: 32 GT/s x16 ~ 63 GB/s per direction
    latency_us=10.0,  # estimate
)
_IB_XDR800 = LinkSpec(
    name="800 Gb/s per GPU (ConnectX-8 SuperNIC)",
    bandwidth_gbps=100.0,  # NVIDIA HGX B300: 800 Gb/s per GPU = 100 GB/s
    latency_us=5.0,  # estimate, as NDR
)
_IB_NDR = LinkSpec(
    name="InfiniBand NDR 400 Gb/s (ConnectX-7)",
    bandwidth_gbps=50.0,  # 400 Gb/s per GPU (DGX H100 / DGX B200: one CX-7 per GPU) = 50 GB/s
    latency_us=5.0,  # estimate (NCCL inter-node step, not raw wire latency)
)
_IB_HDR = LinkSpec(
    name="InfiniBand HDR 200 Gb/s (ConnectX-6)",
    bandwidth_gbps=25.0,  # DGX A100 datasheet: 8x 200 Gb/s HDR, one per GPU = 25 GB/s
    latency_us=5.0,  # estimate
)
_ETH_200G = LinkSpec(
    name="200 GbE RoCE (1 NIC per GPU)",
    bandwidth_gbps=25.0,  # estimate: typical PCIe-card server, 200 Gb/s per GPU
    latency_us=10.0,  # estimate
)
_ETH_AWS_G6E = LinkSpec(
    name="AWS ENA/EFA 400 Gb/s per 8 GPUs",
    bandwidth_gbps=6.25,  # AWS g6e.48xlarge: 400 Gbps for 8 L40S = 50 Gb/s per GPU
    latency_us=20.0,  # estimate (Ethernet/EFA)
)
_ETH_AWS_100G = LinkSpec(
    name="AWS ENA/EFA 100 Gb/s per 8 GPUs",
    bandwidth_gbps=1.5625,  # AWS g5.48xlarge / g6.48xlarge: 100 Gbps for 8 GPUs = 12.5 Gb/s each
    latency_us=20.0,  # estimate
)

# Named links, for the scenario's `hardware.intra_node_link` / `inter_node_link` overrides.
LINKS: dict[str, LinkSpec] = {
    "nvlink3": _NVLINK3,
    "nvlink4": _NVLINK4,
    "nvlink5": _NVLINK5,
    "infinity-fabric": _INFINITY_FABRIC,
    "pcie4": _PCIE4,
    "pcie5": _PCIE5,
    "ib-ndr": _IB_NDR,
    "ib-hdr": _IB_HDR,
    "eth-200g": _ETH_200G,
}


_GPUS: list[GPUSpec] = [
    GPUSpec(
        name="h100-sxm",
        display_name="NVIDIA H100 SXM5 80GB",
        vendor="nvidia",
        memory_gb=80.0,  # NVIDIA H100 Tensor Core GPU datasheet (SXM): 80 GB HBM3
        # nvidia-smi reports 81559 MiB (modal-labs/modal-client PR #2797 lists per-GPU
        # totals). cudaMemGetInfo's total is ~0.5 GiB lower (a vLLM H100 OOM reports
        # "total capacity of 79.11 GiB"); that gap belongs in the runtime-overhead term.
        usable_memory_gib=81559 / 1024,
        hbm_tbps=3.35,  # NVIDIA H100 datasheet (SXM): 3.35 TB/s
        # NVIDIA H100 datasheet (SXM) quotes sparse figures; dense = half: BF16/FP16 1979* ->
        # 989, FP8/INT8 3958* -> 1979, TF32 989* -> 494.5; FP32 (non-tensor) 67.
        # DESIGN.md section 5 uses 989 / 1979.
        peak_tflops={
            "fp32": 67.0,
            "tf32": 494.5,
            "bf16": 989.0,
            "fp16": 989.0,
            "fp8": 1979.0,
            "int8": 1979.0,
        },
        num_sms=132,  # NVIDIA Hopper architecture whitepaper: H100 SXM5 has 132 SMs
        l2_cache_mb=50.0,  # NVIDIA Hopper whitepaper: 50 MB L2
        intra_node_link=_NVLINK4,
        inter_node_link=_IB_NDR,
        pcie=_PCIE5,  # H100 datasheet: PCIe Gen5 128 GB/s (bidirectional)
        cost_per_gpu_hour=2.99,  # typical on-demand price, Lambda Cloud 8x H100 SXM list, 2025
        aliases=("h100", "h100-80gb", "h100-sxm5", "h100-sxm5-80gb", "h100-80gb-hbm3"),
    ),
    GPUSpec(
        name="h100-pcie",
        display_name="NVIDIA H100 PCIe 80GB",
        vendor="nvidia",
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
        intra_node_link=_PCIE5,
        inter_node_link=_ETH_200G,
        pcie=_PCIE5,
        cost_per_gpu_hour=2.49,  # typical on-demand price, Lambda Cloud 1x H100 PCIe list, 2025
        aliases=("h100-pcie-80gb", "h100pcie"),
    ),
    GPUSpec(
        name="h200",
        display_name="NVIDIA H200 SXM 141GB",
        vendor="nvidia",
        memory_gb=141.0,  # NVIDIA H200 datasheet (SXM): 141 GB HBM3e
        usable_memory_gib=143771 / 1024,  # nvidia-smi reports 143771 MiB on H200 SXM
        hbm_tbps=4.8,  # NVIDIA H200 datasheet (SXM): 4.8 TB/s
        # NVIDIA H200 datasheet (SXM): same GH100 compute as H100 SXM; sparse figures halved.
        peak_tflops={
            "fp32": 67.0,
            "tf32": 494.5,
            "bf16": 989.0,
            "fp16": 989.0,
            "fp8": 1979.0,
            "int8": 1979.0,
        },
        num_sms=132,  # NVIDIA H200 (GH100, same die config as H100 SXM5): 132 SMs
        l2_cache_mb=50.0,  # NVIDIA Hopper whitepaper: 50 MB L2
        intra_node_link=_NVLINK4,  # NVIDIA H200 datasheet: NVLink 900 GB/s
        inter_node_link=_IB_NDR,
        pcie=_PCIE5,  # NVIDIA H200 datasheet: PCIe Gen5 128 GB/s
        cost_per_gpu_hour=3.50,  # typical on-demand price, neocloud lists (e.g. Nebius), 2025
        aliases=("h200-sxm", "h200-141gb", "h200-sxm-141gb"),
    ),
    GPUSpec(
        name="a100-80gb-sxm",
        display_name="NVIDIA A100 SXM4 80GB",
        vendor="nvidia",
        memory_gb=80.0,  # NVIDIA A100 datasheet: 80 GB HBM2e
        # nvidia-smi reports 81920 MiB (modal-labs/modal-client PR #2797); torch OOM messages
        # show cudaMemGetInfo totals of 79.1-79.3 GiB.
        usable_memory_gib=81920 / 1024,
        hbm_tbps=2.039,  # NVIDIA A100 datasheet (80GB SXM): 2,039 GB/s
        # NVIDIA A100 datasheet: BF16/FP16 312, TF32 156, INT8 624 (dense), FP32 19.5. No FP8.
        peak_tflops={"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        num_sms=108,  # NVIDIA Ampere GA100 whitepaper: A100 has 108 SMs
        l2_cache_mb=40.0,  # NVIDIA Ampere whitepaper: 40 MB L2
        intra_node_link=_NVLINK3,
        inter_node_link=_IB_HDR,
        pcie=_PCIE4,  # NVIDIA A100 datasheet: PCIe Gen4 64 GB/s (bidirectional)
        cost_per_gpu_hour=1.79,  # typical on-demand price, Lambda Cloud 8x A100 80GB SXM, 2025
        aliases=("a100", "a100-80gb", "a100-sxm", "a100-sxm4", "a100-sxm4-80gb", "a100-80gb-sxm4"),
    ),
    GPUSpec(
        name="a100-40gb",
        display_name="NVIDIA A100 SXM4 40GB",
        vendor="nvidia",
        memory_gb=40.0,  # NVIDIA A100 datasheet: 40 GB HBM2
        usable_memory_gib=40960 / 1024,  # nvidia-smi 40960 MiB (modal-client PR #2797)
        hbm_tbps=1.555,  # NVIDIA A100 datasheet (40GB): 1,555 GB/s
        # NVIDIA A100 datasheet (same compute as the 80 GB part).
        peak_tflops={"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
        num_sms=108,  # NVIDIA Ampere whitepaper
        l2_cache_mb=40.0,  # NVIDIA Ampere whitepaper
        intra_node_link=_NVLINK3,
        inter_node_link=_IB_HDR,
        pcie=_PCIE4,
        cost_per_gpu_hour=1.29,  # typical on-demand price, Lambda Cloud 1x A100 40GB SXM, 2025
        aliases=("a100-40gb-sxm", "a100-sxm4-40gb", "a100-40gb-sxm4"),
    ),
    GPUSpec(
        name="l40s",
        display_name="NVIDIA L40S 48GB",
        vendor="nvidia",
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
        intra_node_link=_PCIE4,  # no NVLink on L40S (datasheet); peer traffic over PCIe Gen4
        inter_node_link=_ETH_AWS_G6E,
        pcie=_PCIE4,  # NVIDIA L40S datasheet: PCIe Gen4 x16
        cost_per_gpu_hour=1.86,  # typical on-demand price, AWS g6e.xlarge us-east-1 list, 2025
        aliases=("l40s-48gb",),
    ),
    GPUSpec(
        name="l4",
        display_name="NVIDIA L4 24GB",
        vendor="nvidia",
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
        intra_node_link=_PCIE4,  # no NVLink (datasheet)
        inter_node_link=_ETH_AWS_100G,
        pcie=_PCIE4,  # NVIDIA L4 datasheet: PCIe Gen4 x16
        cost_per_gpu_hour=0.80,  # typical on-demand price, AWS g6.xlarge us-east-1 list, 2025
        aliases=("l4-24gb",),
    ),
    GPUSpec(
        name="a10g",
        display_name="NVIDIA A10G 24GB",
        vendor="nvidia",
        memory_gb=24.0,  # AWS EC2 G5 page: A10G with 24 GB GDDR6
        usable_memory_gib=23028 / 1024,  # nvidia-smi 23028 MiB on g5 (NVIDIA/DCGM issue #232)
        hbm_tbps=0.6,  # AWS/NVIDIA A10-class GA102: 600 GB/s
        # No public NVIDIA datasheet for the AWS-only A10G. Estimate from GA102 with 80 SMs
        # at ~1.71 GHz and GeForce-rate FP32-accumulate tensor math: ~70 BF16/FP16, ~35 TF32,
        # ~140 INT8, ~35 FP32 (commonly quoted A10G figures). No FP8.
        peak_tflops={"fp32": 35.0, "tf32": 35.0, "bf16": 70.0, "fp16": 70.0, "int8": 140.0},
        num_sms=80,  # estimate: commonly reported A10G configuration (GA102, 80 SMs)
        l2_cache_mb=6.0,  # NVIDIA Ampere GA102 whitepaper: 6 MB L2
        intra_node_link=_PCIE4,  # no NVLink on g5 instances
        inter_node_link=_ETH_AWS_100G,
        pcie=_PCIE4,
        cost_per_gpu_hour=1.006,  # typical on-demand price, AWS g5.xlarge us-east-1 list, 2025
        aliases=("a10g-24gb",),
    ),
    GPUSpec(
        name="b200",
        display_name="NVIDIA B200 180GB",
        vendor="nvidia",
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
        intra_node_link=_NVLINK5,
        inter_node_link=_IB_NDR,  # DGX B200 datasheet: 8x ConnectX-7 400 Gb/s
        pcie=_PCIE5,
        cost_per_gpu_hour=4.99,  # typical on-demand price, Lambda Cloud 8x B200 list, 2025
        aliases=("b200-sxm", "b200-180gb", "hgx-b200"),
    ),
    GPUSpec(
        name="gb200",
        display_name="NVIDIA GB200 (Blackwell GPU of a GB200 NVL72)",
        vendor="nvidia",
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
        intra_node_link=_NVLINK5,  # NVL72: 1.8 TB/s NVLink 5 per GPU within the rack
        inter_node_link=_IB_NDR,
        pcie=_PCIE5,
        cost_per_gpu_hour=6.0,  # estimate: no public on-demand list price checked; override per plan
        aliases=("gb200-nvl72", "gb200-sxm"),
        kernel_tables_from="b200",
    ),
    GPUSpec(
        name="b300",
        display_name="NVIDIA B300 288GB (Blackwell Ultra)",
        vendor="nvidia",
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
        intra_node_link=_NVLINK5,
        inter_node_link=_IB_XDR800,
        pcie=_PCIE5,  # estimate: B300 moves to PCIe Gen6 but host links stay Gen5 on most boards
        cost_per_gpu_hour=6.5,  # estimate: no public on-demand list price checked; override per plan
        aliases=("b300-sxm", "b300_sxm", "b300-288gb", "hgx-b300", "blackwell-ultra"),
    ),
    GPUSpec(
        name="gb300",
        display_name="NVIDIA GB300 (Blackwell Ultra GPU of a GB300 NVL72)",
        vendor="nvidia",
        memory_gb=288.0,  # NVIDIA GB300 NVL72 datasheet: 20.7 TB HBM3e for 72 GPUs (288 GB each)
        usable_memory_gib=275040 / 1024,  # estimate: B300's nvidia-smi total (same 288 GB HBM3e stacks)
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
        intra_node_link=_NVLINK5,  # NVL72: 1.8 TB/s NVLink 5 per GPU within the rack
        inter_node_link=_IB_XDR800,  # ConnectX-8, 800 Gb/s per GPU
        pcie=_PCIE5,
        cost_per_gpu_hour=7.0,  # estimate: no public on-demand list price checked; override per plan
        aliases=("gb300-nvl72", "gb300-sxm"),
        kernel_tables_from="b300",
    ),
    GPUSpec(
        name="mi300x",
        display_name="AMD Instinct MI300X 192GB",
        vendor="amd",
        memory_gb=192.0,  # AMD Instinct MI300X datasheet: 192 GB HBM3
        usable_memory_gib=191.98,  # estimate: HIP/torch total for 192 GiB of HBM3
        hbm_tbps=5.3,  # AMD Instinct MI300X datasheet: 5.3 TB/s
        # AMD Instinct MI300X datasheet, dense: FP16/BF16 1307.4, FP8/INT8 2614.9,
        # TF32 653.7, FP32 matrix 163.4. No FP4 on CDNA3.
        peak_tflops={
            "fp32": 163.4,
            "tf32": 653.7,
            "bf16": 1307.4,
            "fp16": 1307.4,
            "fp8": 2614.9,
            "int8": 2614.9,
        },
        num_sms=304,  # AMD MI300X datasheet / rocminfo: 304 compute units
        # rocminfo: 256 MB Infinity Cache, the last-level cache shared by all CUs (the role
        # NVIDIA's L2 plays); the CDNA3 L2 proper is only 4 MB per XCD.
        l2_cache_mb=256.0,
        intra_node_link=_INFINITY_FABRIC,
        inter_node_link=_IB_NDR,  # estimate: typical MI300X platforms ship a 400 Gb/s NIC per GPU
        pcie=_PCIE5,  # AMD MI300X datasheet: PCIe Gen5 x16
        cost_per_gpu_hour=2.50,  # typical on-demand price, neocloud lists (e.g. Vultr), 2025
        aliases=("mi300", "instinct-mi300x", "mi300x-192gb"),
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
    fix="use one of the known names, or add a GPUSpec entry to simulator/hardware.py")


def list_gpus() -> list[str]:
    return sorted(GPU_CATALOG)


def get_gpu(name: str) -> GPUSpec:
    """Look a GPU up by canonical name, alias, or torch/nvidia-smi device name."""
    return _GPU_INDEX.get(name)

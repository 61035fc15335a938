"""Interconnects: bandwidth per GPU per direction (NVIDIA quotes NVLink bidirectional totals)
and a per-transfer latency, each figure with its source."""

from __future__ import annotations

from simulator.hardware.spec import LinkSpec

# Links. Bandwidths are per GPU per direction; NVIDIA quotes NVLink bidirectional totals.
# Latencies are alpha terms for the collective model: estimates, to be replaced by
# measured nccl-tests / rccl-tests tables when present.
NVLINK3 = LinkSpec(
    name="NVLink3 (NVSwitch)",
    bandwidth_gbps=300.0,  # NVIDIA A100 datasheet: 600 GB/s bidirectional -> 300 per direction
    latency_us=2.0,  # estimate
)
NVLINK4 = LinkSpec(
    name="NVLink4 (NVSwitch)",
    bandwidth_gbps=450.0,  # NVIDIA H100/H200 datasheet: 900 GB/s bidirectional -> 450 each way
    latency_us=2.0,  # estimate
)
NVLINK5 = LinkSpec(
    name="NVLink5 (NVSwitch)",
    bandwidth_gbps=900.0,  # NVIDIA HGX B200 datasheet: 1.8 TB/s per GPU bidirectional
    latency_us=2.0,  # estimate
)
NVLINK4_8LINKS = LinkSpec(
    name="NVLink4 (NVSwitch, 8 links: H800)",
    # NVIDIA H800 product brief: NVLink 400 GB/s bidirectional (8 of H100's 18 links) -> 200
    # per direction. DeepSeek-V3 technical report (arXiv 2412.19437) measures ~160 GB/s.
    bandwidth_gbps=200.0,
    latency_us=2.0,  # estimate, as NVLink4
)
NVLINK3_8LINKS = LinkSpec(
    name="NVLink3 (NVSwitch, 8 links: A800)",
    bandwidth_gbps=200.0,  # NVIDIA A800 datasheet: NVLink 400 GB/s bidirectional -> 200 each way
    latency_us=2.0,  # estimate, as NVLink3
)
NVLINK_C2C = LinkSpec(
    name="NVLink-C2C (Grace CPU to Hopper GPU)",
    bandwidth_gbps=450.0,  # NVIDIA GH200 datasheet: NVLink-C2C 900 GB/s bidirectional
    latency_us=2.0,  # estimate
)
NVLINK_C2C_GRACE_BLACKWELL = LinkSpec(
    name="NVLink-C2C (Grace CPU to two Blackwell GPUs)",
    # NVIDIA GB200/GB300 NVL72 datasheets: one Grace CPU reaches its two GPUs over a 900 GB/s
    # bidirectional NVLink-C2C. Estimate: 450 GB/s per direction shared by the two, 225 each.
    bandwidth_gbps=225.0,
    latency_us=2.0,  # estimate
)
INFINITY_FABRIC = LinkSpec(
    name="AMD Infinity Fabric (MI300X OAM mesh)",
    # AMD Instinct MI300X datasheet: 7 links, 896 GB/s aggregate peak (bidirectional) ->
    # 448 GB/s per direction. A single peer link is 64 GB/s/dir; rings over the full mesh
    # reach far less than the aggregate, which calibration captures.
    bandwidth_gbps=448.0,
    latency_us=3.0,  # estimate
)
INFINITY_FABRIC_CDNA4 = LinkSpec(
    name="AMD Infinity Fabric (MI350-series OAM mesh)",
    # AMD Instinct MI350 series datasheets: 7 links of 153.6 GB/s, 1075.2 GB/s aggregate peak
    # (bidirectional) -> 537.6 GB/s per direction, read as the MI300X mesh is.
    bandwidth_gbps=537.6,
    latency_us=3.0,  # estimate, as the MI300X mesh
)
PCIE4 = LinkSpec(
    name="PCIe Gen4 x16",
    bandwidth_gbps=32.0,  # PCI-SIG Gen4: 16 GT/s x16 ~ 31.5 GB/s per direction
    latency_us=10.0,  # estimate (host-staged P2P / DMA setup)
)
PCIE5 = LinkSpec(
    name="PCIe Gen5 x16",
    bandwidth_gbps=64.0,  # PCI-SIG Gen5: 32 GT/s x16 ~ 63 GB/s per direction
    latency_us=10.0,  # estimate
)
IB_XDR800 = LinkSpec(
    name="800 Gb/s per GPU (ConnectX-8 SuperNIC)",
    bandwidth_gbps=100.0,  # NVIDIA HGX B300: 800 Gb/s per GPU = 100 GB/s
    latency_us=5.0,  # estimate, as NDR
)
IB_NDR = LinkSpec(
    name="InfiniBand NDR 400 Gb/s (ConnectX-7)",
    bandwidth_gbps=50.0,  # 400 Gb/s per GPU (DGX H100 / DGX B200: one CX-7 per GPU) = 50 GB/s
    latency_us=5.0,  # estimate (NCCL inter-node step, not raw wire latency)
)
IB_HDR = LinkSpec(
    name="InfiniBand HDR 200 Gb/s (ConnectX-6)",
    bandwidth_gbps=25.0,  # DGX A100 datasheet: 8x 200 Gb/s HDR, one per GPU = 25 GB/s
    latency_us=5.0,  # estimate
)
ETH_200G = LinkSpec(
    name="200 GbE RoCE (1 NIC per GPU)",
    bandwidth_gbps=25.0,  # estimate: typical PCIe-card server, 200 Gb/s per GPU
    latency_us=10.0,  # estimate
)
ETH_AWS_G6E = LinkSpec(
    name="AWS ENA/EFA 400 Gb/s per 8 GPUs",
    bandwidth_gbps=6.25,  # AWS g6e.48xlarge: 400 Gbps for 8 L40S = 50 Gb/s per GPU
    latency_us=20.0,  # estimate (Ethernet/EFA)
)
ETH_AWS_100G = LinkSpec(
    name="AWS ENA/EFA 100 Gb/s per 8 GPUs",
    bandwidth_gbps=1.5625,  # AWS g5.48xlarge / g6.48xlarge: 100 Gbps for 8 GPUs = 12.5 Gb/s each
    latency_us=20.0,  # estimate
)

# Named links, for the scenario's `hardware.intra_node_link` / `inter_node_link` overrides.
# The links above that only catalog entries use (H800/A800 8-link NVLink, NVLink-C2C) are
# not named here: every name here is also a `kv_transfer.link` choice, which the
# README's scenario reference lists.
LINKS: dict[str, LinkSpec] = {
    "nvlink3": NVLINK3,
    "nvlink4": NVLINK4,
    "nvlink5": NVLINK5,
    "infinity-fabric": INFINITY_FABRIC,
    "pcie4": PCIE4,
    "pcie5": PCIE5,
    "ib-ndr": IB_NDR,
    "ib-hdr": IB_HDR,
    "eth-200g": ETH_200G,
}

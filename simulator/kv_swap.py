"""Host-memory swap space for preempted sequences' KV blocks, and what moving them costs.

vLLM's v0 engine (`--preemption-mode swap`, `--swap-space GiB`) and DistServe's decode
instances keep a pinned host buffer per GPU; a preempted sequence's blocks are copied
there over the GPU's host link and copied back when it resumes. Each GPU holds its own
shard (its heads and layers), so the copies of a TP group run in parallel, each over
its own link.
"""

from __future__ import annotations

from simulator.hardware.spec import LinkSpec
from simulator.memory import GIB

# Estimate: pinned host<->device copies reach about 0.8 of a PCIe link's rate (~25 of
# Gen4 x16's 32 GB/s, ~50 of Gen5's 64 GB/s in CUDA's bandwidthTest); vLLM copies one
# block of one layer at a time, which would read lower still for small blocks.
SWAP_LINK_EFFICIENCY = 0.8


def host_swap_blocks(swap_space_gib: float, block_size: int, kv_bytes_per_token: float, pp: int) -> int:
    """Blocks of one virtual engine's swap space (`kv_bytes_per_token` per GPU, as the
    GPU cache is sized); a pipeline's stages split the space as they split the GPU's."""
    if swap_space_gib <= 0 or kv_bytes_per_token <= 0:
        return 0
    return int(swap_space_gib * GIB // (block_size * kv_bytes_per_token)) // pp


def seconds_per_block(block_size: int, kv_bytes_per_token: float, link: LinkSpec) -> float:
    """Time to copy one block between a GPU and host memory over `link` (its host link)."""
    return block_size * kv_bytes_per_token / (link.bandwidth_gbps * 1e9 * SWAP_LINK_EFFICIENCY)

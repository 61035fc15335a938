"""KV-cache transfer time between a prefill and a decode instance (DESIGN.md §4).

time = prompt tokens × KV bytes per token per GPU / link bandwidth + fixed latency.

Every GPU has its own link, and the TP/PP shards move in parallel, so the bytes that
count are one GPU's share: the larger of a sending GPU's shard (prefill layout) and a
receiving GPU's shard (decode layout). A decode instance with fewer GPUs than the
prefill instance receives more per GPU, and that side then sets the time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.config import DisaggregationConfig
from simulator.hardware import LINKS, GPUSpec, LinkSpec
from simulator.memory import kv_bytes_per_token_per_gpu
from simulator.models import ModelSpec


@dataclass(frozen=True)
class KVTransfer:
    """Transfer times for every (prefill instance, decode instance) pair."""

    bytes_per_token: float  # per GPU: the larger of the two pools' shards
    bandwidth: tuple[tuple[float, ...], ...]  # B/s, [prefill][decode]
    latency: tuple[tuple[float, ...], ...]  # s, [prefill][decode]
    links: tuple[tuple[str, ...], ...]  # link names, for the summary
    protocol: str = "connector"  # who copies and when (config.KVTransferConfig.protocol)

    def seconds(self, tokens: int, prefill: int, decode: int) -> float:
        """Time to move the KV of `tokens` tokens from prefill instance to decode instance."""
        return tokens * self.bytes_per_token / self.bandwidth[prefill][decode] + self.latency[prefill][decode]


def instance_nodes(cfg: DisaggregationConfig, gpus_per_node: int) -> tuple[list[set[int]], list[set[int]]]:
    """Nodes each instance occupies. Instances are placed in units, as an operator racks a
    prefill:decode ratio: the pools' counts over their greatest common divisor give one
    unit's mix (4 prefill and 2 decode instances are two units of 2 + 1), and units are
    packed onto GPUs one after another, each unit's prefill instances first; an instance
    that fits in one node starts on the next node rather than straddle two (its TP and
    expert all-to-alls are priced within a node). So N copies of a unit (a plan's N units)
    are laid out as N times the one unit."""
    pre, dec = cfg.prefill, cfg.decode
    units = math.gcd(pre.replicas, dec.replicas)
    prefill_nodes: list[set[int]] = []
    decode_nodes: list[set[int]] = []
    first = 0
    for _ in range(units):
        for pool, nodes in ((pre, prefill_nodes), (dec, decode_nodes)):
            size = pool.tp * pool.pp * pool.dp
            for _ in range(pool.replicas // units):
                if size <= gpus_per_node and first // gpus_per_node != (first + size - 1) // gpus_per_node:
                    first = (first // gpus_per_node + 1) * gpus_per_node
                nodes.append({g // gpus_per_node for g in range(first, first + size)})
                first += size
    return prefill_nodes, decode_nodes


def _link(cfg: DisaggregationConfig, gpu: GPUSpec, same_node: bool, other: GPUSpec) -> LinkSpec:
    """The link between two instances: the named one, else NVLink within a node, else the
    network, the slower of the two GPUs' NICs where the pools run different GPUs."""
    name = cfg.kv_transfer.link
    if name != "auto":
        return LINKS[name]
    if same_node:
        return gpu.intra_node_link
    return min(gpu.inter_node_link, other.inter_node_link, key=lambda link: link.bandwidth_gbps)


def build_kv_transfer(cfg: DisaggregationConfig, model: ModelSpec, gpu: GPUSpec, kv_dtype: str,
                      gpus_per_node: int, decode_gpu: GPUSpec) -> KVTransfer:
    """The transfer model of a disaggregated layout; `gpu` (the prefill pool's) and
    `decode_gpu` carry the scenario's link overrides. Pools on different GPU types share
    no node."""
    mixed = decode_gpu.name != gpu.name
    per_token = max(kv_bytes_per_token_per_gpu(model, kv_dtype, cfg.prefill.tp, cfg.prefill.pp),
                    kv_bytes_per_token_per_gpu(model, kv_dtype, cfg.decode.tp, cfg.decode.pp))
    kt = cfg.kv_transfer
    prefill_nodes, decode_nodes = instance_nodes(cfg, gpus_per_node)
    bw, lat, names = [], [], []
    for p in prefill_nodes:
        row_bw, row_lat, row_names = [], [], []
        for d in decode_nodes:
            link = _link(cfg, gpu, len(p | d) == 1 and not mixed, decode_gpu)
            row_bw.append((kt.bandwidth_gbps or link.bandwidth_gbps) * 1e9)
            row_lat.append(kt.latency_ms * 1e-3 if kt.latency_ms is not None else link.latency_us * 1e-6)
            row_names.append(link.name)
        bw.append(tuple(row_bw))
        lat.append(tuple(row_lat))
        names.append(tuple(row_names))
    return KVTransfer(per_token, tuple(bw), tuple(lat), tuple(names), kt.protocol)

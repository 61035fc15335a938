"""GPU memory plan of one replica: weights, activations, runtime reserve, and the KV cache.

Follows vLLM's accounting (DESIGN.md §4): the engine may use gpu_memory_utilization of
the device; weights, the peak activation of a profiling forward pass and non-torch
runtime memory come off the top, and the rest becomes KV blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simulator.dtypes import DTYPE_BYTES, stored_weight_bytes
from simulator.errors import DoesNotFitError, KVBelowMaxModelLenError
from simulator.hardware import GPUSpec
from simulator.kv_cache import blocks_beside
from simulator.models import ModelSpec

GIB = 1024**3


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory breakdown (GiB) and the resulting KV capacity of one replica."""

    gpu_memory_gib: float
    utilization: float
    weights_gib: float
    activation_gib: float
    runtime_gib: float
    kv_gib: float
    kv_bytes_per_token: float  # per GPU, for this replica's TP/PP shard
    block_size: int
    num_blocks: int
    # Hybrid linear-attention models: the fixed recurrent state one sequence holds (per GPU),
    # reserved as whole KV blocks out of the same pool (see sequence_state_bytes_per_gpu).
    state_bytes_per_seq: float = 0.0
    # The weights one decode token reads on this GPU: all of them for a dense model, the
    # rest plus its top-k routed experts' share for MoE, less the input embedding table
    # of which it reads one row (a decode step's HBM floor).
    weights_read_per_token_gib: float = 0.0
    # Sliding-window models: groups of windowed layers, and the blocks one window spans
    # (sliding_window_groups); each running sequence holds that many per group.
    window: tuple[int, int] = (0, 0)

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def state_blocks(self) -> int:
        """KV blocks each admitted sequence's recurrent state takes (0 without linear layers)."""
        if not self.state_bytes_per_seq:
            return 0
        return math.ceil(self.state_bytes_per_seq / (self.block_size * self.kv_bytes_per_token))

    def beside(self, tokens: int) -> int:
        """Blocks a sequence of `tokens` tokens holds besides its KV blocks: a recurrent
        state, and its last window in each group of sliding-window layers."""
        return blocks_beside(self.state_blocks, self.window, self.block_size, tokens)

    def sequences_at(self, tokens: int) -> int:
        """How many sequences of `tokens` tokens the cache holds at once, states and windows included."""
        return self.num_blocks // (-(-tokens // self.block_size) + self.beside(tokens))

    def holds(self, max_model_len: int) -> bool:
        """vLLM starts only with a KV cache of at least one max_model_len request (and what it holds beside it)."""
        return self.num_blocks > 0 and self.capacity_tokens >= (max_model_len + self.beside(max_model_len)
                                                                 * self.block_size)

    @property
    def free_gib(self) -> float:
        """Memory outside the engine's budget (1 − utilization)."""
        return self.gpu_memory_gib * (1 - self.utilization)

    def table(self) -> str:
        rows = [
            ("GPU memory", self.gpu_memory_gib),
            (f"  budget at gpu_memory_utilization={self.utilization:g}", self.gpu_memory_gib * self.utilization),
            ("  weights (per GPU)", self.weights_gib),
            ("  activations (peak of a profiling pass)", self.activation_gib),
            ("  runtime reserve (CUDA context, graphs, NCCL)", self.runtime_gib),
            ("  KV cache", self.kv_gib),
            ("  free (outside the budget)", self.free_gib),
        ]
        if self.state_bytes_per_seq:
            rows.insert(-1, ("    of it, recurrent state or windows per sequence", self.state_bytes_per_seq / GIB))
        return "\n".join(f"    {name:<48} {value:9.2f} GiB" for name, value in rows)


def _round_up(n: int, tile: int) -> int:
    return -(-n // tile) * tile


def expert_padding(model: ModelSpec, tp: int, tile: tuple[int, int] | None) -> float:
    """Growth of the routed experts when the MoE kernel pads each expert's per-GPU
    intermediate width and the hidden width to multiples of `tile` (intermediate, hidden;
    1 without a tile)."""
    if not tile or not model.is_moe:
        return 1.0
    inter_tile, hidden_tile = tile
    inter = max(1, model.moe_ffn_size // tp)
    return (_round_up(inter, inter_tile) * _round_up(model.hidden_size, hidden_tile)
            / (inter * model.hidden_size))


# vLLM's MXFP4 MoE on Blackwell (FlashInfer/TRT-LLM kernels) allocates each expert with its
# intermediate and hidden widths rounded up to 256 (vllm model_executor/layers/quantization/
# mxfp4.py): gpt-oss's 2880 becomes 3072. On Ampere and Ada it runs Marlin, whose kernel
# needs the intermediate width a multiple of 128 and the hidden one of 256 (the same file:
# "n % 256 == 0 and k % 128 == 0"): gpt-oss-120b's experts become 2944 x 3072, and vLLM
# 0.10.1, which still ran Marlin on Hopper, logs 65.97 GiB loaded on one H100
# (vllm-project/vllm#23278) against 65.8 for that padding. From vLLM 0.12, which ships the
# Triton path, Hopper runs it (intermediate to 64, hidden as is: nothing for gpt-oss at TP1)
# and keeps the checkpoint's size (docs/fidelity.md, GPUStack section), unless the run
# selects Marlin (`model.expert_kernel: marlin`, vLLM's VLLM_MXFP4_USE_MARLIN=1; `auto`
# under an older `engine_version`, simulator/cost/releases.py).
MXFP4_BLACKWELL_TILE = (256, 256)
MXFP4_MARLIN_TILE = (128, 256)


def moe_kernel_tile(model: ModelSpec, expert_weight_dtype: str | None,
                    gpu: GPUSpec, expert_kernel: str = "auto") -> tuple[int, int] | None:
    """The tile the serving MoE kernel pads expert weights to, where it is known."""
    if not (model.native_expert_dtype == "fp4" and expert_weight_dtype == "fp4"):
        return None
    if expert_kernel == "marlin":
        return MXFP4_MARLIN_TILE
    if gpu.peak_tflops.get("fp4", 0) > 0:
        return MXFP4_BLACKWELL_TILE
    return MXFP4_MARLIN_TILE if gpu.architecture in ("ampere", "ada") else None


def weight_bytes_per_gpu(model: ModelSpec, weight_dtype: str, tp: int, pp: int,
                         expert_weight_dtype: str | None = None,
                         expert_tile: tuple[int, int] | None = None,
                         dp: int = 1, expert_parallel: bool = False) -> float:
    """Decoder weights in the weight dtype (routed experts in theirs, padded to the MoE
    kernel's tile when it has one), with their quantisation scales; embeddings and LM head
    stay 16-bit when quantised. Under attention data parallelism every rank holds the
    rest of the model (split tp ways) and a dp x tp-th of the routed experts (whole
    experts under expert parallelism, padded at their full width)."""
    head_params = model.vocab_size * model.hidden_size * (1 if model.tied_embeddings else 2)
    experts = model.expert_param_count
    body_params = model.param_count - head_params - experts
    head_bytes = max(2.0, DTYPE_BYTES[weight_dtype])
    expert_dtype = expert_weight_dtype or weight_dtype
    if expert_dtype == model.native_expert_dtype and model.native_expert_bits:
        expert_bytes = model.native_expert_bits / 8
    else:
        expert_bytes = stored_weight_bytes(expert_dtype)
    width_split = 1 if expert_parallel else tp * dp
    experts_stored = experts * expert_bytes * expert_padding(model, width_split, expert_tile) / dp
    replicated = model.replicated_params * (tp - 1) * stored_weight_bytes(weight_dtype)  # the copies past one
    return (body_params * stored_weight_bytes(weight_dtype) + experts_stored
            + head_params * head_bytes + replicated) / (tp * pp)


def kv_bytes_per_token_per_gpu(model: ModelSpec, kv_dtype: str, tp: int, pp: int) -> float:
    """KV heads are split across TP ranks, replicated when TP exceeds their count.

    MLA's latent is shared by all heads, so every TP rank caches all of it (vLLM); so is
    DeepSeek-V3.2's indexer key cache, always FP8 whatever the latent's format (and
    MiniMax-M3's, one key head in the KV cache's format). Only
    full-attention layers size a block: sliding-window layers take blocks of the same
    pages for their last window per request (sliding_window_groups)."""
    if model.compressed:  # the compressed entries (and indexer keys), on every TP rank
        return model.compressed.kv_bytes_per_token(-(-model.compressed.csa_layers // pp),
                                                   -(-model.compressed.hca_layers // pp))
    layers = -(-model.kv_layers // pp)
    # vLLM sums the attention's and the indexer key cache's pages per block
    index = -(-model.indexed_layers // pp) * model.indexer_key_bytes(DTYPE_BYTES[kv_dtype]) if model.is_sparse else 0
    if model.is_sparse and model.is_mla:
        return layers * model.latent_bytes(DTYPE_BYTES[kv_dtype]) + index
    if model.is_mla:
        return layers * (model.kv_lora_rank + model.qk_rope_head_dim) * DTYPE_BYTES[kv_dtype]
    _, kv_heads, head_dim = model.full_attention_dims
    return layers * _kv_width_per_gpu(model, kv_heads, head_dim, tp) * DTYPE_BYTES[kv_dtype] + index


def _kv_width_per_gpu(model: ModelSpec, kv_heads: int, head_dim: int, tp: int) -> int:
    """K and V elements one token keeps in one layer on one GPU: KV heads split over TP,
    replicated whole once TP exceeds them, each head's K head_dim and V value_dim wide."""
    return max(1, kv_heads // tp) * (head_dim + model.value_dim(head_dim))


def sequence_state_bytes_per_gpu(model: ModelSpec, tp: int, pp: int) -> float:
    """What one sequence holds on one GPU whatever its length. Linear attention's recurrent
    state: the conv state and the delta-rule matrices of its stage's linear-attention layers,
    split by head over TP as vLLM does. DeepSeek-V4's window of raw entries on every layer and
    its compressors' running state, on every TP rank (one KV head).

    Reserved here as whole blocks of the one KV pool per admitted sequence (MemoryPlan.
    state_blocks). vLLM's hybrid allocator instead groups the linear layers into KV-cache
    groups of the attention layers' count, raises the attention block size until one block
    holds a layer's state (its page size), and gives each sequence one block per linear
    group from the shared pool: the same bytes per sequence up to that page rounding."""
    if model.compressed:
        c = model.compressed
        return c.state_bytes(-(-model.num_layers // pp), -(-c.csa_layers // pp), -(-c.hca_layers // pp),
                             model.head_dim)
    if not model.linear_layers:
        return 0.0
    return -(-model.linear_layers // pp) * model.linear_state_bytes_per_layer() / tp


def sliding_window_groups(model: ModelSpec, pp: int, block_size: int, tp: int = 1) -> tuple[int, int]:
    """How a sliding-window model's windowed layers take KV blocks: (groups, blocks a window spans).

    vLLM's hybrid KV manager (docs/design/hybrid_kv_cache_manager.md) makes one block the
    pages of as many layers as the smaller layer type has (the full-attention layers, in
    every catalog model), so the windowed layers form ceil(windowed / full) groups, the last
    padded, and each group takes blocks of the one pool for the tokens still in its window:
    ceil((window - 1) / block) + 1 at most (vLLM frees the blocks that fall out). Where the
    full-attention layers are the more numerous, one group is counted at their page size
    (an overcount by full / windowed). Where a windowed layer's KV per token differs from a
    full-attention layer's (Gemma 4), vLLM scales the windowed layers' block size so the pages
    match: their blocks hold block_size x full / windowed tokens (MiMo-V2-Flash's windowed
    layers, with twice the KV heads, half)."""
    if not model.sliding_layers:
        return 0, 0
    full = -(-model.kv_layers // pp)
    windowed = -(-model.sliding_layers // pp)
    tokens = block_size
    if model.has_global_geometry:
        ratio = (_kv_width_per_gpu(model, *model.full_attention_dims[1:], tp)
                 / _kv_width_per_gpu(model, model.num_kv_heads, model.head_dim, tp))
        tokens = max(1, round(block_size * ratio))
    return -(-windowed // full), -(-(model.sliding_window - 1) // tokens) + 1


# What the driver keeps out of CUDA's reach, where the catalog has no measured
# `visible_memory_gib`: vLLM sizes its budget from torch's total (cudaMemGetInfo), below the
# nvidia-smi total the catalog lists. H100 80GB: 79.18 and
# 79.22 GiB in vLLM logs (llm-d-benchmark's empirical memory results; vllm-project/vllm#10511)
# against 81,559 MiB = 79.65 GiB; RTX 4090: 23.55-23.58 GiB against 23.99.
CUDA_INVISIBLE_GIB = 0.45

# Bytes per (sequence x vocabulary entry) that vLLM's profiling pass allocates when it runs the
# sampler on max_num_seqs dummy sequences: fp32 logits and their softmax, log-probs, the sort
# for top-k/top-p (values and int64 indices), penalty counts. Measured, not derived: vLLM
# logs' "peak activation memory" less the last hidden states, over max_num_seqs x vocab, is
# 38.2-38.5 B for Llama-3.1-8B, Llama-3.3-70B (TP2), Qwen3-0.6B, Qwen3-32B and gpt-oss-20b on
# H100 at 1024 sequences (llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md),
# and 38 B for Llama-3-8B at vLLM 0.6's 256 (vllm-project/vllm#10511).
SAMPLER_PROFILE_BYTES = 38.3


def activation_bytes_per_gpu(model: ModelSpec, tp: int, max_batched_tokens: int, max_num_seqs: int) -> float:
    """Peak of vLLM's profiling pass: the widest layer's intermediates during the dummy
    forward pass, or the sampler's dummy run on max_num_seqs sequences on top of the last
    hidden states, whichever is larger (the forward intermediates are freed by then)."""
    v_dim = model.head_dim if model.is_mla else model.value_dim(model.head_dim)
    qkv = (model.num_heads * model.head_dim + model.num_kv_heads * (model.head_dim + v_dim)) // tp
    mlp = model.mlp_matrices * model.ffn_per_token // tp  # fused MoE keeps every routed copy
    if model.linear_layers:  # a Gated DeltaNet in_proj's q, k, v, z is wider than Qwen3-Next's qkv
        qkv = max(qkv, (2 * model.linear_key_size + 2 * model.linear_value_size) // tp)
    forward = max_batched_tokens * (2 * model.hidden_size + max(qkv, mlp)) * 2
    sampler = max_batched_tokens * model.hidden_size * 2 + SAMPLER_PROFILE_BYTES * max_num_seqs * model.vocab_size
    return max(forward, sampler)


def plan_memory(
    model: ModelSpec,
    gpu: GPUSpec,
    *,
    tp: int,
    pp: int,
    weight_dtype: str,
    kv_dtype: str,
    expert_weight_dtype: str | None = None,
    utilization: float,
    runtime_reserve_gib: float,
    block_size: int,
    max_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    kv_cache_tokens: int | None = None,
    dp: int = 1,
    expert_parallel: bool = False,
    expert_kernel: str = "auto",
    gpus_per_node: int = 8,
) -> MemoryPlan:
    """Build the memory plan of one GPU (of one attention-DP rank), or raise
    DoesNotFitError with the breakdown and the changes that would fit; `gpus_per_node`
    bounds the tensor-parallel sizes it suggests."""
    setup = MemorySetup(model, gpu, tp, pp, dp, weight_dtype, expert_weight_dtype, kv_dtype, utilization,
                        runtime_reserve_gib, block_size, max_batched_tokens, max_num_seqs, max_model_len,
                        kv_cache_tokens, expert_parallel, expert_kernel)
    plan = setup.plan()
    if plan.holds(max_model_len):
        return plan
    from simulator import memory_fit  # only on the error path (it imports this module)

    where = f"model {model.name} on {gpu.name} with tp={tp}, pp={pp}" + (f", dp={dp}" if dp > 1 else "")
    if plan.num_blocks <= 0:
        raise DoesNotFitError(
            f"does not fit: no memory left for the KV cache\n{plan.table()}",
            where=where, fix=memory_fit.fit_fix(setup, gpus_per_node),
        )
    # The tokens one sequence can hold beside its recurrent state and windows (all of them without).
    beside = plan.beside(max_model_len) * plan.block_size
    capacity = plan.capacity_tokens - beside
    more = ([f"memory.kv_cache_tokens: {max_model_len + beside} or more"] if kv_cache_tokens is not None
            else memory_fit.fit_fixes(setup, gpus_per_node))
    fixes = [f"model.max_model_len: {capacity} or less", *more] if capacity > 0 else more
    held = (f"the KV cache holds {capacity} tokens, fewer than max_model_len={max_model_len}" if capacity > 0 else
            f"the KV cache ({plan.capacity_tokens} tokens) is no larger than what one sequence holds beside its "
            f"tokens ({beside} tokens' worth of blocks: its recurrent state or sliding windows), so not one "
            f"max_model_len={max_model_len} sequence fits")
    raise KVBelowMaxModelLenError(
        f"{held} (vLLM refuses to start in this case)\n{plan.table()}",
        capacity_tokens=capacity,
        where=where,
        fix=memory_fit.one_of(fixes),
    )


@dataclass(frozen=True)
class MemorySetup:
    """Everything one GPU's memory plan depends on, so a fix can change one field and re-plan."""

    model: ModelSpec
    gpu: GPUSpec
    tp: int
    pp: int
    dp: int
    weight_dtype: str
    expert_weight_dtype: str | None
    kv_dtype: str
    utilization: float
    runtime_reserve_gib: float
    block_size: int
    max_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    kv_cache_tokens: int | None
    expert_parallel: bool
    expert_kernel: str

    def plan(self) -> MemoryPlan:
        """vLLM's accounting: the budget less weights, activations and the runtime is KV."""
        model, gpu = self.model, self.gpu
        total = gpu.visible_memory_gib or gpu.usable_memory_gib - CUDA_INVISIBLE_GIB
        tile = moe_kernel_tile(model, self.expert_weight_dtype, gpu, self.expert_kernel)
        weights = weight_bytes_per_gpu(model, self.weight_dtype, self.tp, self.pp, self.expert_weight_dtype,
                                       tile, self.dp, self.expert_parallel) / GIB
        act = activation_bytes_per_gpu(model, self.tp, self.max_batched_tokens, self.max_num_seqs) / GIB
        per_token = kv_bytes_per_token_per_gpu(model, self.kv_dtype, self.tp, self.pp)
        kv = total * self.utilization - weights - act - self.runtime_reserve_gib
        if self.kv_cache_tokens is not None:
            blocks = -(-self.kv_cache_tokens // self.block_size)
            kv = blocks * self.block_size * per_token / GIB
        else:
            blocks = int(max(kv, 0.0) * GIB // (self.block_size * per_token))
        read = weights
        if model.is_moe:  # the same shards with only a token's k routed experts per layer
            routed = model.model_copy(update={"num_experts": model.experts_per_token})
            read = weight_bytes_per_gpu(routed, self.weight_dtype, self.tp, self.pp, self.expert_weight_dtype,
                                        tile, self.dp, self.expert_parallel) / GIB
        if not model.tied_embeddings:  # a token looks up one row of its own input embedding
            read -= (model.vocab_size * model.hidden_size * max(2.0, DTYPE_BYTES[self.weight_dtype])
                     / (self.tp * self.pp) / GIB)
        return MemoryPlan(total, self.utilization, weights, act, self.runtime_reserve_gib, kv, per_token,
                          self.block_size, blocks, sequence_state_bytes_per_gpu(model, self.tp, self.pp), read,
                          sliding_window_groups(model, self.pp, self.block_size, self.tp))

    def starts(self) -> bool:
        """Whether vLLM would start: a KV cache of at least max_model_len tokens (its own
        size, not a forced kv_cache_tokens)."""
        return replace(self, kv_cache_tokens=None).plan().holds(self.max_model_len)

"""The op decomposition of one scheduler iteration, shared by every cost back end.

A back end only answers "how long does this op take"; which ops run, with which
shapes and how often, is decided here once (DESIGN.md §5). That keeps the roofline and
the calibrated back ends comparable op by op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.dtypes import DTYPE_BYTES, gemm_compute_dtype


@dataclass(frozen=True, slots=True)
class IterationShape:
    """What one iteration computes, reduced to the sums the cost model needs.

    num_tokens: Σ new tokens over scheduled sequences (the GEMM M).
    num_emit: sequences that sample a token this iteration (LM-head rows).
    num_decode / decode_context: decode sequences and Σ of their KV lengths before the step.
    prefill_chunks: (new tokens, prior context) for each prefill or chunk.
    """

    num_tokens: int
    num_emit: int
    num_decode: int = 0
    decode_context: int = 0
    prefill_chunks: tuple[tuple[int, int], ...] = ()

    @property
    def num_seqs(self) -> int:
        return self.num_decode + len(self.prefill_chunks)


@dataclass(frozen=True, slots=True)
class Op:
    """One kernel family invocation, `count` times per iteration.

    family: gemm | attn_prefill | attn_decode | elementwise | allreduce | allgather | p2p
    shape: (M, N, K) for gemm; (tokens, context_or_seqs, heads, kv_heads, head_dim) for
    attention; (bytes, ranks) for collectives.
    """

    name: str
    family: str
    flops: float
    bytes: float
    count: int
    shape: tuple
    dtype: str
    kernels: int = 1  # separate kernel launches this op takes (fixed-cost floor each)


@dataclass(frozen=True)
class ShardedModel:
    """Per-GPU dimensions of a model under a given TP/PP split and dtypes."""

    layers_per_stage: int
    pp: int
    tp: int
    hidden: int
    heads: int  # attention heads per GPU
    kv_heads: int  # KV heads per GPU (replicated when TP > KV heads)
    head_dim: int
    ffn: int  # intermediate size per GPU
    gated_mlp: bool
    vocab: int  # vocabulary rows per GPU
    weight_bytes: float
    head_weight_bytes: float  # embeddings/LM head stay 16-bit under FP8/INT4 quantisation
    act_bytes: float
    kv_bytes: float
    gemm_dtype: str
    rotary: bool  # RoPE kernel per layer (not with learned position embeddings, e.g. OPT)
    tp_link: str  # "intra" or "inter"
    pp_link: str
    num_experts: int = 0  # MoE: routed experts per layer (0 = dense MLP)
    experts_per_token: int = 0
    moe_ffn: int = 0  # one expert's intermediate size per GPU (experts are TP-sharded)

    @property
    def total_layer_passes(self) -> int:
        """Layer executions one micro-batch waits for: stages run in lockstep, so the
        slowest (largest) stage sets each stage's time."""
        return self.layers_per_stage * self.pp

    @classmethod
    def build(cls, model, tp: int, pp: int, weight_dtype: str, activation_dtype: str,
              kv_dtype: str, gpus_per_node: int) -> ShardedModel:
        return cls(
            layers_per_stage=math.ceil(model.num_layers / pp),
            pp=pp,
            tp=tp,
            hidden=model.hidden_size,
            heads=model.num_heads // tp,
            kv_heads=max(1, model.num_kv_heads // tp),
            head_dim=model.head_dim,
            ffn=model.ffn_size // tp,
            gated_mlp=model.gated_mlp,
            vocab=math.ceil(model.vocab_size / tp),
            weight_bytes=DTYPE_BYTES[weight_dtype],
            head_weight_bytes=max(2.0, DTYPE_BYTES[weight_dtype]),
            act_bytes=DTYPE_BYTES["bf16"] if DTYPE_BYTES[activation_dtype] < 2 else DTYPE_BYTES[activation_dtype],
            kv_bytes=DTYPE_BYTES[kv_dtype],
            gemm_dtype=gemm_compute_dtype(weight_dtype, activation_dtype),
            rotary=not model.learned_pos_embeddings,
            tp_link="intra" if tp <= gpus_per_node else "inter",
            pp_link="intra" if tp * pp <= gpus_per_node else "inter",
            num_experts=model.num_experts,
            experts_per_token=model.experts_per_token,
            moe_ffn=model.moe_ffn_size // tp,
        )


def gemm(name: str, m: int, n: int, k: int, sm: ShardedModel, count: int,
         *, quantized: bool = True) -> Op:
    """A GEMM op; activations stay 16-bit in memory, weights use their own element size."""
    a = sm.act_bytes
    w = sm.weight_bytes if quantized else sm.head_weight_bytes
    dtype = sm.gemm_dtype if quantized else "bf16"
    return Op(name, "gemm", 2.0 * m * n * k, m * k * a + k * n * w + m * n * a, count,
              (m, n, k), dtype)


def elementwise(name: str, nbytes: float, count: int, kernels: int = 1) -> Op:
    return Op(name, "elementwise", 0.0, nbytes, count, (nbytes,), "bf16", kernels)


def active_experts(m: int, experts: int, top_k: int) -> float:
    """Expected number of distinct experts m tokens are routed to (uniform routing).

    Each expert is missed by one token with probability 1 - k/E, so E(1 - (1 - k/E)^m)
    experts are hit: k at m = 1, all of them once m >> E/k. Only those experts' weights
    are read, which is what makes small-batch MoE decode cheaper than its total size.
    """
    if m <= 0:
        return 0.0
    return experts * (1.0 - (1.0 - top_k / experts) ** m)


def moe_ops(m: int, sm: ShardedModel) -> list[Op]:
    """Router plus the fused expert GEMMs of one MoE MLP (vLLM's fused_moe: one kernel for
    gate_up over all active experts, one for down). Shape (rows per active expert, N, K,
    active experts); the roofline pads each expert's rows to the kernel's M tile."""
    h, a, layers = sm.hidden, sm.act_bytes, sm.total_layer_passes
    k = sm.experts_per_token
    active = active_experts(m, sm.num_experts, k)
    rows = m * k / active
    up_n = 2 * sm.moe_ffn if sm.gated_mlp else sm.moe_ffn
    w = sm.weight_bytes

    def grouped(name: str, n: int, kk: int) -> Op:
        flops = 2.0 * m * k * n * kk
        nbytes = active * n * kk * w + m * k * (kk + n) * a
        return Op(name, "moe", flops, nbytes, layers, (rows, n, kk, active), sm.gemm_dtype, kernels=2)

    return [
        gemm("moe_router", m, sm.num_experts, h, sm, layers, quantized=False),
        elementwise("moe_topk_align", m * sm.num_experts * 4.0 + m * k * 8.0, layers, kernels=3),
        grouped("moe_gate_up", up_n, h),
        elementwise("activation", m * k * (up_n + sm.moe_ffn) * a, layers),
        grouped("moe_down", h, sm.moe_ffn),
        elementwise("moe_combine", m * k * h * a + m * h * a, layers),
    ]


def token_ops(m: int, sm: ShardedModel) -> list[Op]:
    """Ops whose cost depends only on the number of tokens in the iteration."""
    h, a, layers = sm.hidden, sm.act_bytes, sm.total_layer_passes
    qkv_n = (sm.heads + 2 * sm.kv_heads) * sm.head_dim
    up_n = 2 * sm.ffn if sm.gated_mlp else sm.ffn
    if sm.num_experts:
        mlp = moe_ops(m, sm)
    else:
        mlp = [
            gemm("gate_up_proj", m, up_n, h, sm, layers),
            elementwise("activation", m * (up_n + sm.ffn) * a, layers),
            gemm("down_proj", m, h, sm.ffn, sm, layers),
        ]
    ops = [
        elementwise("embedding", m * h * a, 1),
        elementwise("input_norm", 3 * m * h * a, layers),
        gemm("qkv_proj", m, qkv_n, h, sm, layers),
        elementwise("rope_kv_write", m * (sm.heads + sm.kv_heads) * sm.head_dim * a * 2
                    + m * 2 * sm.kv_heads * sm.head_dim * sm.kv_bytes, layers,
                    kernels=2 if sm.rotary else 1),
        gemm("o_proj", m, h, sm.heads * sm.head_dim, sm, layers),
        elementwise("post_attn_norm", 3 * m * h * a, layers),
        *mlp,
        elementwise("final_norm", 2 * m * h * a, 1),
    ]
    if sm.tp > 1:
        nbytes = m * h * a
        ops.append(Op("tp_allreduce", "allreduce", 0.0, nbytes, 2 * layers,
                      (nbytes, sm.tp, sm.tp_link), "bf16"))
    if sm.pp > 1:
        nbytes = m * h * a
        ops.append(Op("pp_send", "p2p", 0.0, nbytes, sm.pp - 1, (nbytes, 2, sm.pp_link), "bf16"))
    return ops


def emit_ops(e: int, sm: ShardedModel) -> list[Op]:
    """LM head and sampling, run once per iteration on the sequences that emit a token."""
    if e == 0:
        return []
    ops = [
        gemm("lm_head", e, sm.vocab, sm.hidden, sm, 1, quantized=False),
        # Softmax/top-p over fp32 logits: read and write them a couple of times.
        elementwise("sampling", 4 * e * sm.vocab * 4.0, 1),
    ]
    if sm.tp > 1:
        nbytes = e * sm.vocab * 4.0
        ops.append(Op("logits_gather", "allgather", 0.0, nbytes * sm.tp, 1,
                      (nbytes * sm.tp, sm.tp, sm.tp_link), "fp32"))
    return ops


def attn_prefill_op(chunks: tuple[tuple[int, int], ...], sm: ShardedModel) -> Op:
    """Causal attention of each chunk over its prior context plus itself, one varlen launch."""
    hq, hkv, d = sm.heads, sm.kv_heads, sm.head_dim
    flops = 0.0
    q_tokens = 0
    kv_tokens = 0
    for q, c in chunks:
        flops += 4.0 * q * (c + q / 2.0) * hq * d
        q_tokens += q
        kv_tokens += c + q
    nbytes = (q_tokens * hq * d * sm.act_bytes * 2  # read Q, write O
              + kv_tokens * 2 * hkv * d * sm.kv_bytes)  # read K and V
    max_q = max(q for q, _ in chunks)
    max_c = max(c for _, c in chunks)
    return Op("attn_prefill", "attn_prefill", flops, nbytes, sm.total_layer_passes,
              (q_tokens, max_c, hq, hkv, d, len(chunks), max_q), "bf16")


def attn_decode_op(num_seqs: int, context_sum: int, sm: ShardedModel) -> Op:
    """One query token per sequence against its whole KV: bandwidth-bound on the KV read."""
    hq, hkv, d = sm.heads, sm.kv_heads, sm.head_dim
    kv_len = context_sum + num_seqs  # the current token's KV is attended too
    flops = 4.0 * kv_len * hq * d
    nbytes = kv_len * 2 * hkv * d * sm.kv_bytes + num_seqs * hq * d * sm.act_bytes * 2
    return Op("attn_decode", "attn_decode", flops, nbytes, sm.total_layer_passes,
              (num_seqs, kv_len, hq, hkv, d), "bf16")


def iteration_ops(shape: IterationShape, sm: ShardedModel) -> list[Op]:
    """Every op one micro-batch passes through, across all pipeline stages."""
    ops = token_ops(shape.num_tokens, sm)
    if shape.prefill_chunks:
        ops.append(attn_prefill_op(shape.prefill_chunks, sm))
    if shape.num_decode:
        ops.append(attn_decode_op(shape.num_decode, shape.decode_context, sm))
    ops.extend(emit_ops(shape.num_emit, sm))
    return ops

"""The op decomposition of one scheduler iteration, shared by every cost back end.

A back end only answers "how long does this op take"; which ops run, with which
shapes and how often, is decided here once (DESIGN.md §5). That keeps the roofline and
the calibrated back ends comparable op by op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from simulator.dtypes import DTYPE_BYTES, gemm_compute_dtype
from simulator.models.spec import LINEAR_CONV_STATE_BYTES


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

    family: gemm | attn_prefill | attn_decode | attn_sparse | indexer | linear_attn | mamba2 |
    elementwise | allreduce | allgather | p2p
    shape: (M, N, K) for gemm; (tokens, context_or_seqs, heads, kv_heads, head_dim) for
    attention; (tokens, sequences, key heads, value heads, key head dim, value head dim,
    longest chunk) for linear attention (Mamba2: B/C groups, heads, state size, head width
    in those places); (bytes, ranks) for collectives.
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
    moe_ffn: int = 0  # one expert's intermediate size per GPU (whole under expert parallelism)
    expert_weight_dtype: str = ""  # routed experts' weight format ("": weights')
    expert_gemm_dtype: str = ""  # their GEMM compute format ("": gemm_dtype)
    moe_passes: int = 0  # layer passes with a MoE MLP; the rest are dense
    shared_ffn: int = 0  # shared experts' total intermediate size per GPU
    moe_latent: int = 0  # latent MoE: the width the routed experts compute on (ModelSpec.moe_latent_size)
    moe_routing: str = "power_law_1.01"  # the routing its MoE kernel rows are read under (ModelSpec.moe_routing)
    kv_lora: int = 0  # MLA latent width (0: GQA attention)
    q_lora: int = 0  # MLA low-rank query width
    rope_dim: int = 0  # MLA rotary query/key part (head_dim is the non-rotary part)
    v_dim: int = 0  # value head width: MLA's; under GQA 0 means head_dim (ModelSpec.v_head_dim)
    # Keys a windowed layer's query attends to: a sliding window, or a block-sparse GQA layer's
    # top-k (MiniMax-M3: its selected blocks cost what a window of as many tokens does).
    window: int = 0
    window_passes: int = 0  # layer passes that use the sliding window (or the block-sparse selection)
    qk_norm: bool = False  # RMSNorm on q and k after the QKV projection
    qk_norm_allreduce: bool = False  # that norm spans all heads: TP ranks all-reduce its variance
    dp: int = 1  # attention data-parallel ranks sharing the MoE layers (experts split dp x tp ways)
    moe_link: str = "intra"  # the link the dp x tp MoE group communicates over
    ep: int = 1  # GPUs the routed experts are split over by expert (1: sliced by width instead)
    expert_kernel: str = "auto"  # "marlin"/"triton": that MoE kernel chosen over the default one
    # TP all-reduces of at least this many bytes run on NCCL alone (releases.py: a release
    # without symmetric-memory all-reduce); below it, the fastest implementation in the tables.
    allreduce_nccl_from: float = math.inf
    attn_gate: bool = False  # q_proj also emits a sigmoid gate on the attention output
    head_gate: bool = False  # a hidden -> heads projection gates each head's output (ModelSpec.attn_head_gate)
    shared_gate: bool = False  # a hidden -> 1 sigmoid gate on the shared experts
    linear_passes: int = 0  # layer passes that are Gated DeltaNet (linear attention) layers
    lin_k_heads: int = 0  # linear-attention key heads per GPU
    lin_v_heads: int = 0  # linear-attention value heads per GPU (each keeps a dk x dv state)
    lin_k_dim: int = 0
    lin_v_dim: int = 0
    lin_conv: int = 0  # causal conv taps
    lin_ssm_bytes: float = 2.0  # bytes per element of the delta-rule state (ModelSpec.linear_ssm_bytes)
    lin_kind: str = "gated_deltanet"  # or "mamba2", "kda" (ModelSpec.linear_kind)
    ffn_free_passes: int = 0  # layer passes with no MLP or MoE block (ModelSpec.ffn_free_layers)
    mixer_free_passes: int = 0  # layer passes with no attention or mixer (ModelSpec.mixer_free_layers)
    index_heads: int = 0  # sparse-attention indexer heads, replicated on every TP rank (0: dense attention)
    index_passes: int = 0  # layer passes that run their own indexer (ModelSpec.indexed_layers)
    index_dim: int = 0
    index_topk: int = 0  # tokens each query's sparse MLA attends to (block-sparse GQA: 0, see window)
    index_key_bytes: float = 0.0  # one token's indexer key in the cache (FP8 + scales)
    latent_bytes: float = 0.0  # one token's MLA latent in a sparse model's cache (its own formats)
    # Full-attention layers of their own geometry (ModelSpec.global_*; 0: as the others).
    global_heads: int = 0
    global_kv_heads: int = 0
    global_head_dim: int = 0
    global_k_eq_v: bool = False
    k_eq_v: bool = False  # this view's layers project K only and attend with V = K (no v_proj)
    # DeepSeek-V4's windowed and compressed attention (cost/compressed_ops.CompressedGeometry); None: not.
    compressed: object | None = None

    @property
    def nccl_pinned(self) -> bool:
        """Whether the release pins this layout's large all-reduces to NCCL (releases.py)."""
        return self.allreduce_nccl_from < math.inf

    @property
    def total_layer_passes(self) -> int:
        """Layer executions one micro-batch waits for: stages run in lockstep, so the
        slowest (largest) stage sets each stage's time."""
        return self.layers_per_stage * self.pp

    @property
    def attn_layer_passes(self) -> int:
        """Layer passes that run softmax attention (all but the linear-attention and attention-free ones)."""
        return self.layers_per_stage * self.pp - self.linear_passes - self.mixer_free_passes  # inline: hot

    @property
    def value_dim(self) -> int:
        """A grouped-query layer's V width per head."""
        return self.v_dim or self.head_dim

    @property
    def lin_conv_dim(self) -> int:
        """Conv channels per GPU: q, k and v."""
        return (2 * self.lin_k_heads * self.lin_k_dim + self.lin_v_heads * self.lin_v_dim)

    @property
    def dense_passes(self) -> int:
        """Layer passes with a dense MLP: every one with an MLP in a dense model; a MoE
        model's dense-first layers."""
        return self.total_layer_passes - self.moe_passes - self.ffn_free_passes

    @classmethod
    def build(cls, model, tp: int, pp: int, weight_dtype: str, activation_dtype: str,
              kv_dtype: str, gpus_per_node: int, expert_weight_dtype: str | None = None,
              dp: int = 1, expert_parallel: bool = False,
              expert_activation_dtype: str | None = None, expert_kernel: str = "auto") -> ShardedModel:
        layers = math.ceil(model.num_layers / pp)
        dp = dp if model.num_experts else 1  # dense models' DP ranks share nothing
        # vLLM --enable-expert-parallel: each of the dp x tp GPUs holds whole experts.
        ep = tp * dp if expert_parallel and model.num_experts else 1
        passes = layers * pp
        expert_dtype = expert_weight_dtype or weight_dtype
        return cls(
            layers_per_stage=layers,
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
            moe_ffn=model.moe_ffn_size if ep > 1 else model.moe_ffn_size // (tp * dp),
            expert_weight_dtype=expert_dtype,
            expert_gemm_dtype=gemm_compute_dtype(expert_dtype, expert_activation_dtype or activation_dtype),
            moe_passes=round(passes * model.moe_layers / model.num_layers),
            shared_ffn=model.num_shared_experts * model.moe_ffn_size // tp,
            moe_latent=model.moe_latent_size,
            moe_routing=model.moe_routing,
            kv_lora=model.kv_lora_rank,
            q_lora=model.q_lora_rank,
            rope_dim=model.qk_rope_head_dim,
            v_dim=model.v_head_dim,
            **_windows(model, passes),
            qk_norm=model.qk_norm or model.qk_norm_spans_heads,
            qk_norm_allreduce=model.qk_norm_spans_heads and tp > 1,
            dp=dp,
            moe_link="intra" if tp * dp <= gpus_per_node else "inter",
            ep=ep,
            expert_kernel=expert_kernel if model.num_experts else "auto",
            attn_gate=model.attn_output_gate,
            head_gate=model.attn_head_gate,
            shared_gate=model.shared_expert_gate and model.num_shared_experts > 0,
            linear_passes=round(passes * model.linear_layers / model.num_layers),
            lin_k_heads=model.linear_num_key_heads // tp,
            lin_v_heads=model.linear_num_value_heads // tp,
            lin_k_dim=model.linear_key_head_dim,
            lin_v_dim=model.linear_value_head_dim,
            lin_conv=model.linear_conv_kernel,
            lin_ssm_bytes=model.linear_ssm_bytes,
            lin_kind=model.linear_kind,
            ffn_free_passes=round(passes * model.ffn_free_layers / model.num_layers),
            mixer_free_passes=round(passes * model.mixer_free_layers / model.num_layers),
            index_heads=model.index_n_heads,
            index_passes=round(passes * model.indexed_layers / model.num_layers),
            index_dim=model.index_head_dim,
            index_topk=model.index_topk if model.is_mla else 0,
            index_key_bytes=model.indexer_key_bytes(DTYPE_BYTES[kv_dtype]) if model.is_sparse else 0.0,
            latent_bytes=model.latent_bytes(DTYPE_BYTES[kv_dtype]) if model.is_sparse and model.is_mla else 0.0,
            **_global_geometry(model, tp),
            compressed=_compressed_geometry(model, tp, passes),
        )


def _compressed_geometry(model, tp: int, passes: int):
    """ShardedModel.compressed: DeepSeek-V4's attention on one GPU (None for other models)."""
    if not model.compressed:
        return None
    from simulator.cost.compressed_ops import CompressedGeometry  # it builds on this module's ops
    return CompressedGeometry.build(model, tp, passes)


def _windows(model, passes: int) -> dict:
    """ShardedModel's window fields: the sliding window, or a block-sparse GQA model's top-k
    on its indexed layers."""
    if model.is_sparse and not model.is_mla:
        return {"window": model.index_topk, "window_passes": round(passes * model.indexed_layers / model.num_layers)}
    return {"window": model.sliding_window, "window_passes": round(passes * model.sliding_layers / model.num_layers)}


def _global_geometry(model, tp: int) -> dict:
    """ShardedModel's global_* fields: the full-attention layers' per-GPU heads and width."""
    if not model.has_global_geometry:
        return {}
    heads, kv_heads, dim = model.full_attention_dims
    return {"global_heads": heads // tp, "global_kv_heads": max(1, kv_heads // tp), "global_head_dim": dim,
            "global_k_eq_v": model.global_k_eq_v}


def layer_geometries(sm: ShardedModel) -> tuple[ShardedModel, ...]:
    """The attention layers by shape: sm itself, or (sliding-window layers, full-attention
    layers) as two views of it whose attention layer passes count only their own kind, so
    a model with two geometries (Gemma 4) times each kind's projections and attention
    with its own heads and width."""
    if not sm.global_head_dim:
        return (sm,)
    full = sm.attn_layer_passes - sm.window_passes
    sliding = replace(sm, mixer_free_passes=sm.mixer_free_passes + full, global_head_dim=0)
    return (sliding, replace(sm, heads=sm.global_heads, kv_heads=sm.global_kv_heads, head_dim=sm.global_head_dim,
                             window=0, window_passes=0, mixer_free_passes=sm.mixer_free_passes + sm.window_passes,
                             global_head_dim=0, k_eq_v=sm.global_k_eq_v))


def gemm(name: str, m: int, n: int, k: int, sm: ShardedModel, count: int,
         *, quantized: bool = True) -> Op:
    """A GEMM op; activations stay 16-bit in memory, weights use their own element size."""
    a = sm.act_bytes
    w = sm.weight_bytes if quantized else sm.head_weight_bytes
    dtype = sm.gemm_dtype if quantized else "bf16"
    return Op(name, "gemm", 2.0 * m * n * k, m * k * a + k * n * w + m * n * a, count,
              (m, n, k), dtype)


def tp_allreduce(name: str, nbytes: float, sm: ShardedModel, count: int, dtype: str = "bf16") -> Op:
    """An all-reduce of nbytes over the TP group, count times per iteration. The name's
    `:nccl` suffix pins the implementation the tables time it by (families._Collective)."""
    if nbytes >= sm.allreduce_nccl_from:
        name += ":nccl"
    return Op(name, "allreduce", 0.0, nbytes, count, (nbytes, sm.tp, sm.tp_link), dtype)


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


def moe_table_dtype(weight_dtype: str, compute_dtype: str, kernel: str = "auto") -> str:
    """The kernel-table label of a fused MoE: what the GEMMs compute in, with 4-bit weights
    under wider inputs apart: W4A16 (MXFP4/INT4 experts dequantised in the kernel by the
    kernel vLLM picks for the format and GPU, e.g. OpenAI's triton MoE for gpt-oss on
    Hopper), W4A16M (the same on vLLM's Marlin MoE, where it is chosen instead) and W4A8
    (MXFP4 weights x MXFP8 inputs on the FP8 tensor cores, FlashInfer's TRT-LLM MoE on
    Blackwell); FP8T is FP8 experts on vLLM's Triton fused MoE where a run turns the
    default kernel off (FlashInfer's TRT-LLM MoE on Blackwell)."""
    if compute_dtype == "fp4":
        return "fp4"
    if DTYPE_BYTES[weight_dtype] < 1 and compute_dtype in ("bf16", "fp16", "fp8"):
        if compute_dtype == "fp8":
            return "w4a8"
        return "w4a16m" if kernel == "marlin" else "w4a16"
    if compute_dtype == "fp8" and kernel == "triton":
        return "fp8t"
    return compute_dtype if compute_dtype in ("fp8", "int8") else "bf16"


MOE_TABLE_COMPUTE = {"fp4": "fp4", "w4a16": "bf16", "w4a16m": "bf16", "w4a8": "fp8", "fp8": "fp8", "fp8t": "fp8",
                     "int8": "int8", "bf16": "bf16"}
MOE_TABLE_WEIGHT_BYTES = {"fp4": 0.5, "w4a16": 0.5, "w4a16m": 0.5, "w4a8": 0.5, "fp8": 1.0, "fp8t": 1.0, "int8": 1.0,
                          "bf16": 2.0}


def fused_moe_op(m: int, hidden: int, inter: int, top_k: int, experts: int, label: str,
                 *, gated: bool = True, act_bytes: float = 2.0, count: int = 1, ep: int = 1,
                 routing: str = "power_law_1.01") -> Op:
    """One MoE MLP as vLLM's fused_moe runs it: align/permute, a grouped GEMM for gate/up
    over the active experts, the activation, a grouped GEMM for down, and the weighted sum.

    Under expert parallelism (ep > 1) a GPU holds experts/ep whole experts and computes the
    token-expert pairs routed to them: an ep-th of the pairs and of the active experts
    under uniform routing (the slowest GPU's excess under real routing is in the tables).

    shape: (tokens, hidden, inter per GPU, top-k, experts, up width, active experts on this
    GPU, bytes the two GEMMs move, ep, routing, table label); dtype is the GEMM compute format.
    FLOPs are the two GEMMs'; bytes add the activation, align and sum traffic to the GEMMs' own.
    `routing` (ModelSpec.moe_routing) picks the kernel table rows; the roofline's counts stay
    uniform.
    """
    w = MOE_TABLE_WEIGHT_BYTES[label]
    up_n = 2 * inter if gated else inter
    active = active_experts(m, experts, top_k) / ep
    rows = m * top_k / ep
    flops = 2.0 * rows * (up_n * hidden + hidden * inter)
    weights = active * (up_n * hidden + hidden * inter) * w
    gemm_bytes = weights + rows * (hidden + 2 * inter) * act_bytes
    acts = (rows * (hidden + up_n) + rows * (up_n + inter) + rows * (inter + hidden)
            + m * hidden) * act_bytes
    align = m * experts * 4.0 + rows * 8.0
    return Op("fused_moe", "moe", flops, weights + acts + align, count,
              (m, hidden, inter, top_k, experts, up_n, active, gemm_bytes, ep, routing, label),
              MOE_TABLE_COMPUTE[label], kernels=7)


def moe_ops(m: int, sm: ShardedModel, moe_m: int | None = None) -> list[Op]:
    """Router, the fused routed-expert MLP, and shared experts / dense-first layers.

    Under attention data parallelism the routed experts run on moe_m tokens, this rank's m
    plus those the other DP ranks bring to the same step: vLLM gathers every rank's tokens
    before the experts (split dp x tp ways) and reduce-scatters the result after them,
    which takes the place of the TP all-reduce that ends a MoE layer."""
    h, layers = sm.hidden, sm.moe_passes
    moe_m = m if moe_m is None else moe_m
    label = moe_table_dtype(sm.expert_weight_dtype or "bf16", sm.expert_gemm_dtype or sm.gemm_dtype, sm.expert_kernel)
    ops = [gemm("moe_router", m, sm.num_experts, h, sm, layers, quantized=False)]
    if sm.moe_latent:  # projected in and out of the latent on every rank (replicated GEMMs)
        ops.append(gemm("moe_latent_in", m, sm.moe_latent, h, sm, layers))
    ops.append(fused_moe_op(moe_m, sm.moe_latent or h, sm.moe_ffn, sm.experts_per_token, sm.num_experts, label,
                            gated=sm.gated_mlp, act_bytes=sm.act_bytes, count=layers, ep=sm.ep,
                            routing=sm.moe_routing))
    if sm.moe_latent:
        ops.append(gemm("moe_latent_out", m, h, sm.moe_latent, sm, layers))
    if sm.dp > 1:
        nbytes = moe_m * h * sm.act_bytes
        for name in ("moe_dispatch", "moe_combine"):  # all-gather, reduce-scatter: same ring traffic
            ops.append(Op(name, "allgather", 0.0, nbytes, layers, (nbytes, sm.tp * sm.dp, sm.moe_link), "bf16"))
    if sm.shared_ffn:
        ops += dense_mlp_ops("shared_expert", m, sm.shared_ffn, sm, layers)
        if sm.shared_gate:  # its own hidden -> 1 GEMM, sigmoid-scaling the shared output
            ops.append(gemm("shared_expert_gate", m, 1, h, sm, layers, quantized=False))
    if sm.dense_passes:
        ops += dense_mlp_ops("dense", m, sm.ffn, sm, sm.dense_passes)
    return ops


def expert_gemm_shapes(sm: ShardedModel) -> list[tuple[int, int]]:
    """(N, K) of one expert's gate/up and down GEMMs: what calibration benchmarks for MoE."""
    up_n = 2 * sm.moe_ffn if sm.gated_mlp else sm.moe_ffn
    return [(up_n, sm.hidden), (sm.hidden, sm.moe_ffn)]


def dense_mlp_ops(prefix: str, m: int, ffn: int, sm: ShardedModel, count: int) -> list[Op]:
    """A dense (gated) MLP of intermediate size ffn per GPU."""
    up_n = 2 * ffn if sm.gated_mlp else ffn
    return [
        gemm(f"{prefix}_gate_up", m, up_n, sm.hidden, sm, count),
        elementwise(f"{prefix}_activation", m * (up_n + ffn) * sm.act_bytes, count),
        gemm(f"{prefix}_down", m, sm.hidden, ffn, sm, count),
    ]


def attention_projection_ops(m: int, sm: ShardedModel) -> tuple[list[Op], list[Op]]:
    """(ops before attention, ops after it): QKV projection, RoPE and the KV write, and o_proj.

    Under MLA (DeepSeek-V3) the query and the KV latent come from low-rank projections
    that vLLM replicates on every TP rank; the latent is up-projected per head (kv_b:
    512 -> heads x (128 + 128)). Decode absorbs kv_b into the query and the output instead;
    both paths do the same FLOPs and read the same weights, so one GEMM stands for either.
    """
    if sm.compressed:
        return sm.compressed.projection_ops(m, sm)
    if sm.global_head_dim:  # two geometries: each kind of layer with its own
        views = [attention_projection_ops(m, view) for view in layer_geometries(sm)]
        return [op for before, _ in views for op in before], [op for _, after in views for op in after]
    h, a, layers = sm.hidden, sm.act_bytes, sm.attn_layer_passes
    if not sm.kv_lora:
        out = sm.heads * sm.value_dim  # attention's output: o_proj's input, and the gate's width
        # the query, and its output gate (vLLM's g_proj of a per-head gate is a GEMM of its own
        # on the same input: one GEMM of the summed width stands for both)
        q_n = sm.heads * sm.head_dim + (out if sm.attn_gate else 0) + (sm.heads if sm.head_gate else 0)
        kv_n = sm.kv_heads * (sm.head_dim + (0 if sm.k_eq_v else sm.value_dim))
        qkv_n = q_n + kv_n
        qk_bytes = m * (sm.heads + sm.kv_heads) * sm.head_dim * a * 2  # read and write q, k
        before = [gemm("qkv_proj", m, qkv_n, h, sm, layers)]
        if sm.qk_norm:  # q and k normalised by two kernels (vLLM's q_norm, k_norm)
            before.append(elementwise("qk_norm", qk_bytes, layers, kernels=2))
        if sm.qk_norm_allreduce:  # fp32 variances of q and k per token, summed over ranks
            before.append(tp_allreduce("qk_norm_allreduce", m * 2 * 4.0, sm, layers, "fp32"))
        kv_row = sm.kv_heads * (sm.head_dim + sm.value_dim)  # the cache holds V even where K = V
        before.append(elementwise("rope_kv_write", qk_bytes + m * kv_row * sm.kv_bytes,
                                  layers, kernels=2 if sm.rotary else 1))
        after = [gemm("o_proj", m, h, out, sm, layers)]
        if sm.attn_gate or sm.head_gate:  # o * sigmoid(gate): read both, write o
            gate = out if sm.attn_gate else sm.heads
            after.insert(0, elementwise("attn_output_gate", (2 * out + gate) * m * a, layers))
        return before, after
    qk = sm.head_dim + sm.rope_dim
    latent = sm.kv_lora + sm.rope_dim
    if sm.q_lora:
        before = [gemm("q_a_kv_a_proj", m, sm.q_lora + latent, h, sm, layers),
                  elementwise("q_kv_a_norm", 3 * m * (sm.q_lora + sm.kv_lora) * a, layers, kernels=2),
                  gemm("q_b_proj", m, sm.heads * qk, sm.q_lora, sm, layers)]
    else:
        before = [gemm("q_proj", m, sm.heads * qk, h, sm, layers),
                  gemm("kv_a_proj", m, latent, h, sm, layers),
                  elementwise("kv_a_norm", 3 * m * sm.kv_lora * a, layers)]
    before += [
        gemm("mla_kv_b", m, sm.heads * (sm.head_dim + sm.v_dim), sm.kv_lora, sm, layers),
        elementwise("rope_kv_write", m * (sm.heads + 1) * sm.rope_dim * a * 2
                    + m * latent * sm.kv_bytes, layers, kernels=2),
    ]
    after = [gemm("o_proj", m, h, sm.heads * sm.v_dim, sm, layers)]
    if sm.attn_gate:  # Kimi-K3: g_proj from the layer's input, o * sigmoid(g) before o_proj
        out = sm.heads * sm.v_dim
        before.append(gemm("attn_gate_proj", m, out, h, sm, layers))
        after.insert(0, elementwise("attn_output_gate", 3 * m * out * a, layers))
    return before, after


def linear_attention_token_ops(m: int, sm: ShardedModel) -> list[Op]:
    """The per-token work of the Gated DeltaNet layers (vLLM's Qwen3-Next mixer): the
    q/k/v/z and decay/step projections, the causal conv's activation traffic, the gated
    RMSNorm (with the decay and step gating), and out_proj. The recurrence itself and the
    per-sequence state traffic are linear_prefill_op and linear_decode_op."""
    h, a, layers = sm.hidden, sm.act_bytes, sm.linear_passes
    k = sm.lin_k_heads * sm.lin_k_dim
    v = sm.lin_v_heads * sm.lin_v_dim
    conv = sm.lin_conv_dim
    if sm.lin_kind == "mamba2":  # one in_proj to z, x, B, C and dt; one step size per head
        return [
            gemm("mamba_in_proj", m, 2 * k + 2 * v + sm.lin_v_heads, h, sm, layers),
            elementwise("mamba_conv", 2 * m * conv * a + conv * sm.lin_conv * a, layers),
            elementwise("mamba_gate_norm", 2 * m * sm.lin_v_heads * 4.0 + 3 * m * v * a, layers, kernels=2),
            gemm("mamba_out_proj", m, h, v, sm, layers),
        ]
    if sm.lin_kind == "kda":  # Kimi Delta Attention: a decay per key channel, a full-rank output gate
        rank = sm.lin_k_dim  # the decay's low-rank width, replicated on every rank
        return [
            gemm("kda_in_proj_qkvg", m, 2 * k + 2 * v, h, sm, layers),
            gemm("kda_in_proj_beta_decay", m, sm.lin_v_heads + rank, h, sm, layers),
            gemm("kda_decay_up", m, k, rank, sm, layers),
            elementwise("kda_conv", 2 * m * conv * a + conv * sm.lin_conv * a, layers),
            # The decay per key channel (in, and out in fp32), the step sizes; RMSNorm(o) * sigmoid(g).
            elementwise("kda_gate_norm", m * k * (a + 4.0) + 2 * m * sm.lin_v_heads * 4.0 + 3 * m * v * a,
                        layers, kernels=2),
            gemm("kda_out_proj", m, h, v, sm, layers),
        ]
    return [
        gemm("gdn_in_proj_qkvz", m, 2 * k + 2 * v, h, sm, layers),
        gemm("gdn_in_proj_ba", m, 2 * sm.lin_v_heads, h, sm, layers),
        # Depthwise conv: the q, k, v activations in and out, the taps once.
        elementwise("gdn_conv", 2 * m * conv * a + conv * sm.lin_conv * a, layers),
        # Decay and step gates (b, a in; g, beta out), then RMSNorm(o) * silu(z): o, z in, out.
        elementwise("gdn_gate_norm", 4 * m * sm.lin_v_heads * 4.0 + 3 * m * v * a, layers, kernels=2),
        gemm("gdn_out_proj", m, h, v, sm, layers),
    ]


# FLA's chunked gated delta rule works on chunks of this many tokens (chunk_size=64 in its
# chunk_gated_delta_rule kernels, which vLLM vendors).
DELTA_RULE_CHUNK = 64


def linear_state_traffic(seqs: int, sm: ShardedModel) -> float:
    """Bytes to read and write back `seqs` sequences' conv and delta-rule states, one layer."""
    state = (sm.lin_v_heads * sm.lin_k_dim * sm.lin_v_dim * sm.lin_ssm_bytes
             + sm.lin_conv_dim * (sm.lin_conv - 1) * LINEAR_CONV_STATE_BYTES)
    return 2.0 * seqs * state


def linear_prefill_op(chunks: tuple[tuple[int, int], ...], sm: ShardedModel) -> Op:
    """The chunked gated delta rule (FLA's chunk_gated_delta_rule) over prefill chunks.

    Per value head and chunk of C tokens it forms the C x C decayed K K^T, inverts the
    unit-triangular system (the WY form), builds W = A K and U = A V, advances the
    dk x dv state (W S, K^T U) and emits O = Q S + mask(Q K^T) U. Per token that is
    6·dk·dv FLOPs of state terms and 2·C·(3·dk + 2·dv) of intra-chunk ones, the latter on
    whole chunks: linear in tokens. Bytes: q, k, v, the gates and o per token, the chunk
    boundary states (written by one kernel, read by the next), and each sequence's state
    read at its start and written at its end."""
    hv, dk, dv, c_len = sm.lin_v_heads, sm.lin_k_dim, sm.lin_v_dim, DELTA_RULE_CHUNK
    tokens = n_chunks = longest = 0
    for q, _ in chunks:
        tokens += q
        n_chunks += -(-q // c_len)
        longest = max(longest, q)
    flops = hv * (6.0 * dk * dv * tokens + 2.0 * c_len * (3 * dk + 2 * dv) * n_chunks * c_len)
    per_token = (2 * sm.lin_k_heads * dk + 2 * hv * dv) * sm.act_bytes + 2 * hv * 4.0
    nbytes = (tokens * per_token + n_chunks * hv * dk * dv * sm.act_bytes * 2
              + linear_state_traffic(len(chunks), sm))
    name = "kda_prefill" if sm.lin_kind == "kda" else "gdn_prefill"
    return Op(name, "linear_attn", flops, nbytes, sm.linear_passes,
              (tokens, len(chunks), sm.lin_k_heads, hv, dk, dv, longest), "bf16", kernels=6)


# Mamba2's chunked scan (mamba_ssm's mamba_chunk_scan_combined, which vLLM vendors) works on
# chunks of this many tokens: Nemotron-H's config.json chunk_size.
SSD_CHUNK = 128


def mamba_prefill_op(chunks: tuple[tuple[int, int], ...], sm: ShardedModel) -> Op:
    """Mamba2's state-space duality scan over prefill chunks (mamba_chunk_scan_combined).

    Per chunk of C tokens each B/C group forms C·B^T (2·C·N per token) and each head applies
    it, masked and decayed, to its x (2·C·P per token); the chunk's state contribution B^T·x
    and the output from the carried state C·S are 2·N·P each per token and head (N the
    state size, P the head width). Bytes: x, B, C, dt and y per token, the chunk boundary
    states (fp32, written by one kernel and read by the next), and each sequence's state
    read at its start and written at its end."""
    heads, groups, n, p, c_len = sm.lin_v_heads, sm.lin_k_heads, sm.lin_k_dim, sm.lin_v_dim, SSD_CHUNK
    tokens = n_chunks = longest = 0
    for q, _ in chunks:
        tokens += q
        n_chunks += -(-q // c_len)
        longest = max(longest, q)
    padded = n_chunks * c_len
    flops = 2.0 * c_len * padded * (groups * n + heads * p) + 4.0 * tokens * heads * n * p
    per_token = (2 * groups * n + 2 * heads * p) * sm.act_bytes + heads * 4.0
    nbytes = tokens * per_token + n_chunks * heads * n * p * 4.0 * 2 + linear_state_traffic(len(chunks), sm)
    return Op("mamba_prefill", "mamba2", flops, nbytes, sm.linear_passes,
              (tokens, len(chunks), groups, heads, n, p, longest), "bf16", kernels=5)


def linear_decode_op(num_seqs: int, sm: ShardedModel) -> Op:
    """One recurrent step per decoding sequence (FLA's fused_recurrent_gated_delta_rule, or
    Mamba2's selective_state_update, and the conv's state update): each reads and writes
    back its whole state, which dominates; ~6·dk·dv FLOPs per value head (decay, k·S or B·x,
    the rank-one update, q·S or C·S). Mamba2's is its own op family (`mamba2`): the Gated
    DeltaNet tables do not time it."""
    hv, dk, dv = sm.lin_v_heads, sm.lin_k_dim, sm.lin_v_dim
    flops = 6.0 * num_seqs * hv * dk * dv
    nbytes = linear_state_traffic(num_seqs, sm) + num_seqs * (2 * sm.lin_k_heads * dk + 2 * hv * dv) * sm.act_bytes
    name, family = {"mamba2": ("mamba_decode", "mamba2"), "kda": ("kda_decode", "linear_attn")}.get(
        sm.lin_kind, ("gdn_decode", "linear_attn"))
    return Op(name, family, flops, nbytes, sm.linear_passes,
              (num_seqs, num_seqs, sm.lin_k_heads, hv, dk, dv, 1), "bf16", kernels=2)


def indexer_token_ops(m: int, sm: ShardedModel) -> list[Op]:
    """The per-token work of DeepSeek-V3.2's lightning indexer (vLLM's Indexer), replicated
    on every TP rank: wq_b from the q latent (block-FP8 like the other projections), wk and
    weights_proj as one bf16 GEMM (vLLM upcasts wk to fuse them), then the key's LayerNorm,
    RoPE, the Hadamard rotation and FP8 quantisation of q and k, and the key-cache write.
    A block-sparse GQA model's indexer (MiniMax-M3) projects q and its one key head from the
    hidden state in one GEMM, then norms and rotates both and writes the key."""
    layers, a, h, d = sm.index_passes, sm.act_bytes, sm.index_heads, sm.index_dim
    if not sm.kv_lora:
        return [gemm("indexer_qk_proj", m, (h + 1) * d, sm.hidden, sm, layers),
                elementwise("indexer_norm_rope", m * (h + 1) * d * 3 * a + m * sm.index_key_bytes, layers,
                            kernels=2)]
    q_bytes = m * h * d * (2 * a + 1) + m * h * (a + 4)  # q in and out (FP8), head weights in and out (fp32)
    k_bytes = m * d * 3 * a + m * sm.index_key_bytes  # norm and rotate k, write its FP8 row
    return [
        gemm("indexer_wq_b", m, h * d, sm.q_lora, sm, layers),
        gemm("indexer_wk_weights", m, d + h, sm.hidden, sm, layers, quantized=False),
        elementwise("indexer_rope_quant", q_bytes + k_bytes, layers, kernels=3),
    ]


def token_ops(m: int, sm: ShardedModel, moe_m: int | None = None) -> list[Op]:
    """Ops whose cost depends only on the number of tokens in the iteration (and, under
    attention data parallelism, on the tokens all DP ranks bring to the MoE layers)."""
    h, a, layers = sm.hidden, sm.act_bytes, sm.total_layer_passes
    mlp_layers = layers - sm.ffn_free_passes
    mixer_layers = layers - sm.mixer_free_passes
    up_n = 2 * sm.ffn if sm.gated_mlp else sm.ffn
    if sm.num_experts:
        mlp = moe_ops(m, sm, moe_m)
    else:
        mlp = [
            gemm("gate_up_proj", m, up_n, h, sm, mlp_layers),
            elementwise("activation", m * (up_n + sm.ffn) * a, mlp_layers),
            gemm("down_proj", m, h, sm.ffn, sm, mlp_layers),
        ]
    before_attn, after_attn = attention_projection_ops(m, sm)
    ops = [
        elementwise("embedding", m * h * a, 1),
        elementwise("input_norm", 3 * m * h * a, mixer_layers),
        *before_attn,
        *after_attn,
        *(linear_attention_token_ops(m, sm) if sm.linear_passes else ()),
        *(indexer_token_ops(m, sm) if sm.index_passes else ()),
        *(sm.compressed.stream_ops(m, sm) if sm.compressed else ()),
        elementwise("post_attn_norm", 3 * m * h * a, mlp_layers),
        *mlp,
        elementwise("final_norm", 2 * m * h * a, 1),
    ]
    if sm.tp > 1:
        reduce_scattered = sm.moe_passes if sm.dp > 1 else 0  # moe_combine ends those MoE layers
        ops.append(tp_allreduce("tp_allreduce", m * h * a, sm, mixer_layers + mlp_layers - reduce_scattered))
    if sm.pp > 1:  # the hidden state (DeepSeek-V4: its hc_mult residual streams)
        nbytes = m * h * a * (sm.compressed.layout.hc_mult if sm.compressed else 1)
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


def windowed_work(q: int, c: int, w: int) -> float:
    """Σ over the chunk's q queries of the keys each attends to, capped at a window of w
    (the continuous form q(c + q/2) below the window, q·w beyond it)."""
    if c + q <= w:
        return q * (c + q / 2.0)
    if c >= w:
        return float(q * w)
    below = w - c
    return below * (c + below / 2.0) + (q - below) * w


def attention_dims(sm: ShardedModel) -> tuple[int, int, int]:
    """(heads, KV heads, head dim) as the attention kernel sees them.

    MLA prefill runs ordinary multi-head attention on the up-projected K (192 wide) and V
    (128 wide): the same work and K+V bytes as heads of width (192 + 128) / 2. So does GQA
    whose V is narrower than Q and K (MiMo-V2-Flash: 192 and 128)."""
    if sm.kv_lora:
        return sm.heads, sm.heads, (sm.head_dim + sm.rope_dim + sm.v_dim) // 2
    return sm.heads, sm.kv_heads, (sm.head_dim + sm.v_dim) // 2 if sm.v_dim else sm.head_dim


def kv_kernel_dtype(sm: ShardedModel) -> str:
    """The KV format an attention kernel is timed under: 1-byte caches run FP8 kernels
    (vLLM's FA3 quantises the query too), which tables time apart from 16-bit ones."""
    return "fp8" if sm.kv_bytes < 2 else "bf16"


def compute_dtypes(sm: ShardedModel) -> tuple[str, ...]:
    """The dtypes a model's compute-bound kernels run in: GEMMs, experts, prefill attention."""
    return (sm.gemm_dtype, sm.expert_gemm_dtype, kv_kernel_dtype(sm))


def attn_prefill_op(chunks: tuple[tuple[int, int], ...], sm: ShardedModel) -> Op:
    """Causal attention of each chunk over its prior context plus itself, one varlen launch.

    Sliding-window layers attend to at most sm.window keys per query; the op carries the
    layer-averaged work so one kernel family times both kinds of layer."""
    hq, hkv, d = attention_dims(sm)
    layers = sm.attn_layer_passes
    win = sm.window_passes / layers if sm.window else 0.0
    flops = 0.0
    q_tokens = 0
    kv_tokens = 0.0
    for q, c in chunks:
        work = q * (c + q / 2.0)
        kv = c + q
        if win:
            work = (1 - win) * work + win * windowed_work(q, c, sm.window)
            kv = (1 - win) * kv + win * (min(c, sm.window) + q)
        flops += 4.0 * work * hq * d
        q_tokens += q
        kv_tokens += kv
    nbytes = (q_tokens * hq * d * sm.act_bytes * 2  # read Q, write O
              + kv_tokens * 2 * hkv * d * sm.kv_bytes)  # read K and V
    max_q = max(q for q, _ in chunks)
    max_c = max(c for _, c in chunks)
    return Op("attn_prefill", "attn_prefill", flops, nbytes, layers,
              (q_tokens, max_c, hq, hkv, d, len(chunks), max_q), kv_kernel_dtype(sm))


def attn_decode_cost(num_seqs: int, kv_len, sm: ShardedModel):
    """(FLOPs, bytes) of one decode-attention layer pass; kv_len may be a numpy array.

    GQA reads every KV head's K and V. MLA reads one latent (kv_lora + rope wide) per token,
    shared by all heads, against queries absorbed into the latent space (FlashMLA-style).
    Sliding-window layers read at most window tokens per sequence."""
    if sm.window:
        win = sm.window_passes / sm.attn_layer_passes
        kv_len = (1 - win) * kv_len + win * np.minimum(kv_len, num_seqs * sm.window)
    if sm.index_topk:  # sparse MLA: at most top-k tokens per sequence (the batch's sum bounds it)
        kv_len = np.minimum(kv_len, num_seqs * sm.index_topk)
    if sm.kv_lora:
        latent = sm.kv_lora + sm.rope_dim
        width = latent + sm.kv_lora  # scores over the latent, values over its kv_lora part
        row = sm.latent_bytes if sm.index_topk else latent * sm.kv_bytes
        return (2.0 * kv_len * sm.heads * width,
                kv_len * row + num_seqs * sm.heads * width * sm.act_bytes)
    hq, hkv, d = sm.heads, sm.kv_heads, sm.head_dim  # inline attention_dims (hot): GQA's mean K/V width
    if sm.v_dim:
        d = (d + sm.v_dim) // 2
    return (4.0 * kv_len * hq * d,
            kv_len * 2 * hkv * d * sm.kv_bytes + num_seqs * hq * d * sm.act_bytes * 2)


# The width attn_decode_op gives an MLA cache's single KV "head": half the 512 + 64 latent
# of DeepSeek-V3/R1, Kimi-K2 and GLM-5, so its K+V bytes are the latent's; kernel tables
# key MLA decode rows by it (calibration/README.md).
MLA_LATENT_HALF = 288


def attn_decode_op(num_seqs: int, context_sum: int, sm: ShardedModel) -> Op:
    """One query token per sequence against its whole KV: bandwidth-bound on the KV read."""
    kv_len = context_sum + num_seqs  # the current token's KV is attended too
    if sm.index_topk:
        kv_len = min(kv_len, num_seqs * sm.index_topk)
    flops, nbytes = attn_decode_cost(num_seqs, kv_len, sm)
    if sm.kv_lora:  # MQA over the latent: one "KV head" whose K+V bytes equal the latent's
        hq, hkv, d = sm.heads, 1, (sm.kv_lora + sm.rope_dim) // 2
    else:
        hq, hkv, d = sm.heads, sm.kv_heads, sm.head_dim
        if sm.v_dim:
            d = (d + sm.v_dim) // 2
    return Op("attn_decode", "attn_decode", float(flops), float(nbytes), sm.attn_layer_passes,
              (num_seqs, kv_len, hq, hkv, d), kv_kernel_dtype(sm))


# FlashMLA's sparse prefill kernel runs the query heads in groups of 64 on Hopper (vLLM's
# FlashMLASparseImpl.prefill_padding: 64 on Hopper, 128 on Blackwell), padding a TP rank's
# heads up to them: 16 heads (TP8) compute as 64.
SPARSE_PREFILL_HEAD_TILE = 64


def sparse_mla_prefill_op(chunks: tuple[tuple[int, int], ...], sm: ShardedModel) -> Op:
    """Sparse MLA over each query's top-k tokens (FlashMLA's flash_mla_sparse_fwd), which vLLM
    runs once a prefill's sequence outgrows top-k: MQA in the latent space (the query
    absorbed into it: scores over kv_lora + rope, values over kv_lora) for min(position, k)
    keys per query, on the heads padded to the kernel's tile. Bytes: Q in and O out, and each
    distinct latent row once (a layer's latent of one sequence, 1,152 B a token, stays in L2
    while neighbouring queries gather overlapping top-k sets), bf16 as the kernel reads it
    (a quantised cache is first up-converted into a bf16 workspace: read and written once)."""
    heads = -(-sm.heads // SPARSE_PREFILL_HEAD_TILE) * SPARSE_PREFILL_HEAD_TILE
    latent = sm.kv_lora + sm.rope_dim
    width = latent + sm.kv_lora
    work = sum(windowed_work(q, c, sm.index_topk) for q, c in chunks)
    q_tokens = sum(q for q, _ in chunks)
    rows = sum(c + q for q, c in chunks)
    row_bytes = latent * 2.0 + (sm.latent_bytes + latent * 2.0 if sm.kv_bytes < 2 else 0.0)
    nbytes = q_tokens * heads * width * sm.act_bytes + rows * row_bytes
    return Op("sparse_mla_prefill", "attn_sparse", 2.0 * work * heads * width, nbytes, sm.attn_layer_passes,
              (q_tokens, max(c for _, c in chunks), heads, 1, latent, len(chunks), max(q for q, _ in chunks)),
              "bf16")


def indexer_prefill_op(chunks: tuple[tuple[int, int], ...], sm: ShardedModel) -> Op:
    """The indexer's scores for prefill queries (vLLM: gather the FP8 keys from the cache,
    DeepGEMM's fp8_mqa_logits, top_k_per_row_prefill): every query scores every earlier token
    of its sequence with all indexer heads (replicated across TP), quadratic in the context
    but in FP8 and over 64 x 128 dims. Bytes: the keys gathered (read, written, read), the FP8
    queries and head weights, and the fp32 logits written and read back by the top-k."""
    h, d = sm.index_heads, sm.index_dim
    work = sum(q * (c + q / 2.0) for q, c in chunks)
    q_tokens = sum(q for q, _ in chunks)
    rows = sum(c + q for q, c in chunks)
    nbytes = 3 * rows * sm.index_key_bytes + q_tokens * h * (d + 4) + work * 4.0 * 2
    return Op("indexer_prefill", "indexer", 2.0 * work * h * d, nbytes, sm.index_passes,
              (q_tokens, rows, h, 1, d), _indexer_dtype(sm), kernels=3)


def indexer_decode_op(num_seqs: int, context_sum: int, sm: ShardedModel) -> Op:
    """The indexer's scores for one decode token per sequence over its whole context
    (DeepGEMM's fp8_paged_mqa_logits, then a top-k kernel): linear in the context, reading
    every cached FP8 key, where sparse MLA itself reads at most top-k latents."""
    h, d = sm.index_heads, sm.index_dim
    kv_len = context_sum + num_seqs
    nbytes = kv_len * (sm.index_key_bytes + 4.0 * 2) + num_seqs * h * (d + 4)
    return Op("indexer_decode", "indexer", 2.0 * kv_len * h * d, nbytes, sm.index_passes,
              (num_seqs, kv_len, h, 1, d), _indexer_dtype(sm), kernels=2)


def _indexer_dtype(sm: ShardedModel) -> str:
    """DSA's indexer scores in FP8 (DeepGEMM); a block-sparse GQA model's in its KV format."""
    return "fp8" if sm.kv_lora else kv_kernel_dtype(sm)


def sparse_prefill_ops(chunks: tuple[tuple[int, int], ...], sm: ShardedModel) -> list[Op]:
    """A sparse-attention model's prefill attention: vLLM runs V3's dense MLA prefill while
    the batch's longest prefill sequence fits in top-k (every token is selected; its
    SparseMLA metadata's use_dense_mha), sparse MLA beyond; the indexer scores either way."""
    dense = max(c + q for q, c in chunks) <= sm.index_topk
    attn = attn_prefill_op(chunks, sm) if dense else sparse_mla_prefill_op(chunks, sm)
    return [attn, indexer_prefill_op(chunks, sm)]


def prefill_attention_ops(chunks: tuple[tuple[int, int], ...], sm: ShardedModel) -> list[Op]:
    """The context-dependent work of an iteration's prefill chunks: attention (dense, or DSA's
    sparse MLA and indexer), and a hybrid model's chunked delta rule."""
    if sm.compressed:
        return sm.compressed.prefill_ops(chunks)
    if sm.index_topk:
        ops = sparse_prefill_ops(chunks, sm)
    elif sm.global_head_dim:
        ops = [attn_prefill_op(chunks, view) for view in layer_geometries(sm)]
    else:
        ops = [attn_prefill_op(chunks, sm)]
    if sm.index_passes and not sm.index_topk:  # block-sparse GQA: the indexer beside windowed attention
        ops.append(indexer_prefill_op(chunks, sm))
    if sm.linear_passes:
        ops.append(mamba_prefill_op(chunks, sm) if sm.lin_kind == "mamba2" else linear_prefill_op(chunks, sm))
    return ops


def decode_attention_ops(num_seqs: int, context_sum: int, sm: ShardedModel,
                         decode_sm: ShardedModel | None = None) -> list[Op]:
    """The context-dependent work of an iteration's decodes: attention (timed with
    `decode_sm` where given, cost/releases.py), DSA's indexer scores, and a hybrid model's
    recurrent state step."""
    attn_sm = decode_sm or sm
    if attn_sm.compressed:
        return attn_sm.compressed.decode_ops(num_seqs, context_sum)
    ops = ([attn_decode_op(num_seqs, context_sum, view) for view in layer_geometries(attn_sm)]
           if attn_sm.global_head_dim else [attn_decode_op(num_seqs, context_sum, attn_sm)])
    if sm.index_passes:
        ops.append(indexer_decode_op(num_seqs, context_sum, sm))
    if sm.linear_passes:
        ops.append(linear_decode_op(num_seqs, sm))
    return ops


def iteration_ops(shape: IterationShape, sm: ShardedModel, moe_m: int | None = None,
                  decode_sm: ShardedModel | None = None) -> list[Op]:
    """Every op one micro-batch passes through, across all pipeline stages; decode
    attention is timed with `decode_sm` where given (cost/releases.py)."""
    ops = token_ops(shape.num_tokens, sm, moe_m)
    if shape.prefill_chunks:
        ops.extend(prefill_attention_ops(shape.prefill_chunks, sm))
    if shape.num_decode:
        ops.extend(decode_attention_ops(shape.num_decode, shape.decode_context, sm, decode_sm))
    ops.extend(emit_ops(shape.num_emit, sm))
    return ops

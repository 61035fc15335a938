"""ModelSpec: the shapes of one model that the cost model and memory plan need (layer
count and matrix sizes, attention kind, experts), with the parameter and KV-byte counts
derived from them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simulator.models.compressed import CompressedAttention
from simulator.strict import StrictModel

# OPT's learned position table has max_position_embeddings + 2 rows (HF OPTLearnedPositional-
# Embedding offset, a fairseq legacy).
_OPT_POSITION_OFFSET = 2


# Block-scaled FP8 checkpoints (DeepSeek-V3, Qwen3-*-FP8, MiniMax-M2, ...) quantise weights
# in 128 x 128 tiles, and vLLM refuses to slice an expert's intermediate dimension through a
# tile (its FP8 MoE method checks the per-GPU size against the block; MiniMax-M2's recipe
# says pure TP8 is unsupported: 1,536 / 8 = 192). Checked where FP8 can only mean that
# checkpoint, i.e. the publisher's base release is FP8: FP8 of a bf16 release may be
# vLLM's online per-tensor quantisation, which has no blocks.
FP8_WEIGHT_BLOCK = 128

# DeepSeek-V3.2's indexer quantises each key to FP8 with one fp32 scale per 128 values
# (vLLM's Indexer: quant_block_size 128, the cache row head_dim + head_dim // 128 * 4 bytes).
INDEXER_QUANT_BLOCK = 128


def sparse_latent_bytes(kv_lora: int, rope: int, kv_dtype_bytes: float) -> float:
    """One token's MLA latent in one layer as vLLM's FlashMLA-sparse backend stores it for
    DeepSeek-V3.2 (vllm/v1/attention/backends/mla/flashmla_sparse.py, FlashMLA's README):
    16-bit caches keep the latent as is (576 x 2 = 1,152 B); "fp8" means fp8_ds_mla, the 512
    no-RoPE values in FP8 with an fp32 scale per 128 and the 64 RoPE values in bf16 (656 B);
    4-bit means nvfp4_ds_mla (Blackwell): e2m1 values, an FP8 scale per 16 and FP8 RoPE (352 B)."""
    if kv_dtype_bytes >= 2:
        return (kv_lora + rope) * kv_dtype_bytes
    if kv_dtype_bytes >= 1:
        return kv_lora + kv_lora / 128 * 4 + rope * 2
    return kv_lora / 2 + rope + kv_lora / 16


# vLLM keeps the Gated DeltaNet conv state in the model dtype: its
# MambaStateDtypeCalculator.gated_delta_net_state_dtype resolves mamba_cache_dtype "auto"
# (the default) to the model dtype, whatever the KV-cache dtype (vllm/model_executor/
# layers/mamba/mamba_utils.py); served checkpoints here run bf16/fp16 activations. The
# delta-rule state follows mamba_ssm_cache_dtype, the model dtype too unless the model's
# config names another (ModelSpec.linear_ssm_bytes: Qwen3.5's float32).
LINEAR_CONV_STATE_BYTES = 2.0

# Token-to-expert routing the fused-MoE kernel tables are read under: aiconfigurator's
# collector times each MoE shape under power-law routings (a few experts take most tokens),
# and its own estimator reads alpha 1.2 for the generic MoE family (Mixtral, Qwen2/3-MoE,
# Qwen3-VL-MoE, Qwen3.5, gpt-oss, MiniMax-M2) and 1.01 for DeepSeek-style and the other
# families (aiconfigurator_core 0.12: sdk/models/moe.py, qwen35.py against deepseek.py,
# kimi_k3.py, hybrid_moe.py, ...). At a decode batch the skew sets how many distinct experts
# a step reads.
MoeRouting = Literal["power_law_1.01", "power_law_1.2"]
# Hugging Face model types of those alpha-1.2 families (aiconfigurator maps architectures;
# these are their model types). Other MoE types, and those it does not map, read 1.01.
_SKEWED_ROUTING_MODEL_TYPES = frozenset({"mixtral", "qwen2_moe", "qwen3_moe", "qwen3_vl_moe", "qwen3_5_moe",
                                         "gpt_oss", "minimax_m2"})


def moe_routing_for(model_type: str) -> MoeRouting:
    """The routing a MoE model of this Hugging Face model type is read under."""
    return "power_law_1.2" if model_type in _SKEWED_ROUTING_MODEL_TYPES else "power_law_1.01"


def with_moe_routing(fields: dict, model_type: str) -> dict:
    """ModelSpec fields read from a config.json of `model_type`, a MoE model's routing added."""
    return {**fields, "moe_routing": moe_routing_for(model_type)} if fields.get("num_experts") else fields


class ModelSpec(StrictModel):
    """A decoder-only transformer, described by the shapes that cost time and memory.

    Mixture-of-experts models set num_experts > 0: each MoE layer's MLP is then a router
    plus num_experts gated experts of width moe_ffn_size, experts_per_token of them per
    token, plus num_shared_experts experts every token passes through (DeepSeek). The first
    first_dense_layers layers keep a dense MLP of width ffn_size.

    Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) sets kv_lora_rank > 0: K and V
    are cached as one kv_lora_rank + qk_rope_head_dim latent per token and layer, shared by
    all heads; head_dim is then the non-rotary query/key width and v_head_dim the value width.

    Sliding-window attention (gpt-oss, Gemma-2) sets sliding_window and sliding_layers: that
    many layers attend to, and keep KV for, only the last sliding_window tokens. Llama 4's
    chunked local attention (tokens attend within their 8192-token chunk) is entered the
    same way: vLLM frees the blocks behind the chunk, as it does outside a window.

    Hybrid linear attention (Qwen3-Next, Qwen3.5) sets linear_layers: that many layers are
    Gated DeltaNet mixers in place of attention. Each projects the hidden state to q, k
    (linear_num_key_heads x linear_key_head_dim), v and an output gate z
    (linear_num_value_heads x linear_value_head_dim) plus a decay and a step size per value
    head, runs a short causal conv (linear_conv_kernel taps) over q, k and v, and keeps per
    sequence a fixed recurrent state instead of KV: the conv's last kernel - 1 inputs and a
    key_head_dim x value_head_dim matrix per value head. attn_output_gate: the full-attention
    layers' q projection also emits a sigmoid gate on the attention output (twice q's width).
    shared_expert_gate: a hidden x 1 sigmoid gate scales the shared experts' output.
    linear_kind "mamba2" (Nemotron-H) makes those layers Mamba2 mixers instead, whose shapes
    map one to one: n_groups B/C groups of ssm_state_size are the key heads and dim, the
    mamba heads of mamba_head_dim the value heads and dim, the conv runs over x, B and C,
    and each head keeps a head_dim x state_size state. Nemotron-H also stacks its mixers and
    its MLPs as separate layers, with fewer MLPs than mixers: ffn_free_layers counts the
    mixer layers (num_layers) that have no MLP after them. linear_kind "kda" (Kimi Delta
    Attention: Kimi-K3) decays the state per key channel rather than per head: q, k, v and a
    full-rank output gate each heads x head_dim wide, the decay through a low-rank projection
    (hidden -> key head width -> all key channels), a step size per head; its recurrence is
    costed as Gated DeltaNet's. Llama-Nemotron's NAS-pruned models
    (Llama-3.3-Nemotron-Super-49B) drop the attention of some layers: mixer_free_layers counts
    them; their per-layer MLP widths enter as their mean (ffn_size), which keeps the FLOPs and
    bytes of the whole stack.

    DeepSeek Sparse Attention (DeepSeek-V3.2) sets index_topk on an MLA model: each layer's
    lightning indexer (index_n_heads heads of index_head_dim, its query projected from the
    q_lora latent, one shared key from the hidden state, a per-head weight) scores every
    earlier token in FP8 and MLA attends only to the index_topk best. The indexer keeps its
    own key cache beside the latent (indexer_key_bytes per token and layer). GLM-5.2 shares
    one indexer's top-k across the next few layers (indexer_types "shared"): only
    indexer_layers of them score, hold indexer weights and cache indexer keys.

    DeepSeek-V4 sets `compressed` (models/compressed.py): windowed multi-query attention plus
    4:1 compressed KV under an indexer's top-k, or all of a 128:1 compressed KV, per layer.

    MiniMax-M3's block-sparse attention sets index_topk and sparse_block_size on a GQA model:
    on indexer_layers of its layers an indexer (index_n_heads query heads of index_head_dim from
    the hidden state, one shared key) scores every earlier token, max-pools the scores per
    block of sparse_block_size tokens, and attention reads only the best index_topk //
    sparse_block_size blocks; the other layers attend densely. Its key cache holds one
    index_head_dim key per token and sparse layer, in the KV cache's format.
    """

    name: str
    hf_id: str | None = None
    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    ffn_size: int = Field(gt=0)
    gated_mlp: bool  # SwiGLU: gate, up, down (3 matrices) vs fc1/fc2 (OPT)
    vocab_size: int = Field(gt=0)
    tied_embeddings: bool = False
    max_position_embeddings: int = Field(gt=0)
    attention_bias: bool = False  # bias on q, k, v and o (OPT, HF Llama attention_bias)
    mlp_bias: bool = False
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    learned_pos_embeddings: bool = False  # OPT: a (max_pos + 2) x hidden position table
    published_params_b: float | None = None  # published size, billions, for sanity checks
    qkv_bias: bool = False  # bias on q, k, v only (Qwen2); ignored if attention_bias
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    # One RMSNorm over all of q and one over all of k (MiniMax-M2): under TP each layer
    # all-reduces their variances across ranks before normalising.
    qk_norm_spans_heads: bool = False
    aliases: tuple[str, ...] = ()  # extra names get_model() accepts
    num_experts: int = Field(0, ge=0)  # routed experts per MoE layer; 0 = dense MLP
    experts_per_token: int = Field(0, ge=0)  # top-k experts each token is routed to
    moe_ffn_size: int = Field(0, ge=0)  # intermediate size of one expert
    published_active_params_b: float | None = None  # MoE: published activated size, billions
    num_shared_experts: int = Field(0, ge=0)  # MoE: always-on experts of width moe_ffn_size
    moe_routing: MoeRouting = "power_law_1.01"  # MoE: the routing its kernel tables are read under
    first_dense_layers: int = Field(0, ge=0)  # MoE: leading layers with a dense ffn_size MLP
    kv_lora_rank: int = Field(0, ge=0)  # MLA: latent KV width; 0 = ordinary (GQA) attention
    q_lora_rank: int = Field(0, ge=0)  # MLA: low-rank query width (0 = full-rank q projection)
    qk_rope_head_dim: int = Field(0, ge=0)  # MLA: rotary part of each query/key head
    # Value head width: MLA's; under grouped-query attention 0 means head_dim, and a smaller
    # width makes V (and o_proj's input) narrower than Q and K (MiMo-V2-Flash: 192 and 128).
    v_head_dim: int = Field(0, ge=0)
    sliding_window: int = Field(0, ge=0)  # tokens a sliding-window layer attends to
    sliding_layers: int = Field(0, ge=0)  # how many layers use the sliding window
    # Full-attention layers of another geometry than the sliding ones (Gemma 4: 4 KV heads of
    # 512 against 16 of 256), 0 for the same; global_k_eq_v: they project K only and attend
    # with V = K (no v_proj), as Gemma 4's attention_k_eq_v.
    global_num_heads: int = Field(0, ge=0)
    global_num_kv_heads: int = Field(0, ge=0)
    global_head_dim: int = Field(0, ge=0)
    global_k_eq_v: bool = False
    # The published checkpoint quantises only the routed experts, to this format (gpt-oss:
    # MXFP4 "fp4", Kimi-K2.5: INT4 "int4"); attention, shared experts, embeddings stay 16-bit.
    native_expert_dtype: Literal["fp4", "int4"] | None = None
    # Bits per stored expert weight of that release, its scales included: gpt-oss MXFP4 has an
    # 8-bit (E8M0) scale per 32 values (4.25); Kimi-K2.5's INT4 a bf16 scale per 32 (4.5).
    native_expert_bits: float | None = Field(None, gt=0, le=16)
    # Releases of the model (Hugging Face ids) published before its experts moved to that
    # format, whose experts ship in the block FP8 of `native_fp8` (Kimi-K2-Instruct and
    # -0905; K2-Thinking and K2.5 are INT4): a checkpoint so named is FP8.
    fp8_releases: tuple[str, ...] = ()
    # The publisher's own FP8 release is block-scaled and carries no KV-cache scales (Qwen3
    # *-FP8, DeepSeek-V3/R1, Kimi-K2, MiniMax-M2): served as is, vLLM keeps a 16-bit KV
    # cache. Models without one are served FP8 from NVIDIA ModelOpt checkpoints, which
    # quantise the KV cache to FP8 as well.
    native_fp8: bool = False
    # The publisher's base release itself is FP8 (DeepSeek-V3/R1, Kimi-K2, MiniMax-M2), so a
    # checkpoint named without a quantisation token is FP8. Qwen3's base releases are bf16,
    # with FP8 as separate `-FP8` repositories.
    released_in_fp8: bool = False
    # NVIDIA's NVFP4 (ModelOpt) checkpoint of this model leaves attention in 16-bit and
    # quantises the MoE MLPs (its `ignore` list names every self_attn): MiniMax-M2.5/M2.7,
    # Kimi-K2.5/K2.6. Those of Llama and Qwen3 quantise attention too.
    nvfp4_experts_only: bool = False
    # Weights of a vision encoder (Qwen3-VL's ViT and its mergers) that the server loads
    # but a text-only benchmark never runs: they take memory, not time.
    encoder_params: int = Field(0, ge=0)
    linear_layers: int = Field(0, ge=0)  # Gated DeltaNet layers (no KV; a fixed state per sequence)
    linear_num_key_heads: int = Field(0, ge=0)
    linear_num_value_heads: int = Field(0, ge=0)
    linear_key_head_dim: int = Field(0, ge=0)
    linear_value_head_dim: int = Field(0, ge=0)
    linear_conv_kernel: int = Field(0, ge=0)  # taps of the causal conv over q, k, v
    # Bytes per element of the delta-rule state: vLLM keeps it in the model dtype (2) unless
    # the config's mamba_ssm_dtype says otherwise, as Qwen3.5/3.6's float32 does (vLLM's
    # Qwen3_5ForConditionalGenerationConfig copies it into mamba_ssm_cache_dtype). The conv
    # state stays in the model dtype.
    linear_ssm_bytes: float = Field(2.0, gt=0)
    linear_kind: Literal["gated_deltanet", "mamba2", "kda"] = "gated_deltanet"
    ffn_free_layers: int = Field(0, ge=0)  # mixer layers with no MLP (or MoE) after them (Nemotron-H)
    # Layers whose attention is pruned away, leaving only the MLP (Llama-Nemotron's NAS blocks
    # with a no_op attention): no attention, no KV cache.
    mixer_free_layers: int = Field(0, ge=0)
    # Latent MoE (Nemotron 3 Super/Ultra): the routed experts compute on a projection of the
    # hidden state this wide (fc1_latent_proj before them, fc2_latent_proj after); the router
    # and the shared experts stay on the hidden state. 0: experts on the hidden state.
    moe_latent_size: int = Field(0, ge=0)
    attn_output_gate: bool = False  # q_proj also emits a per-head output gate (Qwen3-Next)
    attn_head_gate: bool = False  # a hidden -> heads projection: one sigmoid scalar gates each head (Step-3.5)
    shared_expert_gate: bool = False  # a hidden -> 1 sigmoid gate on the shared experts
    index_n_heads: int = Field(0, ge=0)  # DSA lightning indexer: scoring heads
    index_head_dim: int = Field(0, ge=0)
    index_topk: int = Field(0, ge=0)  # tokens each query's MLA attends to; 0 = dense attention
    # Layers that run an indexer of their own (GLM-5.2's IndexShare: the rest reuse the last
    # one's top-k and hold no indexer weights or key cache); 0: every attention layer.
    indexer_layers: int = Field(0, ge=0)
    # Block-sparse GQA (MiniMax-M3): the indexer selects whole blocks of this many tokens; 0: DSA.
    sparse_block_size: int = Field(0, ge=0)
    # DeepSeek-V4's windowed and compressed multi-query attention (models/compressed.py):
    # num_kv_heads 1 of head_dim, a q_lora_rank query, qk_rope_head_dim of it rotary.
    compressed: CompressedAttention | None = None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def splits_heads(self, tp: int) -> bool:
        """vLLM's rule for a tensor-parallel size: it divides the query heads, and the KV
        heads divide evenly over it or are replicated whole."""
        return not (self.num_heads % tp or (self.num_kv_heads % tp and tp % self.num_kv_heads))

    def has_block_fp8_experts(self, expert_dtype: str) -> bool:
        """Whether FP8 experts of this model come in the publisher's block-scaled checkpoint
        (`native_fp8`: Qwen3's `-FP8`, DeepSeek, Kimi, MiniMax, GLM), whose 128-wide blocks a
        TP split must not cut (vllm-project/vllm#17569: Qwen3-235B-A22B-FP8 at TP8)."""
        return bool(self.num_experts) and (self.native_fp8 or self.released_in_fp8) and expert_dtype == "fp8"

    def splits_fp8_expert_blocks(self, ways: int) -> bool:
        """Whether a block-FP8 checkpoint's experts split `ways` ways by width without
        cutting a quantisation block (see FP8_WEIGHT_BLOCK)."""
        return self.moe_ffn_size % ways == 0 and (self.moe_ffn_size // ways) % FP8_WEIGHT_BLOCK == 0

    @property
    def has_global_geometry(self) -> bool:
        """Whether the full-attention layers differ from the sliding-window ones in shape."""
        return bool(self.global_num_heads or self.global_num_kv_heads or self.global_head_dim or self.global_k_eq_v)

    @property
    def full_attention_dims(self) -> tuple[int, int, int]:
        """(query heads, KV heads, head dim) of the full-attention layers."""
        return (self.global_num_heads or self.num_heads, self.global_num_kv_heads or self.num_kv_heads,
                self.global_head_dim or self.head_dim)

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_sparse(self) -> bool:
        """Sparse attention: DSA's MLA over the indexer's top-k tokens, or MiniMax-M3's GQA
        over its top-k blocks."""
        return self.index_topk > 0

    @property
    def indexed_layers(self) -> int:
        """Layers that run their own lightning indexer (0 on a dense-attention model)."""
        if not self.is_sparse:
            return 0
        return self.indexer_layers or self.attention_layers

    def indexer_key_bytes(self, kv_dtype_bytes: float) -> float:
        """Bytes of one token's indexer key in one layer: under DSA FP8 values and an fp32
        scale per INDEXER_QUANT_BLOCK whatever the KV format (vLLM's DeepseekV32IndexerCache:
        128 + 4 = 132); a block-sparse GQA model's key in the KV cache's format."""
        if not self.is_mla:
            return self.index_head_dim * kv_dtype_bytes
        return self.index_head_dim + self.index_head_dim / INDEXER_QUANT_BLOCK * 4

    def latent_bytes(self, kv_dtype_bytes: float) -> float:
        """Bytes of one token's MLA latent in one layer. DeepSeek-V3.2's quantised caches
        use FlashMLA's own layouts (sparse_latent_bytes); otherwise latent x element size."""
        if self.is_sparse:
            return sparse_latent_bytes(self.kv_lora_rank, self.qk_rope_head_dim, kv_dtype_bytes)
        return (self.kv_lora_rank + self.qk_rope_head_dim) * kv_dtype_bytes

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.first_dense_layers - self.ffn_free_layers if self.is_moe else 0

    @property
    def ffn_layers(self) -> int:
        """Layers that end in an MLP or MoE block."""
        return self.num_layers - self.ffn_free_layers

    @property
    def kv_layers(self) -> int:
        """Layers whose KV grows with the context (sliding-window layers keep a fixed window;
        linear-attention layers keep a fixed state)."""
        return self.num_layers - self.sliding_layers - self.linear_layers - self.mixer_free_layers

    @property
    def attention_layers(self) -> int:
        """Layers that run softmax attention (all but the linear-attention and attention-free ones)."""
        return self.num_layers - self.linear_layers - self.mixer_free_layers

    @property
    def linear_key_size(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def linear_value_size(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def linear_conv_dim(self) -> int:
        """Channels of the causal conv: q, k and v."""
        return 2 * self.linear_key_size + self.linear_value_size

    def linear_state_elements(self) -> tuple[int, int]:
        """(conv state, recurrent state) elements one sequence holds per linear layer: the
        conv's last kernel - 1 inputs, and a key_head_dim x value_head_dim matrix per value head."""
        conv = self.linear_conv_dim * max(self.linear_conv_kernel - 1, 0)
        return conv, self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices per MLP (or per expert): gate, up, down, or fc1, fc2."""
        return 3 if self.gated_mlp else 2

    @property
    def ffn_per_token(self) -> int:
        """Intermediate width one token's MLP computes: its routed experts' widths for MoE."""
        if not self.is_moe:
            return self.ffn_size
        return (self.experts_per_token + self.num_shared_experts) * self.moe_ffn_size

    @model_validator(mode="after")
    def _check_experts(self) -> ModelSpec:
        if self.is_moe and not (1 <= self.experts_per_token <= self.num_experts and self.moe_ffn_size > 0):
            raise ValueError(
                f"a mixture-of-experts model needs 1 <= experts_per_token <= num_experts "
                f"({self.experts_per_token}, {self.num_experts}) and moe_ffn_size > 0 ({self.moe_ffn_size})")
        return self

    @model_validator(mode="after")
    def _check_variants(self) -> ModelSpec:
        if (self.first_dense_layers + self.ffn_free_layers >= self.num_layers
                or (self.first_dense_layers and not self.is_moe)):
            raise ValueError("first_dense_layers needs a MoE model, and with ffn_free_layers must leave at least "
                             "one MoE (or MLP) layer")
        if self.linear_kind == "mamba2" and not self.linear_layers:
            raise ValueError("linear_kind mamba2 needs linear_layers > 0")
        if self.moe_latent_size and not self.is_moe:
            raise ValueError("moe_latent_size needs a mixture-of-experts model")
        if self.is_mla and not (self.qk_rope_head_dim > 0 and self.v_head_dim > 0):
            raise ValueError("an MLA model (kv_lora_rank > 0) needs qk_rope_head_dim and v_head_dim > 0")
        if (self.sliding_window > 0) != (self.sliding_layers > 0) or self.sliding_layers > self.num_layers:
            raise ValueError("sliding_window and sliding_layers go together; sliding_layers <= num_layers")
        linear = (self.linear_num_key_heads, self.linear_num_value_heads, self.linear_key_head_dim,
                  self.linear_value_head_dim, self.linear_conv_kernel)
        if self.linear_layers and not all(linear):
            raise ValueError("linear_layers > 0 needs the linear heads, head dims and conv kernel > 0")
        if self.linear_layers + self.sliding_layers + self.mixer_free_layers >= self.num_layers:
            raise ValueError("linear_layers + sliding_layers + mixer_free_layers must leave at least one "
                             "full-attention layer")
        if self.mixer_free_layers and self.ffn_free_layers:
            raise ValueError("a layer needs attention, a mixer or an MLP: mixer_free_layers and ffn_free_layers "
                             "do not go together")
        if (self.index_topk > 0 or self.index_n_heads > 0 or self.index_head_dim > 0) and not (
                self.index_topk and self.index_n_heads and self.index_head_dim
                and (self.q_lora_rank if self.is_mla else self.sparse_block_size)):
            raise ValueError("a sparse-attention indexer needs index_topk, index_n_heads and index_head_dim > 0, "
                             "on an MLA model with a q_lora_rank (its query comes from that latent) or on a GQA "
                             "model with a sparse_block_size")
        if self.sparse_block_size and (self.is_mla or not self.is_sparse or self.sliding_layers
                                       or self.index_topk % self.sparse_block_size):
            raise ValueError("sparse_block_size needs a GQA model with index_topk a multiple of it and no "
                             "sliding-window layers")
        if self.indexer_layers and not (self.is_sparse and self.indexer_layers <= self.attention_layers):
            raise ValueError("indexer_layers needs a sparse-attention model (index_topk > 0) and at most its "
                             "attention layers")
        c = self.compressed
        if c and (self.num_kv_heads != 1 or self.is_mla or self.is_sparse or self.sliding_layers
                  or self.linear_layers or not self.q_lora_rank or not self.qk_rope_head_dim
                  or self.num_heads % c.o_groups or c.csa_layers + c.hca_layers > self.num_layers):
            raise ValueError("compressed attention needs one KV head, a q_lora_rank and qk_rope_head_dim, query "
                             "heads a multiple of o_groups, no MLA, sparse, sliding-window or linear layers, and "
                             "csa_layers + hca_layers <= num_layers")
        if self.has_global_geometry:
            heads, kv_heads, _ = self.full_attention_dims
            if not self.sliding_layers or self.is_mla or heads % kv_heads:
                raise ValueError("a full-attention geometry of its own (global_*) needs sliding-window layers, "
                                 "no MLA, and query heads that are a multiple of its KV heads")
        if self.linear_layers and self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError("linear_num_value_heads must be a multiple of linear_num_key_heads")
        return self

    @model_validator(mode="after")
    def _check_heads(self) -> ModelSpec:
        # head_dim * num_heads may differ from hidden_size (Qwen3-32B: 64 x 128 != 5120);
        # only grouped-query attention's grouping must be exact.
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        return self

    @property
    def param_count(self) -> int:
        """Exact parameter count from the architecture (what the weights occupy)."""
        h = self.hidden_size
        norm_params = h * (2 if self.norm == "layernorm" else 1)  # LayerNorm has a bias
        dense_mlp = self._mlp_params(self.ffn_size)
        if self.is_moe:
            moe_mlp = (self.num_experts * self._expert_params + self.num_shared_experts * self._mlp_params(
                self.moe_ffn_size) + h * self.num_experts  # + router
                       + 2 * h * self.moe_latent_size)  # + the latent projections
            if self.mlp_bias:
                moe_mlp += self.num_experts  # router bias
            mlp_total = self.moe_layers * moe_mlp + self.first_dense_layers * dense_mlp
        else:
            mlp_total = self.ffn_layers * dense_mlp
        if self.is_moe and self.shared_expert_gate:
            mlp_total += self.moe_layers * h
        body = (self._attention_params_total + self.indexed_layers * self.indexer_params
                + self.linear_layers * self._linear_params
                + (2 * self.num_layers - self.ffn_free_layers - self.mixer_free_layers) * norm_params + mlp_total)
        embed = self.vocab_size * h
        lm_head = 0 if self.tied_embeddings else self.vocab_size * h
        positions = (
            (self.max_position_embeddings + _OPT_POSITION_OFFSET) * h
            if self.learned_pos_embeddings
            else 0
        )
        streams = self.compressed.head_params(h) if self.compressed else 0  # V4's final mix of the residual streams
        return body + embed + lm_head + positions + norm_params + streams + self.encoder_params

    @property
    def _attention_params(self) -> int:
        h = self.hidden_size
        if self.is_mla:
            qk = self.head_dim + self.qk_rope_head_dim
            heads = self.num_heads
            q_proj = (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * heads * qk
                      if self.q_lora_rank else h * heads * qk)
            kv_a = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv_b = self.kv_lora_rank * heads * (self.head_dim + self.v_head_dim)
            gate = h * heads * self.v_head_dim if self.attn_output_gate else 0  # Kimi-K3's g_proj
            return q_proj + kv_a + kv_b + gate + heads * self.v_head_dim * h
        return self._gqa_params(self.num_heads, self.num_kv_heads, self.head_dim)

    def value_dim(self, head_dim: int) -> int:
        """V's width per head in a grouped-query layer whose queries and keys are head_dim wide."""
        return self.v_head_dim or head_dim

    def _gqa_params(self, heads: int, kv_heads: int, head_dim: int, k_eq_v: bool = False) -> int:
        """One grouped-query attention layer: q, k (and v) projections, o_proj from the values."""
        h, q, k = self.hidden_size, heads * head_dim, kv_heads * head_dim
        v = 0 if k_eq_v else kv_heads * self.value_dim(head_dim)
        out = heads * self.value_dim(head_dim)
        gate = (out if self.attn_output_gate else 0) + (heads if self.attn_head_gate else 0)
        attn = h * (q + gate + k + v) + out * h
        if self.attention_bias:
            attn += q + k + v + h
        elif self.qkv_bias:
            attn += q + k + v
        if self.qk_norm:
            attn += 2 * head_dim
        return attn

    @property
    def _attention_params_total(self) -> int:
        """All attention layers' projections: the full-attention layers at their own geometry
        (DeepSeek-V4: every layer's attention and hyper-connections, the compressors and indexers)."""
        if self.compressed:
            c, h = self.compressed, self.hidden_size
            return (self.num_layers * c.layer_params(h, self.num_heads, self.head_dim, self.q_lora_rank)
                    + c.compression_params(h, self.head_dim, self.q_lora_rank))
        if not self.has_global_geometry:
            return self.attention_layers * self._attention_params
        full = self._gqa_params(*self.full_attention_dims, self.global_k_eq_v)
        return self.sliding_layers * self._attention_params + (self.attention_layers - self.sliding_layers) * full

    @property
    def replicated_params(self) -> int:
        """Weights vLLM holds whole on every TP rank rather than splitting: sparse-attention
        indexers, a latent MoE's projections into and out of the latent (cost/ops.moe_ops),
        DeepSeek-V4's compressors and indexers."""
        latent = self.moe_layers * 2 * self.hidden_size * self.moe_latent_size
        compression = (self.compressed.compression_params(self.hidden_size, self.head_dim, self.q_lora_rank)
                       if self.compressed else 0)
        return self.indexed_layers * self.indexer_params + latent + compression

    @property
    def indexer_params(self) -> int:
        """One layer's indexer. DSA's lightning indexer: wq_b (q_lora -> heads x dim), wk
        (hidden -> dim), the LayerNorm on its key (weight and bias) and weights_proj (hidden ->
        heads). A block-sparse GQA model's: q (hidden -> heads x dim), k (hidden -> dim) and
        an RMSNorm on each."""
        if not self.is_sparse:
            return 0
        heads, dim = self.index_n_heads, self.index_head_dim
        if not self.is_mla:
            return self.hidden_size * (heads + 1) * dim + 2 * dim
        return self.q_lora_rank * heads * dim + self.hidden_size * (dim + heads) + 2 * dim

    @property
    def _linear_params(self) -> int:
        """One Gated DeltaNet layer: in_proj (q, k, v, z and the per-value-head decay and step
        size), the depthwise conv (no bias), per-head A_log and dt_bias, the gated RMSNorm
        over a value head, and out_proj."""
        h, k, v, heads = self.hidden_size, self.linear_key_size, self.linear_value_size, self.linear_num_value_heads
        conv = self.linear_conv_dim * self.linear_conv_kernel
        if self.linear_kind == "kda":
            # q, k, v and the output gate; the step size per head and the decay's low-rank
            # down projection (replicated); its up projection to every key channel; the conv
            # (no bias); A_log per head and dt_bias per key channel; the gated RMSNorm over a
            # head; o_proj.
            rank = self.linear_key_head_dim
            return (h * (2 * k + 2 * v + heads + rank) + rank * k + conv + heads + k
                    + self.linear_value_head_dim + v * h)
        if self.linear_kind == "mamba2":
            # in_proj to z, x, B, C and one step size per head; the conv with its bias; A_log,
            # D and dt_bias per head; the gated RMSNorm over all of x's width; out_proj.
            return h * (2 * k + 2 * v + heads) + conv + self.linear_conv_dim + 3 * heads + v + v * h
        in_proj = h * (2 * k + 2 * v + 2 * heads)
        return in_proj + conv + 2 * heads + self.linear_value_head_dim + v * h

    def _mlp_params(self, width: int) -> int:
        n = self.mlp_matrices
        params = n * self.hidden_size * width
        if self.mlp_bias:
            params += (n - 1) * width + self.hidden_size
        return params

    @property
    def expert_param_count(self) -> int:
        """Routed-expert weights (what native_expert_dtype checkpoints quantise)."""
        return self.moe_layers * self.num_experts * self._expert_params

    @property
    def active_param_count(self) -> int:
        """Parameters one token passes through: all but the experts it is not routed to."""
        if not self.is_moe:
            return self.param_count
        idle = self.num_experts - self.experts_per_token
        return self.param_count - self.moe_layers * idle * self._expert_params

    @property
    def _expert_params(self) -> int:
        """One routed expert: an MLP of moe_ffn_size on the hidden state, or on its latent."""
        if not self.moe_latent_size:
            return self._mlp_params(self.moe_ffn_size)
        n, width = self.mlp_matrices, self.moe_ffn_size
        return n * self.moe_latent_size * width + ((n - 1) * width + self.moe_latent_size if self.mlp_bias else 0)

    def weight_bytes(self, dtype_bytes: float) -> float:
        return self.param_count * dtype_bytes

    def linear_state_bytes_per_layer(self, conv_dtype_bytes: float = LINEAR_CONV_STATE_BYTES) -> float:
        """Recurrent state one sequence holds in one linear-attention layer: the conv state
        in `conv_dtype_bytes`, the delta-rule matrices in `linear_ssm_bytes`."""
        conv, delta = self.linear_state_elements()
        return conv * conv_dtype_bytes + delta * self.linear_ssm_bytes

    def linear_state_bytes(self, conv_dtype_bytes: float = LINEAR_CONV_STATE_BYTES) -> float:
        """Recurrent state one sequence holds across all linear-attention layers."""
        return self.linear_layers * self.linear_state_bytes_per_layer(conv_dtype_bytes)

    def kv_bytes_per_token(self, kv_dtype_bytes: float) -> float:
        """K and V of every context-length layer: layers x kv_heads x (K + V head widths) x bytes,
        or one latent of kv_lora_rank + qk_rope_head_dim per layer under MLA (plus the
        indexer's key under sparse attention)."""
        if self.compressed:  # its own FP8 layouts, whatever kv_dtype_bytes asks for
            return self.compressed.kv_bytes_per_token(self.compressed.csa_layers, self.compressed.hca_layers)
        if self.is_mla:
            return (self.kv_layers * self.latent_bytes(kv_dtype_bytes)
                    + self.indexed_layers * self.indexer_key_bytes(kv_dtype_bytes))
        _, kv_heads, head_dim = self.full_attention_dims
        gqa = self.kv_layers * kv_heads * (head_dim + self.value_dim(head_dim)) * kv_dtype_bytes
        return gqa + self.indexed_layers * self.indexer_key_bytes(kv_dtype_bytes) if self.is_sparse else gqa

"""DeepSeek-V4's compressed attention: the shapes that set its weights, cache and per-sequence state.

Every layer is multi-query attention with one 512-wide head that is both K and V (the last 64
values rotary), over a window of the latest raw tokens. Besides the window:
- a CSA layer (compress ratio 4) pools each 4 tokens' KV into one entry, from overlapping
  windows of 8, and attends to the top-k entries a lightning indexer picks (its own 4:1
  compressed keys, FP8);
- an HCA layer (ratio 128) pools 128 tokens into one entry and attends to all of them;
- the rest attend to the window alone.
The query comes from a low-rank latent. The output projection is grouped: each group of heads
maps to an o_lora_rank latent (wo_a), and wo_b maps all groups' latents to the hidden state.
The residual stream is hc_mult copies of the hidden state (manifold-constrained hyper-
connections), mixed before and after each sublayer.

Sources: DeepSeek's inference/model.py for V4 (its Compressor, Indexer and Block), vLLM's
deepseek_v4 model, attention layer and compressor, and its FlashMLA cache layouts
(vllm/v1/attention/backends/mla/sparse_swa.py).
"""

from __future__ import annotations

from pydantic import Field

from simulator.strict import StrictModel

# One cached KV entry as vLLM's FlashMLA layout holds it for V4 (fp8_ds_mla, the only KV format
# vLLM accepts for the model): 448 FP8 values, 64 bf16 rotary values, their scales and padding.
V4_KV_ENTRY_BYTES = 448 + 64 * 2 + 8
# One indexer key: 128 FP8 values and an fp32 scale (vLLM's default FP8 indexer cache).
V4_INDEX_KEY_BYTES = 128 + 4
# The compressor keeps its fp32 running state per sequence: ratio x coff slots of kv and gate
# (coff 2 for the overlapping 4:1 windows, 1 for 128:1), each coff x width wide.
_STATE_ELEMENT_BYTES = 4


class CompressedAttention(StrictModel):
    """DeepSeek-V4's attention layout (module docstring); ModelSpec.compressed."""

    window: int = Field(gt=0)  # raw tokens every layer attends to
    csa_layers: int = Field(ge=0)  # layers attending to the indexer's top-k of their 4:1 compressed KV
    hca_layers: int = Field(ge=0)  # layers attending to all of their 128:1 compressed KV
    csa_ratio: int = Field(4, gt=0)
    hca_ratio: int = Field(128, gt=0)
    topk: int = Field(gt=0)  # compressed entries a CSA query attends to
    index_heads: int = Field(gt=0)
    index_dim: int = Field(gt=0)
    o_lora_rank: int = Field(gt=0)
    o_groups: int = Field(gt=0)
    hc_mult: int = Field(1, gt=0)  # residual streams (1: a plain residual)

    def coff(self, ratio: int) -> int:
        """Overlapping windows (4:1) pool twice the width: the previous window's half and this one's."""
        return 2 if ratio == self.csa_ratio else 1

    def compressor_params(self, ratio: int, width: int, hidden: int) -> int:
        """One compressor: wkv and wgate (hidden -> coff x width), the per-position bias (ape),
        the RMSNorm of its output."""
        c = self.coff(ratio)
        return 2 * hidden * c * width + ratio * c * width + width

    def layer_params(self, hidden: int, heads: int, head_dim: int, q_lora: int) -> int:
        """Every layer's attention and hyper-connections (compressors and indexers apart:
        compressor_params)."""
        core = (hidden * q_lora + q_lora + q_lora * heads * head_dim  # wq_a, q_norm, wq_b
                + hidden * head_dim + head_dim  # wkv, kv_norm
                + heads * head_dim * self.o_lora_rank + self.o_groups * self.o_lora_rank * hidden  # wo_a, wo_b
                + heads)  # attention sink
        mixes = (2 + self.hc_mult) * self.hc_mult  # pre, post and the comb matrix per sublayer
        hyper = 2 * (mixes * self.hc_mult * hidden + mixes + 3) if self.hc_mult > 1 else 0
        return core + hyper

    def compression_params(self, hidden: int, head_dim: int, q_lora: int) -> int:
        """All layers' compressors, and the CSA layers' indexers (their query, head weights
        and own compressor): weights vLLM holds whole on every TP rank, as they serve the one
        KV head."""
        indexer = (q_lora * self.index_heads * self.index_dim + hidden * self.index_heads
                   + self.compressor_params(self.csa_ratio, self.index_dim, hidden))
        return (self.csa_layers * (self.compressor_params(self.csa_ratio, head_dim, hidden) + indexer)
                + self.hca_layers * self.compressor_params(self.hca_ratio, head_dim, hidden))

    def head_params(self, hidden: int) -> int:
        """The hyper-connections' final mix into one stream before the norm and LM head."""
        return self.hc_mult * self.hc_mult * hidden + self.hc_mult + 1 if self.hc_mult > 1 else 0

    def kv_bytes_per_token(self, csa_layers: int, hca_layers: int) -> float:
        """Cache growth per token of context: a compressed entry (and an indexer key) per
        ratio tokens on those layers; the raw window does not grow."""
        return (csa_layers * (V4_KV_ENTRY_BYTES + V4_INDEX_KEY_BYTES) / self.csa_ratio
                + hca_layers * V4_KV_ENTRY_BYTES / self.hca_ratio)

    def state_bytes(self, layers: int, csa_layers: int, hca_layers: int, head_dim: int) -> float:
        """What one sequence holds whatever its length: every layer's window of raw entries,
        and the compressors' running state (the main and the indexer's on CSA layers)."""
        def ring(ratio: int, width: int) -> int:
            c = self.coff(ratio)
            return ratio * c * 2 * c * width * _STATE_ELEMENT_BYTES
        return (layers * self.window * V4_KV_ENTRY_BYTES
                + csa_layers * (ring(self.csa_ratio, head_dim) + ring(self.csa_ratio, self.index_dim))
                + hca_layers * ring(self.hca_ratio, head_dim))

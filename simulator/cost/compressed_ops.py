"""DeepSeek-V4's attention as ops: the projections, compressors and indexers per token, and the
windowed plus compressed multi-query attention per prefill chunk and decode step
(models/compressed.py describes the layout).

vLLM runs all of a layer's attention, window and compressed entries alike, as one FlashMLA
sparse kernel over FP8 entries, with the query heads padded to its tile; no kernel table
times it, so it is the roofline's `attn_sparse` family, as DeepSeek-V3.2's sparse MLA is.
The indexer scores the 4:1 compressed keys in FP8 (DeepGEMM), the `indexer` family.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.cost.ops import (
    SPARSE_PREFILL_HEAD_TILE,
    Op,
    ShardedModel,
    elementwise,
    gemm,
    windowed_work,
)
from simulator.models.compressed import V4_INDEX_KEY_BYTES, V4_KV_ENTRY_BYTES, CompressedAttention


@dataclass(frozen=True, slots=True)
class CompressedGeometry:
    """One GPU's share of a compressed-attention model (ShardedModel.compressed): the layout
    as the model gives it, and what TP and PP make of it."""

    layout: CompressedAttention  # window, ratios, top-k, indexer and output shapes (ModelSpec.compressed)
    heads: int  # query heads on this GPU
    kernel_heads: int  # as FlashMLA computes them: padded up to its head tile
    head_dim: int  # the one KV head's width, K = V
    q_lora: int
    swa_passes: int  # layer passes of each kind
    csa_passes: int
    hca_passes: int
    groups: int  # output groups on this GPU

    @classmethod
    def build(cls, model, tp: int, passes: int) -> CompressedGeometry:
        c = model.compressed
        heads = model.num_heads // tp
        csa = round(passes * c.csa_layers / model.num_layers)
        hca = round(passes * c.hca_layers / model.num_layers)
        return cls(layout=c, heads=heads,
                   kernel_heads=-(-heads // SPARSE_PREFILL_HEAD_TILE) * SPARSE_PREFILL_HEAD_TILE,
                   head_dim=model.head_dim, q_lora=model.q_lora_rank, swa_passes=passes - csa - hca,
                   csa_passes=csa, hca_passes=hca, groups=max(1, c.o_groups // tp))

    @property
    def passes(self) -> int:
        return self.swa_passes + self.csa_passes + self.hca_passes

    def projection_ops(self, m: int, sm: ShardedModel) -> tuple[list[Op], list[Op]]:
        """(before attention, after it). Before: the query latent and the KV (one replicated
        GEMM), their norms, the query heads, the per-head norm and RoPE, the KV's RoPE, FP8
        quantisation and window write; the compressors (wkv and wgate in bf16, replicated) and
        their pooling into the running state; the indexer's query, head weights and
        compressor. After: the grouped output projection (wo_a per group, wo_b)."""
        a, h, d, n, c = sm.act_bytes, sm.hidden, self.head_dim, self.passes, self.layout
        before = [
            gemm("q_a_kv_proj", m, self.q_lora + d, h, sm, n),
            elementwise("q_kv_norm", 3 * m * (self.q_lora + d) * a, n, kernels=2),
            gemm("q_b_proj", m, self.heads * d, self.q_lora, sm, n),
            elementwise("q_norm_rope_kv_write", 2 * m * self.heads * d * a + m * (d * a + V4_KV_ENTRY_BYTES), n,
                        kernels=3),
        ]
        for name, ratio, count in (("csa", c.csa_ratio, self.csa_passes), ("hca", c.hca_ratio, self.hca_passes)):
            if count:
                width = 2 * c.coff(ratio) * d  # kv and gate
                before += [gemm(f"{name}_compressor", m, width, h, sm, count, quantized=False),
                           elementwise(f"{name}_compress_pool", m * width * 4.0 * 2, count)]
        if self.csa_passes:
            ih, idim, count = c.index_heads, c.index_dim, self.csa_passes
            before += [
                gemm("indexer_wq_b", m, ih * idim, self.q_lora, sm, count),
                gemm("indexer_weights_compressor", m, ih + 2 * c.coff(c.csa_ratio) * idim, h, sm, count,
                     quantized=False),
                elementwise("indexer_rope_quant", m * ih * idim * (2 * a + 1) + m * ih * (a + 4), count, kernels=3),
            ]
        per_group = self.heads // self.groups * d
        after = [
            elementwise("attn_sink_unrope", 2 * m * self.heads * d * a, n),
            gemm("wo_a", m, self.groups * c.o_lora_rank, per_group, sm, n),
            gemm("wo_b", m, h, self.groups * c.o_lora_rank, sm, n),
        ]
        return before, after

    def stream_ops(self, m: int, sm: ShardedModel) -> list[Op]:
        """The hyper-connections around each of a layer's two sublayers (vLLM fuses one
        sublayer's post-mix with the next one's pre-mix): read and write the hc_mult residual
        streams, read the sublayer's output, write its input. The mixing weights' FLOPs are
        negligible."""
        streams = self.layout.hc_mult
        if streams < 2:
            return []
        per_sublayer = m * sm.hidden * sm.act_bytes * (2 * streams + 2)
        return [elementwise("hyper_connections", 2 * per_sublayer, self.passes, kernels=2)]

    def _attention(self, name: str, work: float, entries: float, q_rows: float, count: int,
                   shape: tuple) -> Op:
        """One FlashMLA sparse launch per layer pass: scores and values over `work` (query,
        entry) pairs at the padded heads; FP8 entries read once; queries in, outputs out."""
        d = self.head_dim
        flops = 2.0 * self.kernel_heads * 2 * d * work
        nbytes = entries * V4_KV_ENTRY_BYTES + q_rows * self.heads * d * 2.0 * 2
        return Op(name, "attn_sparse", flops, nbytes, count, shape, "bf16")

    def decode_ops(self, num_seqs: int, context_sum: int) -> list[Op]:
        """One query per sequence: its window of raw entries, plus on CSA layers the
        indexer's top-k of the 4:1 entries and on HCA layers every 128:1 entry. The batch's
        sums stand for each sequence's own caps. The CSA indexer scores every 4:1 key."""
        c = self.layout
        kv = context_sum + num_seqs
        window = min(kv, num_seqs * c.window)
        shape = (num_seqs, kv, self.kernel_heads, 1, self.head_dim)
        ops = []
        if self.swa_passes:
            ops.append(self._attention("swa_attn_decode", window, window, num_seqs, self.swa_passes, shape))
        if self.csa_passes:
            chosen = window + min(kv / c.csa_ratio, num_seqs * c.topk)
            ops.append(self._attention("csa_attn_decode", chosen, chosen, num_seqs, self.csa_passes, shape))
            keys = kv / c.csa_ratio
            ih, idim = c.index_heads, c.index_dim
            ops.append(Op("indexer_decode", "indexer", 2.0 * keys * ih * idim,
                          keys * (V4_INDEX_KEY_BYTES + 4.0 * 2) + num_seqs * ih * (idim + 4),
                          self.csa_passes, (num_seqs, keys, ih, 1, idim), "fp8", kernels=2))
        if self.hca_passes:
            every = window + kv / c.hca_ratio
            ops.append(self._attention("hca_attn_decode", every, every, num_seqs, self.hca_passes, shape))
        return ops

    def prefill_ops(self, chunks: tuple[tuple[int, int], ...]) -> list[Op]:
        """Each chunk's queries over the raw window (causal within it) and their compressed
        entries so far: up to top-k of the 4:1 ones (CSA), all of the 128:1 ones (HCA). The
        CSA indexer scores every 4:1 key before each query, in FP8."""
        lay = self.layout
        q_tokens = sum(q for q, _ in chunks)
        window_work = sum(windowed_work(q, c, lay.window) for q, c in chunks)
        window_rows = sum(min(c, lay.window) + q for q, c in chunks)
        full_work = sum(q * (c + q / 2.0) for q, c in chunks)
        rows = sum(c + q for q, c in chunks)
        shape = (q_tokens, max(c for _, c in chunks), self.kernel_heads, 1, self.head_dim, len(chunks),
                 max(q for q, _ in chunks))
        ops = []
        if self.swa_passes:
            ops.append(self._attention("swa_attn_prefill", window_work, window_rows, q_tokens, self.swa_passes,
                                       shape))
        if self.csa_passes:
            r = lay.csa_ratio
            chosen = sum(windowed_work(q, c, r * lay.topk) for q, c in chunks) / r
            ops.append(self._attention("csa_attn_prefill", window_work + chosen, window_rows + rows / r, q_tokens,
                                       self.csa_passes, shape))
            ih, idim, pairs = lay.index_heads, lay.index_dim, full_work / r
            ops.append(Op("indexer_prefill", "indexer", 2.0 * pairs * ih * idim,
                          3 * rows / r * V4_INDEX_KEY_BYTES + q_tokens * ih * (idim + 4) + pairs * 4.0 * 2,
                          self.csa_passes, (q_tokens, rows / r, ih, 1, idim), "fp8", kernels=3))
        if self.hca_passes:
            r = lay.hca_ratio
            ops.append(self._attention("hca_attn_prefill", window_work + full_work / r, window_rows + rows / r,
                                       q_tokens, self.hca_passes, shape))
        return ops

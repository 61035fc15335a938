"""Op families of the kernel tables: how a table row and an op of ops.py map onto a
discrete key and continuous coordinates, and which op a row stands for."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import get_args

from calibration.profile import FAMILY_COLUMNS
from simulator.cost.calibrated.gemm_rows import monotone_gemm_rows
from simulator.cost.calibrated.trees import TreeNode
from simulator.cost.ops import (
    MLA_LATENT_HALF,
    Op,
    ShardedModel,
    attn_decode_op,
    attn_prefill_op,
    fused_moe_op,
    linear_decode_op,
    linear_prefill_op,
)
from simulator.dtypes import DTYPE_BYTES
from simulator.memory import MXFP4_MARLIN_TILE
from simulator.models.spec import MoeRouting

FAMILIES = tuple(FAMILY_COLUMNS)

COLLECTIVES = ("allreduce", "allgather", "p2p")

# Elementwise ops of ops.py measured by a dedicated kernel kind; every other one is
# bandwidth-bound like a copy.
ELEMENTWISE_KIND = {"input_norm": "rmsnorm", "post_attn_norm": "rmsnorm", "final_norm": "rmsnorm",
                    "activation": "silu_mul"}


@lru_cache(maxsize=512)
def _attn_model(heads: int, kv_heads: int, head_dim: int, kv_bytes: float) -> ShardedModel:
    """The per-GPU attention dimensions ops.py needs to build a table row's op.

    Derived from a catalog model through ShardedModel.build, so fields added to
    ShardedModel later keep sensible values; only what attention reads is replaced.
    """
    from simulator.models import get_model

    base = ShardedModel.build(get_model("llama-3.1-8b"), 1, 1, "bf16", "bf16", "bf16", 8)
    if kv_heads == 1 and head_dim == MLA_LATENT_HALF:
        # MLA decode as ops.py encodes it: one KV "head" half the latent wide (its K+V
        # bytes are the 512 + 64 latent's), attended by every query head over the latent.
        return replace(base, layers_per_stage=1, pp=1, heads=heads, kv_heads=1, head_dim=128,
                       kv_lora=512, rope_dim=64, hidden=heads * 128, act_bytes=2.0, kv_bytes=kv_bytes)
    return replace(base, layers_per_stage=1, pp=1, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                   hidden=heads * head_dim, act_bytes=2.0, kv_bytes=kv_bytes)


def _log_dist(a: float, b: float) -> float:
    return abs(math.log(a / b))


class _Family:
    """How one op family's rows and ops map onto (key, coordinates)."""

    name = ""
    scales: tuple[str, ...] = ()
    # Per axis: interpolate measured/roofline (True: the roofline's FLOP and byte scaling
    # carries across, e.g. between two measured N) or the time itself (False: plain
    # piecewise-linear, in log-log on "log" axes). Chosen on held-out rows
    # (calibration/evaluate.py); plain where the roofline's kinks and tile steps would
    # misplace the shape (GEMM M, attention).
    ratio: tuple[bool, ...] = ()

    def split(self, shape: tuple) -> tuple[tuple, tuple]:
        raise NotImplementedError

    def eq_op(self, key: tuple, c: tuple) -> Op:
        raise NotImplementedError

    def locate(self, op: Op) -> tuple[tuple, tuple]:
        raise NotImplementedError

    def distance(self, want: tuple, have: tuple) -> float | None:
        """How far a measured key is from the wanted one; None if it cannot stand in."""
        raise NotImplementedError

    def adapt(self, tree: TreeNode, key: tuple, c: tuple) -> tuple:
        return c

    def clean(self, rows: list[list]) -> list[list]:
        """Measured rows as the predictor should read them (physical constraints applied)."""
        return rows

    def in_fit(self, key: tuple) -> bool:
        """Whether rows of `key` shape the family's fitted roofline (a different kernel
        sharing the family, such as MLA's decode, is read but not fitted)."""
        return True

    def same_shape_standin(self, key: tuple, architecture: str) -> tuple | None:
        """Another kernel's key at this very shape whose rows answer for `key` ahead of any
        other shape's (None: no such stand-in)."""
        return None

    def same_shape_standins(self, key: tuple, architecture: str) -> tuple[tuple, ...]:
        """`same_shape_standin`'s key and its fallbacks, in order of preference."""
        standin = self.same_shape_standin(key, architecture)
        return () if standin is None else (standin,)

    # Whether rate_donor can bound a key's time from below (FamilyModel skips the check otherwise).
    has_rate_floor = False

    def rate_donor(self, key: tuple, keys, architecture: str) -> tuple | None:
        """A measured key of the same kernel at another shape whose achieved compute rate
        bounds `key`'s time from below where a stand-in answers for it (None: no bound)."""
        return None

    def donor_point(self, key: tuple, coords: tuple, donor: tuple) -> tuple:
        """The donor's coordinates at which its rate applies to `key` at `coords`."""
        raise NotImplementedError

    def padded(self, key: tuple, coords: tuple) -> tuple[tuple, tuple]:
        """`key` and `coords` on the operands the kernel actually computes (its tile padding)."""
        return key, coords


class _Gemm(_Family):
    name = "gemm"
    scales = ("log", "log", "log")  # N, K, M
    ratio = (True, True, False)

    def clean(self, rows):
        return monotone_gemm_rows(rows)

    def split(self, shape):
        m, n, k, dtype = shape
        return (dtype,), (float(n), float(k), float(m))

    def eq_op(self, key, c):
        n, k, m = c
        dtype = key[0]
        w = DTYPE_BYTES.get(dtype, 2.0)
        # Activations stay 16-bit in memory even under W8A8 (ops.py's accounting).
        return Op("gemm", "gemm", 2.0 * m * n * k, 2.0 * m * k + w * k * n + 2.0 * m * n, 1, (m, n, k), dtype)

    def locate(self, op):
        m, n, k = op.shape
        return (op.dtype,), (float(n), float(k), float(m))

    def distance(self, want, have):
        if want == have:
            return 0.0
        # Same tensor-core rate: bf16 and fp16 stand in for each other.
        return 1.0 if {want[0], have[0]} == {"bf16", "fp16"} else None


class _Attention(_Family):

    def distance(self, want, have):
        h, kvh, d, dt = want
        h2, kvh2, d2, dt2 = have
        same_width = DTYPE_BYTES.get(dt, 2) == DTYPE_BYTES.get(dt2, 2)
        return (_log_dist(h, h2) + _log_dist(kvh, kvh2) + 10 * _log_dist(d, d2)
                + (0.0 if dt == dt2 else 0.1 if same_width else 5.0))


class _Prefill(_Attention):
    name = "attn_prefill"
    scales = ("log", "log", "lin")  # chunks, tokens per chunk, prior context
    ratio = (False, False, False)

    def split(self, shape):
        b, q, c, h, kvh, d, dt = shape
        return (int(h), int(kvh), int(d), dt), (float(b), float(q), float(c))

    def eq_op(self, key, c):
        h, kvh, d, dt = key
        b, q, ctx = c
        one = attn_prefill_op(((q, ctx),), _attn_model(h, kvh, d, DTYPE_BYTES.get(dt, 2.0)))
        return Op("attn_prefill", "attn_prefill", one.flops * b, one.bytes * b, 1,
                  (q * b, ctx, h, kvh, d, b, q), one.dtype)

    def locate(self, op):
        q_total, _max_c, h, kvh, d, n, _max_q = op.shape
        q = q_total / n
        # The FLOP-weighted mean prior context: n equal chunks of q tokens over it do the
        # same attention work as the real chunks.
        c = max(0.0, op.flops / (4.0 * q_total * h * d) - q / 2.0)
        return (h, kvh, d, op.dtype), (float(n), q, c if c > 1e-6 * q else 0.0)

    def adapt(self, tree, key, c):
        b, q, ctx = c
        if ctx > 0 and tree.max_last == 0.0:
            # Tables without prior context (aiconfigurator's): use the fresh prefill with the
            # same causal work, q'^2/2 = q (ctx + q/2), rather than a tiny-chunk anchor.
            return (b, math.sqrt(q * q + 2.0 * q * ctx), 0.0)
        return c


class _Decode(_Attention):
    name = "attn_decode"
    scales = ("lin", "lin")  # sequences, context per sequence
    ratio = (False, False)

    def split(self, shape):
        b, ctx, h, kvh, d, dt = shape
        return (int(h), int(kvh), int(d), dt), (float(b), float(ctx))

    def eq_op(self, key, c):
        h, kvh, d, dt = key
        b, ctx = c
        return attn_decode_op(b, b * ctx - b, _attn_model(h, kvh, d, DTYPE_BYTES.get(dt, 2.0)))

    def locate(self, op):
        n, kv_total, h, kvh, d = op.shape
        return (h, kvh, d, op.dtype), (float(n), kv_total / n)

    def in_fit(self, key):
        return not (key[1] == 1 and key[2] == MLA_LATENT_HALF)


# A key of the other routing at the same shape stands in ahead of any other shape's (the
# rows of profiles written before routing was a column time power-law 1.01 routing), and
# behind it where the shapes are the same distance away.
_OTHER_ROUTING = 1e-3


class _Moe(_Family):
    """Fused MoE tables: one model's expert shape, expert-parallel size, kernel format and
    routing per key; expert width per GPU (TP) and tokens are the axes. Across widths the
    roofline's scaling carries (as across GEMM N)."""

    name = "moe"
    scales = ("log", "log")  # inter per GPU, tokens
    ratio = (True, False)

    def split(self, shape):
        tokens, hidden, inter, topk, experts, ep, routing, dtype = shape
        return (int(hidden), int(topk), int(experts), int(ep), dtype, routing), (float(inter), float(tokens))

    def eq_op(self, key, c):
        hidden, topk, experts, ep, dtype, routing = key
        inter, tokens = c
        return fused_moe_op(tokens, hidden, inter, topk, experts, dtype, ep=ep, routing=routing)

    def locate(self, op):
        m, hidden, inter, topk, experts, *_, ep, routing, label = op.shape
        return (hidden, topk, experts, ep, label, routing), (float(inter), float(m))

    def in_fit(self, key):
        """vLLM's Triton FP8 rows on Blackwell (FP8T) time a kernel a run must ask for: read
        where it does, but kept out of the roofline fitted to the default kernels."""
        return key[4] != "fp8t"

    def distance(self, want, have):
        """Another model's expert shape stands in only at the same expert-parallel size and
        kernel format (vLLM runs other MoE kernels under expert parallelism); the same shape
        under the other routing before any other shape."""
        if want[3:5] != have[3:5]:
            return None
        return (sum(_log_dist(a, b) for a, b in zip(want[:3], have[:3], strict=True))
                + (_OTHER_ROUTING if want[5] != have[5] else 0.0))

    def same_shape_standin(self, key, architecture):
        """Marlin (W4A16M) at an expert shape the tables time only under the default
        16-bit-input kernel (W4A16), on Hopper: those rows time its memory-bound side. Both
        kernels stream the same 4-bit weights, and InferenceMAX's Marlin runs of gpt-oss-120b
        on H100/H200 measured TPOT within 5% of those rows at every TP (docs/fidelity.md);
        another model's Marlin rows scaled by the roofline read its decode a quarter slow.
        Its compute-bound side is bounded by `rate_donor`.

        vLLM's Triton fused MoE for FP8 experts (FP8T) on Hopper, without expert
        parallelism: that is the default kernel there, so the default rows time it."""
        if architecture == "hopper" and key[4] == "w4a16m":
            return (*key[:4], "w4a16", *key[5:])
        if architecture == "hopper" and key[4] == "fp8t" and key[3] == 1:
            return (*key[:4], "fp8", *key[5:])
        return None

    def same_shape_standins(self, key, architecture):
        """The stand-in under the model's routing, then under the other one (a profile
        written before the routing column holds 1.01 rows only)."""
        standin = self.same_shape_standin(key, architecture)
        if standin is None:
            return ()
        return (standin, *((*standin[:5], r) for r in get_args(MoeRouting) if r != standin[5]))

    has_rate_floor = True

    def rate_donor(self, key, keys, architecture):
        """Where Marlin on Hopper reads the default kernel's rows (`same_shape_standin`), its
        prefill cannot run faster than Marlin's own compute rate: an Ampere-era mma.sync
        kernel, it reaches ~200-230 TFLOP/s on an H200 at 8k-16k tokens where OpenAI's
        Triton kernel (wgmma) reaches 414-488 at gpt-oss's shape. The donor is the Marlin key
        of the nearest hidden size at the same expert-parallel size."""
        if key in keys or self.same_shape_standin(key, architecture) is None:
            return None  # its own rows time it, compute and all
        donors = [k for k in keys if k[4] == key[4] and k[3] == key[3]]
        return min(donors, key=lambda k: (k[5] != key[5], _log_dist(k[0], key[0])), default=None)

    def donor_point(self, key, coords, donor):
        """The same expert width per GPU (Marlin's padded one) and the same tokens per expert:
        what sets the tile occupancy and the grouped GEMM's M."""
        inter, tokens = coords
        per_expert = tokens * key[1] / key[2]
        return (_pad(inter, MXFP4_MARLIN_TILE[0]), per_expert * donor[2] / donor[1])

    def padded(self, key, coords):
        """Marlin's operands: hidden and expert width padded to its 256 x 128 tiles."""
        inter, tokens = coords
        return (_pad(key[0], MXFP4_MARLIN_TILE[1]), *key[1:]), (_pad(inter, MXFP4_MARLIN_TILE[0]), tokens)


def _pad(x: float, multiple: int) -> float:
    return math.ceil(x / multiple) * multiple


@lru_cache(maxsize=256)
def _linear_model(k_heads: int, v_heads: int, k_dim: int, v_dim: int) -> ShardedModel:
    """Per-GPU Gated DeltaNet dimensions for a table row's op (conv kernel 4, the only one
    published; the delta-rule state in bf16, as aiconfigurator's collector allocated it, so a
    float32 state, Qwen3.5's in serving, reads the rows scaled by its bytes)."""
    from simulator.models import get_model

    base = ShardedModel.build(get_model("qwen3-next-80b-a3b"), 1, 1, "bf16", "bf16", "bf16", 8)
    return replace(base, layers_per_stage=1, pp=1, linear_passes=1, lin_k_heads=k_heads, lin_v_heads=v_heads,
                   lin_k_dim=k_dim, lin_v_dim=v_dim, lin_conv=4, lin_ssm_bytes=2.0, act_bytes=2.0)


class _LinearAttention(_Family):
    """Gated DeltaNet recurrence tables (aiconfigurator's gdn_perf): per phase and per-GPU
    head counts, over sequences and tokens per sequence. The chunked kernel runs each
    (sequence, head) pair's chunks in order, so a lone long prompt leaves most SMs idle and
    its time follows the tokens per sequence, not the FLOPs: plain interpolation in the
    measured times, with the roofline only carrying a state dtype or shape the rows lack."""

    name = "linear_attn"
    scales = ("log", "log")  # sequences, tokens per sequence
    ratio = (False, False)

    def split(self, shape):
        kind, seqs, tokens, hk, hv, dk, dv = shape
        return (kind, int(hk), int(hv), int(dk), int(dv)), (float(seqs), float(tokens))

    def eq_op(self, key, c):
        kind, hk, hv, dk, dv = key
        seqs, tokens = c
        sm = _linear_model(hk, hv, dk, dv)
        if kind == "decode":
            return linear_decode_op(seqs, sm)
        # fractional coordinates (interpolation points): scale one sequence's op
        one = linear_prefill_op(((max(1, round(tokens)), 0),), sm)
        return Op(one.name, one.family, one.flops * seqs, one.bytes * seqs, 1,
                  (tokens * seqs, seqs, hk, hv, dk, dv, tokens), one.dtype, kernels=one.kernels)

    def locate(self, op):
        """A prefill of uneven chunks reads as equal chunks of the longest one's length, as
        many as carry the same tokens: while (sequence, head) pairs are fewer than the SMs the
        longest chunk's serial steps set the time, and beyond, the total work does."""
        tokens, seqs, hk, hv, dk, dv, longest = op.shape
        if op.name.endswith("_decode"):  # gdn_decode, kda_decode
            return ("decode", hk, hv, dk, dv), (float(seqs), 1.0)
        return ("prefill", hk, hv, dk, dv), (tokens / longest, float(longest))

    def distance(self, want, have):
        """Another head count stands in within the same phase and head widths (the value
        heads set the parallel work; key heads are shared by groups of them)."""
        if want[0] != have[0] or want[3:] != have[3:]:
            return None
        return 2 * _log_dist(want[2], have[2]) + _log_dist(want[1], have[1])


class _Elementwise(_Family):
    name = "elementwise"
    scales = ("log",)
    ratio = (True,)  # latency + bytes/bandwidth: the roofline's own form

    def split(self, shape):
        kind, nbytes, _dt = shape
        return (kind,), (float(nbytes),)

    def eq_op(self, key, c):
        return Op(key[0], "elementwise", 0.0, c[0], 1, (c[0],), "bf16")

    def locate(self, op):
        return (ELEMENTWISE_KIND.get(op.name, op.name),), (float(op.bytes),)

    def distance(self, want, have):
        return 0.0 if want == have else 1.0 if have[0] == "copy" else 2.0


class _Collective(_Family):
    scales = ("log",)
    ratio = (True,)  # alpha + bytes/bandwidth: the roofline's own form

    def __init__(self, name: str):
        self.name = name

    def split(self, shape):
        nbytes, ranks, link, impl, _dt = shape
        return (int(ranks), link, impl), (float(nbytes),)

    def eq_op(self, key, c):
        ranks, link, impl = key
        # The impl rides in the name so that scoring a row compares it with its own impl.
        return Op(f"{self.name}:{impl}", self.name, 0.0, c[0], 1, (c[0], ranks, link), "bf16")

    def locate(self, op):
        nbytes, ranks, link = op.shape
        impl = op.name.partition(":")[2] or None
        return (int(ranks), link, impl), (float(nbytes),)

    def distance(self, want, have):
        ranks, link, impl = want
        if link != have[1] or (impl is not None and impl != have[2]):
            return None
        return abs(math.log2(ranks) - math.log2(have[0]))


FAMILY_ADAPTERS: dict[str, _Family] = {
    "gemm": _Gemm(), "attn_prefill": _Prefill(), "attn_decode": _Decode(), "moe": _Moe(),
    "elementwise": _Elementwise(), "linear_attn": _LinearAttention(), **{c: _Collective(c) for c in COLLECTIVES},
}

"""Which shapes to measure: derived from the models' own op decomposition.

The GEMM (N, K) pairs and attention head counts come from `simulator/cost/ops.py`
applied to each model at each TP degree, so the profile covers exactly the shapes the
simulator will ask about. Torch-free, so plans can be built and tested anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calibration.profile import CalibrationError
from simulator.cost.ops import ShardedModel, emit_ops, expert_gemm_shapes, token_ops
from simulator.models import ModelSpec

GEMM_M = (1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072,
          4096, 6144, 8192, 12288, 16384)
PREFILL_Q = (16, 64, 256, 512, 1024, 2048, 4096, 8192)
PREFILL_CTX = (0, 1024, 4096, 16384)
PREFILL_BATCH = (1, 4)
DECODE_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DECODE_CTX = (128, 512, 1024, 2048, 4096, 8192, 16384, 32768)
COPY_BYTES = tuple(2**p for p in range(16, 31, 2))  # 64 KiB .. 1 GiB
COLLECTIVE_BYTES = tuple(2**p for p in range(10, 29, 2))  # 1 KiB .. 256 MiB

# Device caps: a CPU (tests, laptops) must finish, a GPU must not run out of memory.
_CPU_CAPS = {"prefill_tokens": 1024, "kv_bytes": 256 * 2**20, "copy_bytes": 64 * 2**20, "gemm_m": 1024,
             "gemm_flops": 2e10}
_GPU_CAPS = {"prefill_tokens": 1 << 30, "kv_bytes": 16 * 2**30, "copy_bytes": 2**30, "gemm_m": 1 << 30,
             "gemm_flops": 1e15}


@dataclass
class BenchPlan:
    """Grid points per family; each tuple is one benchmark."""

    gemm: list[tuple[int, int, int, str]] = field(default_factory=list)  # (m, n, k, dtype)
    attn_prefill: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)  # (b, q, ctx, h, kvh, d)
    attn_decode: list[tuple[int, int, int, int, int]] = field(default_factory=list)  # (b, ctx, h, kvh, d)
    elementwise: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, rows, cols)
    collectives: list[tuple[str, int]] = field(default_factory=list)  # (family, bytes)
    models: list[str] = field(default_factory=list)
    tp: list[int] = field(default_factory=list)

    def size(self) -> int:
        return (len(self.gemm) + len(self.attn_prefill) + len(self.attn_decode)
                + len(self.elementwise) + len(self.collectives))


def _coarse_first(values: list) -> list:
    """Order a sorted grid so any prefix spans its range: ends, then halves, quarters..."""
    n = len(values)
    if n <= 2:
        return list(values)
    order, seen = [0, n - 1], {0, n - 1}
    step = n - 1
    while len(order) < n:
        step = max(1, step // 2)
        for i in range(0, n, step):
            if i not in seen:
                seen.add(i)
                order.append(i)
    return [values[i] for i in order]


def _check_shardable(models: list[ModelSpec], tps: list[int]) -> None:
    """A TP degree no model can be split over would measure nothing: say so up front."""
    for tp in tps:
        if not any(m.splits_heads(tp) for m in models):
            heads = ", ".join(f"{m.name}: {m.num_heads} heads, {m.num_kv_heads} KV heads" for m in models)
            raise CalibrationError(f"TP {tp} cannot split the attention heads of any model measured ({heads})",
                                   where="--tp", fix="use TP degrees that divide the head counts, e.g. --tp 1,2,4,8")


def build_plan(models: list[ModelSpec], tps: list[int], *, quick: bool = False, device: str = "cuda",
               token_budget: int = 8192, dtypes: tuple[str, ...] = ("bf16",)) -> BenchPlan:
    """The grid for these models and TP degrees; `quick` is a seconds-long smoke grid."""
    caps = _CPU_CAPS if device == "cpu" else _GPU_CAPS
    tps = sorted(set(tps))
    _check_shardable(models, tps)
    if quick:
        tps = tps[-1:]  # the largest TP has the smallest shapes
    plan = BenchPlan(models=[m.name for m in models], tp=tps)
    gemm_nk: dict[tuple[int, int], None] = {}
    heads: dict[tuple[int, int, int], None] = {}
    widths: dict[tuple[int, int], None] = {}  # (hidden, ffn per GPU)
    for model in models:
        for tp in tps:
            if not model.splits_heads(tp):
                continue
            sm = ShardedModel.build(model, tp, 1, "bf16", "bf16", "bf16", 8)
            for op in (*token_ops(1, sm), *emit_ops(1, sm)):
                if op.family == "gemm":
                    gemm_nk[(op.shape[1], op.shape[2])] = None
            if sm.num_experts:  # one expert's (N, K): the GEMM fit then covers the MoE shapes
                gemm_nk.update(dict.fromkeys(expert_gemm_shapes(sm)))
            heads[(sm.heads, sm.kv_heads, sm.head_dim)] = None
            widths[(sm.hidden, sm.ffn)] = None
    if quick:
        ms = [1, 16, 128]
        # A CPU smoke test keeps the shapes distinct but 8x smaller, so it finishes in seconds.
        shrink = 8 if device == "cpu" else 1
        nks = {(max(64, n // shrink), max(64, k // shrink)): None for n, k in gemm_nk}
    else:
        ms = [m for m in GEMM_M if m <= min(token_budget, caps["gemm_m"])]
        nks = gemm_nk
    # Both ends of M for every (N, K) first, then the M between them level by level: a budget
    # cut still leaves every shape its memory-bound and its compute-bound end.
    fits = {(n, k): _coarse_first([m for m in ms if 2.0 * m * n * k <= caps["gemm_flops"]]) for n, k in nks}
    ends = [(m, n, k) for (n, k), order in fits.items() for m in order[:2]]
    rest = [(m, n, k) for m in _coarse_first(ms) for (n, k), order in fits.items() if m in order[2:]]
    for m, n, k in ends + rest:
        for dt in dtypes:
            plan.gemm.append((m, n, k, dt))

    if quick:
        qs, ctxs, batches = [16, 64], [0, 64], [1, 2]
        dec_b, dec_c = [1, 4], [64, 256]
        head_list = list(heads)[:1]
    else:
        qs = [q for q in PREFILL_Q if q <= min(token_budget, caps["prefill_tokens"])]
        ctxs = [c for c in PREFILL_CTX if c <= caps["prefill_tokens"]]
        batches, dec_b, dec_c = list(PREFILL_BATCH), list(DECODE_BATCH), list(DECODE_CTX)
        head_list = list(heads)
    for q in _coarse_first(qs):
        for c in ctxs:
            for b in batches:
                for h, kvh, d in head_list:
                    plan.attn_prefill.append((b, q, c, h, kvh, d))
    for c in _coarse_first(dec_c):
        for b in dec_b:
            for h, kvh, d in head_list:
                if b * c * 2 * kvh * d * 2 <= caps["kv_bytes"]:
                    plan.attn_decode.append((b, c, h, kvh, d))

    copy_sizes = [s for s in COPY_BYTES if s <= caps["copy_bytes"]]
    if quick:
        copy_sizes = copy_sizes[:3]
    for s in _coarse_first(copy_sizes):
        plan.elementwise.append(("copy", 1, s // 2))  # bf16 elements
    rows = [1, 64, 1024] if quick else [m for m in (1, 16, 128, 512, 2048, 8192) if m <= token_budget]
    for hidden, ffn in list(widths)[:1]:
        for m in rows:
            if m * max(hidden, 2 * ffn) * 2 <= caps["copy_bytes"]:
                plan.elementwise.append(("rmsnorm", m, hidden))
                plan.elementwise.append(("silu_mul", m, ffn))
    sizes = COLLECTIVE_BYTES[::3] if quick else COLLECTIVE_BYTES
    for fam in ("allreduce", "allgather", "p2p"):
        for s in sizes:
            plan.collectives.append((fam, s))
    return plan

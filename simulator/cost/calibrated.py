"""Calibrated back end: op times from a measured (or imported) kernel profile.

The op decomposition is the one in ops.py; only the source of each op's time changes.
For one op:

1. Map it to its family table: a discrete key (GEMM dtype; attention heads, KV heads,
   head dim; elementwise kind; collective ranks and link) and continuous coordinates
   (GEMM (N, K, M); prefill (chunks, tokens per chunk, prior context); decode
   (sequences, context per sequence); bytes for the rest).
2. Interpolate the measured times one axis at a time: piecewise linear in log-log for
   GEMM M and prefill tokens, in time for context and batch. Across GEMM N and K, and
   across bytes, the ratio measured/roofline is interpolated instead, so the roofline's
   FLOP and byte scaling carries between measured shapes (the "scale a nearby shape by
   its FLOP/byte ratio" rule, made continuous). Results are clamped between the two
   bracketing measurements: exact on grid points, and monotone wherever the
   measurements are. Outside the measured range the ratio is held at its edge value:
   the fitted roofline extrapolates, anchored to the last measurement, so predictions
   stay continuous at the edge of the grid.
3. A key the profile lacks (an (H, KVH) pair never measured) borrows the nearest key,
   scaled by the roofline ratio of the real op to its stand-in. A family without rows
   (collectives measured on one GPU) uses the default roofline.

"The roofline" is RooflineTimer with a RooflineEfficiency fitted per family by least
squares on relative error, against the datasheet peaks of the profile's GPU (for a CPU
profile: the best throughput it measured).
"""

from __future__ import annotations

import itertools
import math
import statistics
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from calibration.profile import (
    FAMILY_COLUMNS,
    CalibrationError,
    FamilyFit,
    Profile,
    load_profile,
    profile_gpu,
    resolve_profile,
    shipped_profiles,
)
from simulator.cost.config import MEASURED_LAUNCH_US, CostModelConfig, RooflineEfficiency
from simulator.cost.ops import Op, ShardedModel, attn_decode_op, attn_prefill_op, fused_moe_op
from simulator.cost.roofline import RooflineTimer
from simulator.cost.sustained import SustainedRate, sustained_factor, sustained_rates
from simulator.dtypes import DTYPE_BYTES
from simulator.errors import CatalogError, ConfigError
from simulator.hardware import GPUSpec, get_gpu

FAMILIES = tuple(FAMILY_COLUMNS)
COLLECTIVES = ("allreduce", "allgather", "p2p")
# Elementwise ops of ops.py measured by a dedicated kernel kind; every other one is
# bandwidth-bound like a copy.
ELEMENTWISE_KIND = {"input_norm": "rmsnorm", "post_attn_norm": "rmsnorm", "final_norm": "rmsnorm",
                    "activation": "silu_mul"}
_EFF_FIELDS = {  # which RooflineEfficiency fields each family's fit sets
    "gemm": ("gemm_compute", "gemm_memory"),
    "attn_prefill": ("attention_compute", "attention_memory"),
    "attn_decode": ("attention_compute", "attention_memory"),
    "elementwise": (None, "elementwise_memory"),
    "moe": ("gemm_compute", "gemm_memory"),
}
_HUGE = 1e12


# -- op families: keys, coordinates and the op a table row stands for -----------------
@lru_cache(maxsize=512)
def _attn_model(heads: int, kv_heads: int, head_dim: int, kv_bytes: float) -> ShardedModel:
    """The per-GPU attention dimensions ops.py needs to build a table row's op.

    Derived from a catalog model through ShardedModel.build, so fields added to
    ShardedModel later keep sensible values; only what attention reads is replaced.
    """
    from simulator.models import get_model

    base = ShardedModel.build(get_model("llama-3.1-8b"), 1, 1, "bf16", "bf16", "bf16", 8)
    return replace(base, layers_per_stage=1, pp=1, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                   hidden=heads * head_dim, act_bytes=2.0, kv_bytes=kv_bytes)


def _log_dist(a: float, b: float) -> float:
    return abs(math.log(a / b))


# A GEMM is "slower than at the next measured M" when it takes this much longer there...
SLOWER_MARGIN = 1.02
# ...and such slowdowns at one (dtype, M) are the kernel's, not noise, when the share of
# shapes showing one exceeds 1/2 by this many binomial standard deviations (sign test).
SYSTEMATIC_SIGMAS = 4.0


def _by_shape(rows: list[list]) -> list[list[list]]:
    """GEMM rows grouped by (N, K, dtype), each group in increasing M."""
    groups: dict[tuple, list[list]] = {}
    for r in rows:
        groups.setdefault((r[1], r[2], r[3]), []).append(r)
    return [sorted(g, key=lambda r: r[0]) for g in groups.values()]


def systematic_gemm_slowdowns(rows: list[list]) -> set[tuple[str, int]]:
    """(dtype, M) where most measured shapes run slower than at the next larger M.

    Engines pick GEMM kernels by M (vLLM's CUTLASS FP8 dispatch), so a slow configuration
    at one M shows up across shapes: on the shipped H200 table FP8 at M=32 is >2% slower
    than at M=48 for 67% of 323 shapes (median +13% on N, K >= 4096); on B200/B300 FP8 at
    M=1 for 90%/99% (about +14 µs per GEMM). Timer noise slows a shape at random: at any
    other (dtype, M) the share stays within 1.5 standard deviations of one half.
    """
    return _slowdowns_in(_by_shape(rows))


def _slowdowns_in(groups: list[list[list]]) -> set[tuple[str, int]]:
    slower: dict[tuple[str, int], list[bool]] = {}
    for group in groups:
        for a, b in itertools.pairwise(group):
            slower.setdefault((a[3], a[0]), []).append(a[4] > SLOWER_MARGIN * b[4])
    return {key for key, v in slower.items()
            if len(v) >= 8 and sum(v) / len(v) > 0.5 + SYSTEMATIC_SIGMAS * 0.5 / math.sqrt(len(v))}


def monotone_gemm_rows(rows: list[list]) -> list[list]:
    """Each GEMM time capped by the fastest measured time at a larger M, unless the
    slowdown is systematic (`systematic_gemm_slowdowns`).

    A GEMM with fewer rows could run the larger one's kernel on padded input, so an
    isolated slower point is launch or clock noise (B200 FP8: 8192x8192 at M=2 timed
    38 µs, at M=4 19 µs); left in, such a spike makes a batch of 2 decode slower than a
    batch of 8. A slowdown most shapes share at that M is the kernel the engine really
    runs there, and is kept as measured.
    """
    groups = _by_shape(rows)
    keep = _slowdowns_in(groups)
    out: list[list] = []
    for group in groups:
        best = math.inf
        for r in reversed(group):
            as_measured = r[4] <= best or (r[3], r[0]) in keep
            out.append(r if as_measured else [*r[:4], best, *r[5:]])
            best = min(best, r[4])
    return out


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

    def adapt(self, tree: _Node, key: tuple, c: tuple) -> tuple:
        return c

    def clean(self, rows: list[list]) -> list[list]:
        """Measured rows as the predictor should read them (physical constraints applied)."""
        return rows


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


class _Moe(_Family):
    """Fused MoE tables: one model's expert shape and expert-parallel size per key; expert
    width per GPU (TP) and tokens are the axes. Across widths the roofline's scaling
    carries (as across GEMM N)."""

    name = "moe"
    scales = ("log", "log")  # inter per GPU, tokens
    ratio = (True, False)

    def split(self, shape):
        tokens, hidden, inter, topk, experts, ep, dtype = shape
        return (int(hidden), int(topk), int(experts), int(ep), dtype), (float(inter), float(tokens))

    def eq_op(self, key, c):
        hidden, topk, experts, ep, dtype = key
        inter, tokens = c
        return fused_moe_op(tokens, hidden, inter, topk, experts, dtype, ep=ep)

    def locate(self, op):
        m, hidden, inter, topk, experts, *_, ep, label = op.shape
        return (hidden, topk, experts, ep, label), (float(inter), float(m))

    def distance(self, want, have):
        """Another model's expert shape stands in only at the same expert-parallel size and
        kernel format (vLLM runs other MoE kernels under expert parallelism)."""
        if want[3:] != have[3:]:
            return None
        return sum(_log_dist(a, b) for a, b in zip(want[:3], have[:3], strict=True))


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
    "elementwise": _Elementwise(), **{c: _Collective(c) for c in COLLECTIVES},
}


# -- interpolation trees --------------------------------------------------------------
class _Node:
    """Sorted measured values of one axis, each with the sub-tree (or time) beneath it."""

    __slots__ = ("kids", "max_last", "vals")

    def __init__(self, vals: list[float], kids: list):
        self.vals = vals
        self.kids = kids
        self.max_last = 0.0


def _build(points: list[tuple[tuple, float]], depth: int) -> _Node | float:
    if depth == len(points[0][0]):
        # Repeated measurements of one shape: their median (plain Python: most leaves hold
        # one row, and numpy's per-call cost dominated building a profile's trees).
        return float(statistics.median(t for _, t in points))
    groups: dict[float, list] = {}
    for c, t in points:
        groups.setdefault(c[depth], []).append((c, t))
    vals = sorted(groups)
    node = _Node(vals, [_build(groups[v], depth + 1) for v in vals])
    node.max_last = max(c[-1] for c, _ in points)
    return node


# -- fitting the roofline to a family ----------------------------------------------------
def _with_links(gpu: GPUSpec, **update) -> GPUSpec:
    return gpu.model_copy(update={
        "intra_node_link": gpu.intra_node_link.model_copy(update=update),
        "inter_node_link": gpu.inter_node_link.model_copy(update=update),
    })


def _efficiency(base: RooflineEfficiency, **update) -> RooflineEfficiency:
    return RooflineEfficiency(**{**base.model_dump(), **update})


def _bounded_lstsq(a: np.ndarray, y: np.ndarray, lb: np.ndarray, default: np.ndarray) -> np.ndarray:
    """Least squares with lower bounds, by a small active set (at most three unknowns)."""
    n = a.shape[1]
    fixed = {j: float(default[j]) for j in range(n) if not a[:, j].any()}
    x = np.zeros(n)
    for _ in range(n + 1):
        free = [j for j in range(n) if j not in fixed]
        x = np.array([fixed.get(j, 0.0) for j in range(n)])
        if free:
            rhs = y - a[:, list(fixed)] @ x[list(fixed)] if fixed else y
            x[free] = np.linalg.lstsq(a[:, free], rhs, rcond=None)[0]
        bad = [j for j in free if x[j] < lb[j]]
        if not bad:
            return x
        worst = min(bad, key=lambda j: x[j] - lb[j])
        fixed[worst] = float(lb[worst])
    return np.maximum(x, lb)


def _fit_max(t: np.ndarray, xc: np.ndarray, xm: np.ndarray, xl: np.ndarray, x0: np.ndarray) -> np.ndarray:
    """Fit t ≈ max(a·xc, b·xm) + L·xl (a, b ≥ 1 i.e. η ≤ 1; L ≥ 0) on relative error.

    The max makes it non-linear; with each point's bound (compute or memory) fixed it is
    linear, so alternate: assign bounds, solve, re-assign, until the assignment settles.
    """
    lb = np.array([1.0, 1.0, 0.0])
    p = x0.copy()
    best, best_loss = p, math.inf
    prev = None
    for _ in range(30):
        comp = p[0] * xc >= p[1] * xm
        a = np.column_stack([xc * comp, xm * ~comp, xl]) / t[:, None]
        p = _bounded_lstsq(a, np.ones_like(t), lb, x0)
        loss = float(np.sum(((np.maximum(p[0] * xc, p[1] * xm) + p[2] * xl) / t - 1.0) ** 2))
        if loss < best_loss:
            best, best_loss = p.copy(), loss
        if prev is not None and np.array_equal(comp, prev):
            break
        prev = comp
    return best


def fit_roofline(family: str, ops: list[Op], times: np.ndarray, gpu: GPUSpec,
                 base: RooflineEfficiency, latency_us: float) -> tuple[RooflineTimer, dict]:
    """A RooflineTimer whose efficiencies and per-kernel latency are fitted to measured times.

    The regressors are the roofline's own terms, each evaluated with the other resources
    made free, so the fitted model is exactly what RooflineTimer.op_time computes.
    """
    if family in COLLECTIVES:
        bw_only = RooflineTimer(_with_links(gpu, latency_us=0.0), _efficiency(base, collective_bandwidth=1.0))
        alpha_only = RooflineTimer(_with_links(gpu, latency_us=1.0, bandwidth_gbps=_HUGE), base)
        xb = np.array([bw_only.op_time(o) for o in ops])
        ya = np.array([alpha_only.op_time(o) for o in ops]) * 1e6  # alpha terms per op
        x0 = np.array([1.0 / base.collective_bandwidth, gpu.intra_node_link.latency_us * 1e-6])
        a = np.column_stack([xb, ya]) / times[:, None]
        inv_eta, alpha = (float(v) for v in _bounded_lstsq(a, np.ones_like(times), np.array([1.0, 0.0]), x0))
        eff = _efficiency(base, collective_bandwidth=1.0 / inv_eta)
        # Catalog link bandwidths stay; only alpha and the efficiency are fitted.
        fitted = _with_links(gpu, latency_us=alpha * 1e6)
        return RooflineTimer(fitted, eff, latency_us), {"eta_memory": 1.0 / inv_eta, "latency_us": alpha * 1e6}
    c_field, m_field = _EFF_FIELDS[family]
    free_mem = gpu.model_copy(update={"hbm_tbps": _HUGE})
    free_compute = gpu.model_copy(update={"peak_tflops": dict.fromkeys(gpu.peak_tflops, _HUGE)})
    free_all = free_compute.model_copy(update={"hbm_tbps": _HUGE})
    t_m = RooflineTimer(free_compute, _efficiency(base, **{m_field: 1.0}), 0.0)
    t_l = RooflineTimer(free_all, base, 1.0)
    xm = np.array([t_m.op_time(o) for o in ops])
    xl = np.round(np.array([t_l.op_time(o) for o in ops]) * 1e6)  # kernel launches per op
    if c_field is None:
        xc = np.zeros_like(xm)
    else:
        t_c = RooflineTimer(free_mem, _efficiency(base, **{c_field: 1.0}), 0.0)
        xc = np.array([t_c.op_time(o) for o in ops])
    x0 = np.array([1.0 / getattr(base, c_field) if c_field else 1.0, 1.0 / getattr(base, m_field),
                   latency_us * 1e-6])
    a, b, lat = (float(v) for v in _fit_max(times, xc, xm, xl, x0))
    update = {m_field: 1.0 / b}
    if c_field is not None:
        update[c_field] = 1.0 / a
    info = {"eta_compute": 1.0 / a if c_field else None, "eta_memory": 1.0 / b, "latency_us": lat * 1e6}
    return RooflineTimer(gpu, _efficiency(base, **update), lat * 1e6), info


# -- one family's predictor --------------------------------------------------------------
@dataclass
class _Row:
    key: tuple
    coords: tuple
    seconds: float


class FamilyModel:
    """Interpolating predictor for one op family, with its fitted roofline."""

    def __init__(self, family: str, rows: list[list], gpu: GPUSpec, config: CostModelConfig):
        self.family = family
        self.adapter = FAMILY_ADAPTERS[family]
        n_shape = len(FAMILY_COLUMNS[family])
        ad = self.adapter
        self.rows = []
        for r in ad.clean(rows):
            key, coords = ad.split(tuple(r[:n_shape]))
            self.rows.append(_Row(key, coords, float(r[n_shape]) * 1e-6))
        if not self.rows:
            raise CalibrationError(f"no {family} rows to fit")
        ops = [ad.eq_op(r.key, r.coords) for r in self.rows]
        times = np.array([r.seconds for r in self.rows])
        self.timer, self.fit_info = fit_roofline(family, ops, times, gpu, config.efficiency,
                                                 config.overheads().kernel_latency_us)
        grouped: dict[tuple, list] = {}
        for r in self.rows:
            grouped.setdefault(r.key, []).append((r.coords, r.seconds))
        self.trees = {k: _build(v, 0) for k, v in grouped.items()}
        self._cands: dict[tuple, list[tuple]] = {}
        # The shape ratios follow. GEMMs use the plain roofline of the fitted timer, without
        # its tile and wave steps: those depend on N and K, and carried across N or K by a
        # ratio they would put steps into M that the measurements do not have.
        self._r = self._smooth_gemm if family == "gemm" else self.timer.op_time
        self._eq = ad.eq_op
        self._log = tuple(s == "log" for s in ad.scales)
        self._ratio = ad.ratio
        self._ndim = len(ad.scales)

    def _smooth_gemm(self, op: Op) -> float:
        t = self.timer
        return (max(op.flops / (t.peak(op.dtype) * t.eff.gemm_compute), op.bytes / (t.bw * t.eff.gemm_memory))
                + t.latency * t._gemm_kernels(op.dtype))

    def candidates(self, key: tuple) -> list[tuple]:
        """Measured keys that answer for `key`: itself, or the nearest stand-ins."""
        found = self._cands.get(key)
        if found is None:
            if key in self.trees:
                found = [key]
            else:
                scored = [(d, k) for k in self.trees if (d := self.adapter.distance(key, k)) is not None]
                best = min((d for d, _ in scored), default=None)
                found = [k for d, k in scored if d == best]
                if self.family not in COLLECTIVES:
                    found = found[:1]
            self._cands[key] = found
        return found

    def predict(self, op: Op) -> float | None:
        """Seconds for one call of `op`, or None when no measured key can stand in."""
        key, coords = self.adapter.locate(op)
        cands = self.candidates(key)
        if not cands:
            return None
        r_op = self._r(op)
        best = math.inf
        for k in cands:  # collectives: several implementations; the framework takes the fastest
            tree = self.trees[k]
            c = self.adapter.adapt(tree, k, coords)
            t = self._eval(tree, k, c, 0) * r_op / max(self._r(self._eq(k, c)), 1e-15)
            best = min(best, t)
        return best

    def _eval(self, node, key: tuple, q: tuple, d: int) -> float:
        if d == self._ndim:
            return node
        vals = node.vals
        x = q[d]
        i = bisect_left(vals, x)
        n = len(vals)
        if i < n and vals[i] == x:
            return self._eval(node.kids[i], key, q, d + 1)
        r, eq = self._r, self._eq
        if i == 0 or i == n:  # outside the measured range: hold the ratio at the edge
            j = 0 if i == 0 else n - 1
            qe = (*q[:d], vals[j], *q[d + 1:])
            te = self._eval(node.kids[j], key, qe, d + 1)
            return te * r(eq(key, q)) / max(r(eq(key, qe)), 1e-15)
        x0, x1 = vals[i - 1], vals[i]
        q0 = (*q[:d], x0, *q[d + 1:])
        q1 = (*q[:d], x1, *q[d + 1:])
        t0 = self._eval(node.kids[i - 1], key, q0, d + 1)
        t1 = self._eval(node.kids[i], key, q1, d + 1)
        if self._log[d]:
            w = math.log(x / x0) / math.log(x1 / x0)
        else:
            w = (x - x0) / (x1 - x0)
            if not self._ratio[d]:
                return t0 + w * (t1 - t0)
        if self._ratio[d]:
            t0r, t1r = t0 / max(r(eq(key, q0)), 1e-15), t1 / max(r(eq(key, q1)), 1e-15)
            t = r(eq(key, q)) * t0r ** (1.0 - w) * t1r ** w
        else:
            t = t0 ** (1.0 - w) * t1 ** w
        lo, hi = (t0, t1) if t0 <= t1 else (t1, t0)
        return min(max(t, lo), hi)


# -- the timer -------------------------------------------------------------------------
def reference_gpu(profile: Profile, template: GPUSpec) -> GPUSpec:
    """The peaks the profile's efficiencies are fitted against.

    A catalog GPU gives its datasheet. A device outside the catalog (a CPU) has none, so
    its best measured throughput stands in for the peaks; links come from `template`.
    """
    if profile.metadata.gpu is not None:
        gpu = get_gpu(profile.metadata.gpu)
        # The scenario's own spec when it is this GPU: it carries any link overrides.
        return template if template.name == gpu.name else gpu
    peaks: dict[str, float] = {}
    gemm = profile.table("gemm")
    if gemm is not None:
        for m, n, k, dt, med, *_ in gemm.rows:
            peaks[dt] = max(peaks.get(dt, 0.0), 2.0 * m * n * k / (med * 1e-6) / 1e12)
    prefill = profile.table("attn_prefill")
    if prefill is not None:
        ad = FAMILY_ADAPTERS["attn_prefill"]
        best = max(ad.eq_op(*ad.split(tuple(r[:7]))).flops / (r[7] * 1e-6) for r in prefill.rows) / 1e12
        peaks["bf16"] = max(peaks.get("bf16", 0.0), best)
    bw = 0.0
    for fam in ("elementwise", "attn_decode"):
        table = profile.table(fam)
        if table is None:
            continue
        ad = FAMILY_ADAPTERS[fam]
        n_shape = len(FAMILY_COLUMNS[fam])
        for r in table.rows:
            key, c = ad.split(tuple(r[:n_shape]))
            bw = max(bw, ad.eq_op(key, c).bytes / (r[n_shape] * 1e-6))
    if "bf16" not in peaks:
        peaks["bf16"] = peaks.get("fp16") or max(peaks.values(), default=0.0) or template.peak_tflops_for("bf16")
    peaks.setdefault("fp16", peaks["bf16"])
    ratio = peaks["bf16"] / template.peak_tflops.get("bf16", peaks["bf16"])
    for dt, v in template.peak_tflops.items():
        peaks.setdefault(dt, v * ratio)
    return template.model_copy(update={
        "name": f"profile:{profile.metadata.gpu_name}",
        "display_name": profile.metadata.gpu_name,
        "peak_tflops": peaks,
        "hbm_tbps": bw / 1e12 if bw > 0 else template.hbm_tbps,
        "num_sms": profile.metadata.compute_units or template.num_sms,
    })


# Families whose compute-bound part runs at the sustained tensor-core rate (sustained.py).
SUSTAINED_FAMILIES = ("gemm", "moe")

# Families whose table rows can run from L2 where a serving step reads DRAM (see op_time).
DRAM_FLOOR_FAMILIES = ("gemm", "attn_decode", "moe")

# Families a profile may lack, timed then by the roofline fitted to another family's rows:
# MoE by the GPU's dense GEMM fit (our own microbenchmarks time GEMMs, not fused MoE).
FIT_FROM = {"moe": "gemm"}


class _FamilyModels(Mapping[str, "FamilyModel"]):
    """The profile's per-family models, each fitted when first asked for: a dense model's
    run never pays for the MoE tables (half of a shipped profile's rows)."""

    def __init__(self, profile: Profile, gpu: GPUSpec, config: CostModelConfig):
        self._tables = {fam: t for fam in FAMILIES if (t := profile.table(fam)) is not None}
        self._gpu, self._config = gpu, config
        self._built: dict[str, FamilyModel] = {}

    def __getitem__(self, family: str) -> FamilyModel:
        model = self._built.get(family)
        if model is None:
            table = self._tables[family]  # KeyError for a family the profile lacks
            model = self._built[family] = FamilyModel(family, table.rows, self._gpu, self._config)
        return model

    def __iter__(self):
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)


class CalibratedTimer:
    """Op times from a calibration profile; the fitted or default roofline where it is silent."""

    name = "calibrated"

    def __init__(self, profile: Profile, gpu: GPUSpec, config: CostModelConfig | None = None):
        config = config or CostModelConfig()
        self.profile = profile
        self.gpu = gpu
        self.dram_bytes_per_s = gpu.hbm_tbps * 1e12
        self.reference = reference_gpu(profile, gpu)
        self.default = RooflineTimer(gpu, config.efficiency, config.overheads().kernel_latency_us)
        # Eager engines pay CPU dispatch per kernel on top of the kernel's measured time.
        self.extra_launch = max(0.0, config.overheads().kernel_latency_us - MEASURED_LAUNCH_US) * 1e-6
        self.models = _FamilyModels(profile, self.reference, config)
        gemm = profile.table("gemm")
        rates = sustained_rates(gemm.rows) if gemm is not None and config.sustained_tensor_rate else {}
        # Only the dtypes that measurably slow down: a lookup miss is the common case.
        self.sustained: dict[str, SustainedRate] = {d: r for d, r in rates.items() if r.fraction < 1.0}

    def _sustain(self, op: Op) -> float:
        """The factor by which `op` runs longer at the sustained rate (1.0 for most ops)."""
        rate = self.sustained.get(op.dtype)
        if rate is None or op.family not in SUSTAINED_FAMILIES:
            return 1.0
        rt = self.models["gemm"].timer
        compute = op.flops / (rt.peak(op.dtype) * rt.eff.gemm_compute)
        memory = op.bytes / (rt.bw * rt.eff.gemm_memory)
        return sustained_factor(compute, memory, rate.fraction)

    def _donor(self, op: Op) -> FamilyModel | None:
        return self.models.get(FIT_FROM.get(op.family, ""))

    def op_time(self, op: Op) -> float:
        model = self.models.get(op.family)
        if model is None:
            donor = self._donor(op)
            if donor is None:
                return self.default.op_time(op)
            return donor.timer.op_time(op) * self._sustain(op) + self.extra_launch * op.kernels
        t = model.predict(op)
        if t is None:
            return model.timer.op_time(op) * self._sustain(op)
        t *= self._sustain(op)
        if op.family in DRAM_FLOOR_FAMILIES:
            # A table row repeats one kernel on the same operands, so those that fit in L2
            # ran from it (L40S and RTX PRO 6000 rows up to 2.6x the DRAM rate). In a serving
            # step a layer's weights and KV come from DRAM: gigabytes of other layers pass
            # through L2 between two reads. No table time undercuts the DRAM read.
            floor = op.bytes / self.dram_bytes_per_s
            if t < floor:
                t = floor
        if self.extra_launch:
            kernels = RooflineTimer._gemm_kernels(op.dtype) if op.family == "gemm" else op.kernels
            t += self.extra_launch * kernels
        return t

    def source_of(self, op: Op) -> str:
        """Where `op`'s time comes from: profile, profile-nearest, roofline-fitted or roofline-default."""
        model = self.models.get(op.family)
        if model is None:
            return "roofline-default" if self._donor(op) is None else "roofline-fitted"
        key, _ = model.adapter.locate(op)
        cands = model.candidates(key)
        if not cands:
            return "roofline-fitted"
        return "profile" if model.adapter.distance(key, cands[0]) == 0 else "profile-nearest"


_TIMERS: dict[tuple, CalibratedTimer] = {}


class NoShippedProfileError(ConfigError):
    """No profile in calibration/profiles/ was measured on this GPU (a broken one is a
    CalibrationError instead, which `auto` must not hide behind the roofline)."""


def shipped_profile_for(gpu: GPUSpec, backend: str = "vllm") -> str:
    """`hardware.profile: auto`: the shipped profile measured on this GPU (vLLM tables first),
    else on the GPU whose kernels it shares (`kernel_tables_from`)."""
    names = shipped_profiles()
    ordered = sorted(names, key=lambda n: (not n.endswith(f"-{backend}"), n))

    def measured_on(name: str) -> str | None:
        gpu_id = profile_gpu(name)
        return get_gpu(gpu_id).name if gpu_id is not None else None

    def named_for(name: str) -> str | None:
        # Shipped files are named <system>-<backend>; reading one's metadata takes ~0.1 s,
        # so read only those whose name points at the GPU first, and the metadata decides.
        try:
            return get_gpu(name.rsplit("-", 1)[0]).name
        except CatalogError:
            return None

    targets = [t for t in (gpu.name, gpu.kernel_tables_from) if t]
    for by_name in (True, False):  # the second pass reads every profile's metadata
        for target in targets:
            for name in ordered:
                if (not by_name or named_for(name) == target) and measured_on(name) == target:
                    return name
    raise NoShippedProfileError(f"no shipped calibration profile for {gpu.name}", where="hardware.profile",
                      fix=f"shipped: {', '.join(names)}; measure one with `simulate calibrate`, "
                      "or use cost_model.backend: roofline")


def calibrated_backend(gpu: GPUSpec, config: CostModelConfig, profile: str | None) -> CalibratedTimer:
    """COST_BACKENDS factory: load the profile, check it belongs to this GPU, fit once."""
    if not profile:
        raise ConfigError("cost_model.backend: calibrated needs a profile", where="hardware.profile",
                          fix="set hardware.profile to a shipped name (e.g. h100_sxm-vllm) or a profile path")
    if profile == "auto":
        profile = shipped_profile_for(gpu)
    path = resolve_profile(profile).resolve()
    prof = load_profile(path)
    meta = prof.metadata
    if meta.gpu is not None and get_gpu(meta.gpu).name not in (gpu.name, gpu.kernel_tables_from):
        raise ConfigError(
            f"profile {profile!r} was measured on {meta.gpu} ({meta.gpu_name}), but hardware.gpu is {gpu.name}",
            where="hardware.profile",
            fix=f"set hardware.gpu: {meta.gpu}, or use a profile made on {gpu.name}")
    st = path.stat()
    cache_key = (str(path), st.st_mtime_ns, gpu.model_dump_json(), config.efficiency.model_dump_json(),
                 config.overheads().kernel_latency_us, config.sustained_tensor_rate)
    timer = _TIMERS.get(cache_key)
    if timer is None:
        if len(_TIMERS) >= 8:
            _TIMERS.pop(next(iter(_TIMERS)))
        timer = _TIMERS[cache_key] = CalibratedTimer(prof, gpu, config)
    return timer


# -- cross-validated fit error -----------------------------------------------------------
def _ape(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    return np.abs(pred - true) / true * 100.0


def score_family(family: str, train: list[list], test: list[list], gpu: GPUSpec,
                 config: CostModelConfig | None = None) -> dict[str, np.ndarray]:
    """Absolute % errors on `test` rows of a model built from `train` rows only.

    Returns arrays for the calibrated predictor, its fitted roofline alone, and the
    roofline with default efficiencies (which needs no training).
    """
    config = config or CostModelConfig()
    model = FamilyModel(family, train, gpu, config)
    default = RooflineTimer(gpu, config.efficiency, config.overheads().kernel_latency_us)
    ad = model.adapter
    n_shape = len(FAMILY_COLUMNS[family])
    cal, fit, dft, true = [], [], [], []
    for r in test:
        key, c = ad.split(tuple(r[:n_shape]))
        op = ad.eq_op(key, c)
        p = model.predict(op)
        cal.append(model.timer.op_time(op) if p is None else p)
        fit.append(model.timer.op_time(op))
        dft.append(default.op_time(op))
        true.append(r[n_shape] * 1e-6)
    t = np.array(true)
    return {"calibrated": _ape(np.array(cal), t), "roofline_fitted": _ape(np.array(fit), t),
            "roofline_default": _ape(np.array(dft), t)}


def cross_validate(profile: Profile, *, template: GPUSpec | None = None, folds: int = 5,
                   max_points: int = 1500, seed: int = 0) -> dict[str, FamilyFit]:
    """Per-family fit summary with k-fold (leave-one-out when small) held-out errors.

    Every scored row is predicted by a model that never saw it. `max_points` caps the
    rows scored per family (training always uses every other row).
    """
    template = template or get_gpu(profile.metadata.gpu or "h100-sxm")
    gpu = reference_gpu(profile, template)
    config = CostModelConfig()
    out: dict[str, FamilyFit] = {}
    rng = np.random.default_rng(seed)
    for fam in FAMILIES:
        table = profile.table(fam)
        if table is None:
            continue
        rows = table.rows
        info = FamilyModel(fam, rows, gpu, config).fit_info
        fit = {"points": len(rows), "eta_compute": info.get("eta_compute"),
               "eta_memory": info.get("eta_memory"), "latency_us": info.get("latency_us")}
        n = len(rows)
        k = n if n <= 3 * folds else folds
        if n >= 3:
            fold = rng.permutation(n) % k
            scored = np.zeros(n, dtype=bool)
            scored[rng.permutation(n)[:max_points]] = True
            errs: dict[str, list] = {"calibrated": [], "roofline_fitted": [], "roofline_default": []}
            for j in range(k):
                test = [rows[i] for i in np.flatnonzero((fold == j) & scored)]
                if not test:
                    continue
                train = [rows[i] for i in np.flatnonzero(fold != j)]
                for name, e in score_family(fam, train, test, gpu, config).items():
                    errs[name].append(e)
            cal = np.concatenate(errs["calibrated"])
            fit.update(cv_folds=k, cv_points=len(cal),
                       cv_median_ape_pct=float(np.median(cal)),
                       cv_p90_ape_pct=float(np.percentile(cal, 90)),
                       roofline_fit_cv_median_ape_pct=float(np.median(np.concatenate(errs["roofline_fitted"]))),
                       default_roofline_median_ape_pct=float(np.median(np.concatenate(errs["roofline_default"]))))
        out[fam] = FamilyFit(**{k_: (round(v, 4) if isinstance(v, float) else v) for k_, v in fit.items()})
    return out

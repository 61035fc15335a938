"""A RooflineTimer fitted to one family's measured times (efficiencies and per-kernel
latency), on the roofline's own terms."""

from __future__ import annotations

import math

import numpy as np

from simulator.cost.calibrated.families import COLLECTIVES
from simulator.cost.config import RooflineEfficiency
from simulator.cost.ops import Op
from simulator.cost.roofline import RooflineTimer
from simulator.hardware import GPUSpec

_EFF_FIELDS = {  # which RooflineEfficiency fields each family's fit sets
    "gemm": ("gemm_compute", "gemm_memory"),
    "attn_prefill": ("attention_compute", "attention_memory"),
    "attn_decode": ("attention_compute", "attention_memory"),
    "elementwise": (None, "elementwise_memory"),
    "moe": ("gemm_compute", "gemm_memory"),
    "linear_attn": ("attention_compute", "attention_memory"),
}


_HUGE = 1e12


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

"""One family's predictor: per-key interpolation trees over the measured rows, scaled by
the fitted roofline between measured shapes."""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from calibration.profile import FAMILY_COLUMNS, CalibrationError
from simulator.cost.calibrated.families import COLLECTIVES, FAMILY_ADAPTERS
from simulator.cost.calibrated.fit import fit_roofline
from simulator.cost.calibrated.trees import build_tree
from simulator.cost.config import CostModelConfig
from simulator.cost.ops import Op
from simulator.hardware import GPUSpec


class _LazyTrees(dict):
    """Interpolation trees by key, each built when first read: a run reads a handful of a
    table's keys (its model's shapes), and building every key's tree was most of a
    profile's start-up."""

    def __init__(self, grouped: dict[tuple, list]):
        super().__init__(dict.fromkeys(grouped))
        self._rows = grouped

    def __getitem__(self, key):
        tree = dict.__getitem__(self, key)
        if tree is None:
            tree = build_tree(self._rows[key], 0)
            self[key] = tree
        return tree


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
        self.architecture = gpu.architecture
        n_shape = len(FAMILY_COLUMNS[family])
        ad = self.adapter
        self.rows = []
        for r in ad.clean(rows):
            key, coords = ad.split(tuple(r[:n_shape]))
            self.rows.append(_Row(key, coords, float(r[n_shape]) * 1e-6))
        if not self.rows:
            raise CalibrationError(f"no {family} rows to fit")
        fitted = [r for r in self.rows if ad.in_fit(r.key)] or self.rows
        ops = [ad.eq_op(r.key, r.coords) for r in fitted]
        times = np.array([r.seconds for r in fitted])
        self.timer, self.fit_info = fit_roofline(family, ops, times, gpu, config.efficiency,
                                                 config.overheads().kernel_latency_us)
        grouped: dict[tuple, list] = {}
        for r in self.rows:
            grouped.setdefault(r.key, []).append((r.coords, r.seconds))
        self.trees = _LazyTrees(grouped)
        self._cands: dict[tuple, list[tuple]] = {}
        self._donors: dict[tuple, tuple | None] = {}
        self._floors = ad.has_rate_floor
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
            elif standins := [k for k in self.adapter.same_shape_standins(key, self.architecture)
                              if k in self.trees]:
                found = standins[:1]
            else:
                scored = [(d, k) for k in self.trees if (d := self.adapter.distance(key, k)) is not None]
                best = min((d for d, _ in scored), default=None)
                found = [k for d, k in scored if d == best]
                if self.family not in COLLECTIVES:
                    found = found[:1]
            self._cands[key] = found
        return found

    def row_op(self, shape: tuple) -> Op:
        """The op a table row's shape columns stand for."""
        key, coords = self.adapter.split(shape)
        return self.adapter.eq_op(key, coords)

    def predict_or_fit(self, op: Op) -> float:
        """Seconds as a simulation reads them: interpolated, else the fitted roofline."""
        t = self.predict(op)
        return self.timer.op_time(op) if t is None else t

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
        return max(best, self._compute_floor(key, coords)) if self._floors else best

    def outside_rows(self, op: Op) -> bool:
        """Whether `op` lies beyond its own key's measured rows on some axis, where its time
        is the edge row's held at the fitted roofline's ratio (a cut grid, or a shape wider
        than any measured): off the simulation's path, for labelling."""
        key, coords = self.adapter.locate(op)
        if key not in self.trees:
            return False
        tree = self.trees[key]
        return self._outside(tree, self.adapter.adapt(tree, key, coords), 0)

    def _outside(self, node, q: tuple, d: int) -> bool:
        if d == self._ndim:
            return False
        vals, x = node.vals, q[d]
        if x < vals[0] or x > vals[-1]:
            return True
        i = bisect_left(vals, x)
        if vals[i] == x:
            return self._outside(node.kids[i], q, d + 1)
        return self._outside(node.kids[i - 1], q, d + 1) or self._outside(node.kids[i], q, d + 1)

    def floor_binds(self, op: Op) -> bool:
        """Whether `op`'s time is its compute floor rather than its rows' (see predict; off
        the simulation's path, so the floor is simply read twice)."""
        if not self._floors:
            return False
        key, coords = self.adapter.locate(op)
        floor = self._compute_floor(key, coords)
        return floor > 0.0 and floor >= (self.predict(op) or 0.0)

    def _compute_floor(self, key: tuple, coords: tuple) -> float:
        """A stand-in kernel's time bounded below by its own kernel's achieved compute rate,
        measured at another shape (`rate_donor`); 0 where none applies."""
        donor = self._donors.get(key, False)
        if donor is False:
            donor = self._donors[key] = self.adapter.rate_donor(key, tuple(self.trees), self.architecture)
        if donor is None:
            return 0.0
        point = self.adapter.donor_point(key, coords, donor)
        t = self._eval(self.trees[donor], donor, point, 0)
        # Only the compute-bound part of the donor's time sets a compute rate: the fitted
        # roofline's compute share of it (a donor row reading many experts' weights at few
        # tokens each is memory-bound, and its time says nothing of Marlin's tensor rate).
        donor_op = self._eq(donor, point)
        compute, memory, rest = self.timer.moe_parts(donor_op)
        t_compute = t * compute / (max(compute, memory) + rest)
        return self._eq(*self.adapter.padded(key, coords)).flops * t_compute / donor_op.flops

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

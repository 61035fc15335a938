"""Held-out fit errors of a profile, family by family (k-fold), as `simulate calibrate`
records them."""

from __future__ import annotations

import numpy as np

from calibration.profile import FAMILY_COLUMNS, FamilyFit, Profile
from simulator.cost.calibrated.families import FAMILIES
from simulator.cost.calibrated.interpolate import FamilyModel
from simulator.cost.calibrated.timer import reference_gpu
from simulator.cost.config import CostModelConfig
from simulator.cost.roofline import RooflineTimer
from simulator.hardware import GPUSpec, get_gpu


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
    n_shape = len(FAMILY_COLUMNS[family])
    cal, fit, dft, true = [], [], [], []
    for r in test:
        op = model.row_op(tuple(r[:n_shape]))
        cal.append(model.predict_or_fit(op))
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

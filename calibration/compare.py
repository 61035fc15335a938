"""How one profile's kernel times compare with another's, regime by regime.

    simulate calibrate compare my-h200.json --against h200_sxm-vllm

Every row of the first profile is predicted by the second (its own interpolation, as a
simulation would read it) and the ratio measured / reference is summarised per family
and regime: GEMMs by dtype and M (decode-sized, mid, prefill-sized), attention by head
size, chunk length and prior context or batch. It answers "do my GPU's kernels run like
the shipped tables?" before a simulation is trusted with them, and shows where a
measuring method or a kernel library differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.profile import FAMILY_COLUMNS, CalibrationError, Profile
from simulator.cost.calibrated.families import FAMILIES
from simulator.cost.calibrated.interpolate import FamilyModel
from simulator.cost.calibrated.timer import reference_gpu
from simulator.cost.config import CostModelConfig
from simulator.errors import ServesimError
from simulator.hardware import get_gpu


@dataclass(frozen=True)
class RegimeRatio:
    family: str
    regime: str
    rows: int
    median: float
    p10: float
    p90: float


def _regime(family: str, shape: tuple) -> tuple[tuple, str]:
    """A row's regime (sort key, label): the axes along which kernels change character."""
    if family == "gemm":
        m, _, _, dtype = shape
        size = 0 if m <= 64 else (1 if m <= 1024 else 2)
        return (dtype, size), f"{dtype}, " + ("M ≤ 64", "M 65–1024", "M > 1024")[size]
    if family == "attn_prefill":
        _, q, ctx, _, _, d, _ = shape
        key = (d, q > 512, ctx > 0)
        return key, (f"head {d}, chunk {'> 512' if q > 512 else '≤ 512'}, "
                     f"{'over a prior context' if ctx else 'fresh'}")
    if family == "attn_decode":
        b, _, _, _, d, _ = shape
        return (d, b > 8), f"head {d}, batch {'> 8' if b > 8 else '≤ 8'}"
    if family == "moe":  # per routing: the two differ most at decode batches
        tokens, routing, dtype = shape[0], shape[-2], shape[-1]
        return ((dtype, routing, tokens > 64),
                f"{dtype}, {routing.replace('power_law_', 'power law ')}, tokens {'> 64' if tokens > 64 else '≤ 64'}")
    if family == "elementwise":
        return (shape[0],), str(shape[0])
    if family == "linear_attn":
        kind, seqs = shape[0], shape[1]
        return (kind, seqs > 8), f"{kind}, sequences {'> 8' if seqs > 8 else '≤ 8'}"
    return (shape[1],), f"{shape[1]} ranks"  # collectives


def unmatched(profile: Profile, reference: Profile) -> dict[tuple[str, str], int]:
    """Rows of `profile` per (family, dtype) that `reference` has no rows of that dtype for
    (FP8 against an A100's tables, anything but BF16 against a CPU's): `compare` leaves
    them out rather than ratio them against a roofline peak the reference never measured."""
    out: dict[tuple[str, str], int] = {}
    for fam in FAMILIES:
        mine, theirs = profile.table(fam), reference.table(fam)
        if mine is None or theirs is None or (measured := _reference_dtypes(fam, theirs)) is None:
            continue
        col, have = measured
        for r in mine.rows:
            if r[col] not in have:
                out[(fam, r[col])] = out.get((fam, r[col]), 0) + 1
    return out


def _reference_dtypes(family: str, table) -> tuple[int, set] | None:
    """The dtype column of a family's rows and the dtypes a table holds; None without one."""
    if "dtype" not in FAMILY_COLUMNS[family]:
        return None
    col = FAMILY_COLUMNS[family].index("dtype")
    return col, {r[col] for r in table.rows}


def compare(profile: Profile, reference: Profile) -> list[RegimeRatio]:
    """measured / reference time per regime, over the families both profiles have and the
    dtypes the reference measured (`unmatched` lists the rest)."""
    gpu = reference_gpu(reference, get_gpu(reference.metadata.gpu or "h100-sxm"))
    config = CostModelConfig()
    out: list[RegimeRatio] = []
    for fam in FAMILIES:
        mine, theirs = profile.table(fam), reference.table(fam)
        if mine is None or theirs is None:
            continue
        model = FamilyModel(fam, theirs.rows, gpu, config)
        n = len(FAMILY_COLUMNS[fam])
        col, have = _reference_dtypes(fam, theirs) or (None, None)
        ratios: dict[tuple, list[float]] = {}
        for row in model.adapter.clean(mine.rows):
            shape = tuple(row[:n])
            if have is not None and shape[col] not in have:
                continue
            try:
                predicted = model.predict_or_fit(model.row_op(shape))
            except ServesimError:  # a dtype the reference GPU has no tensor cores for (FP8 on an A100)
                continue
            if predicted > 0:
                ratios.setdefault(_regime(fam, shape), []).append(float(row[n]) * 1e-6 / predicted)
        for (_, regime), vals in sorted(ratios.items()):
            a = np.asarray(vals)
            out.append(RegimeRatio(fam, regime, len(a), float(np.median(a)), float(np.percentile(a, 10)),
                                   float(np.percentile(a, 90))))
    if not out:
        raise CalibrationError("the two profiles share no op family", where="simulate calibrate compare",
                               fix="compare profiles that both hold e.g. gemm or attention rows")
    return out

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

from simulator.cost.calibrated.cross_validation import cross_validate, score_family
from simulator.cost.calibrated.families import COLLECTIVES, FAMILIES, FAMILY_ADAPTERS
from simulator.cost.calibrated.fit import fit_roofline
from simulator.cost.calibrated.gemm_rows import monotone_gemm_rows, systematic_gemm_slowdowns
from simulator.cost.calibrated.interpolate import FamilyModel
from simulator.cost.calibrated.profiles import (
    NoShippedProfileError,
    calibrated_backend,
    shipped_profile_for,
)
from simulator.cost.calibrated.timer import CalibratedTimer, reference_gpu

__all__ = [
    "COLLECTIVES",
    "FAMILIES",
    "FAMILY_ADAPTERS",
    "CalibratedTimer",
    "FamilyModel",
    "NoShippedProfileError",
    "calibrated_backend",
    "cross_validate",
    "fit_roofline",
    "monotone_gemm_rows",
    "reference_gpu",
    "score_family",
    "shipped_profile_for",
    "systematic_gemm_slowdowns",
]

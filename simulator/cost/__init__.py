"""Execution-time model: one op decomposition, several sources of op times.

`COST_BACKENDS` maps the scenario's `cost_model.backend` to a factory that builds an
op timer; adding a back end is one entry.
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.cost.config import CostModelConfig, RooflineEfficiency
from simulator.cost.model import IterationCostModel, OpTimer
from simulator.cost.ops import IterationShape, ShardedModel
from simulator.cost.roofline import RooflineTimer
from simulator.hardware import GPUSpec


def _roofline(gpu: GPUSpec, config: CostModelConfig, profile: str | None) -> OpTimer:
    return RooflineTimer(gpu, config.efficiency, config.overheads().kernel_latency_us)


def _calibrated(gpu: GPUSpec, config: CostModelConfig, profile: str | None) -> OpTimer:
    from simulator.cost.calibrated import calibrated_backend  # loads calibration/ on demand

    return calibrated_backend(gpu, config, profile)


COST_BACKENDS: dict[str, Callable[[GPUSpec, CostModelConfig, str | None], OpTimer]] = {
    "roofline": _roofline,
    "calibrated": _calibrated,
}

__all__ = [
    "COST_BACKENDS",
    "CostModelConfig",
    "IterationCostModel",
    "IterationShape",
    "OpTimer",
    "RooflineEfficiency",
    "RooflineTimer",
    "ShardedModel",
]

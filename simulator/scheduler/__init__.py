"""Batching policies, keyed by the name used in the scenario's `scheduler.policy`.

Adding a policy is one entry in `POLICIES`: its config model (with a `policy` literal)
and its scheduler class.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple, Union

from pydantic import Field

from simulator.scheduler.base import ItlSink, Scheduler, SchedulerConfigBase, Step
from simulator.scheduler.continuous import ContinuousConfig, ContinuousScheduler
from simulator.scheduler.static import (
    DynamicConfig,
    DynamicScheduler,
    StaticConfig,
    StaticScheduler,
)
from simulator.scheduler.vllm_v0 import VllmV0Config, VllmV0Scheduler
from simulator.scheduler.vllm_v1 import VllmV1Config, VllmV1Scheduler, vllm_default_limits


class Policy(NamedTuple):
    config: type[SchedulerConfigBase]
    scheduler: type[Scheduler]


POLICIES: dict[str, Policy] = {
    "static": Policy(StaticConfig, StaticScheduler),
    "dynamic": Policy(DynamicConfig, DynamicScheduler),
    "continuous": Policy(ContinuousConfig, ContinuousScheduler),
    "vllm-v0": Policy(VllmV0Config, VllmV0Scheduler),
    "vllm-v1": Policy(VllmV1Config, VllmV1Scheduler),
}

SchedulerConfig = Annotated[
    Union[tuple(p.config for p in POLICIES.values())],  # noqa: UP007
    Field(discriminator="policy"),
]

__all__ = [
    "POLICIES",
    "ItlSink",
    "Scheduler",
    "SchedulerConfig",
    "Step",
    "vllm_default_limits",
]

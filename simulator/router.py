"""Routers: which replica receives an arriving request. One registry entry per policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import Field

from simulator.strict import StrictModel


class Routable(Protocol):
    @property
    def outstanding(self) -> int: ...


class RouterConfig(StrictModel):
    policy: Literal["round_robin", "least_outstanding"] = Field(
        "round_robin", description="`round_robin`, or `least_outstanding` (fewest unfinished requests; ties to the lowest index)")


class RoundRobin:
    def __init__(self) -> None:
        self.next = 0

    def choose(self, replicas: Sequence[Routable]) -> int:
        i = self.next
        self.next = (i + 1) % len(replicas)
        return i


class LeastOutstanding:
    def choose(self, replicas: Sequence[Routable]) -> int:
        best, best_load = 0, replicas[0].outstanding
        for i in range(1, len(replicas)):
            load = replicas[i].outstanding
            if load < best_load:
                best, best_load = i, load
        return best


ROUTERS = {"round_robin": RoundRobin, "least_outstanding": LeastOutstanding}


def make_router(config: RouterConfig):
    return ROUTERS[config.policy]()

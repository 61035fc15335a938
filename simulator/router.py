"""Routers: which replica receives an arriving request. One registry entry per policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import Field

from simulator.request import Request
from simulator.strict import StrictModel


class Routable(Protocol):
    @property
    def outstanding(self) -> int: ...


class RouterConfig(StrictModel):
    policy: Literal["round_robin", "least_outstanding", "prefix_affinity"] = Field(
        "round_robin", description="`round_robin`; `least_outstanding` (fewest unfinished requests; "
        "ties to the lowest index); or `prefix_affinity`: requests whose prompts open with the same "
        "shared text go to the replica that first served it, so its prefix cache is reused (as "
        "cache-aware routers such as llm-d's and SGLang's do), unless that replica has more than "
        "`max_imbalance` unfinished requests above the least loaded; the rest by least outstanding")
    max_imbalance: int = Field(
        16, ge=0, description="prefix_affinity: how many more unfinished requests than the least "
        "loaded replica a request's preferred replica may have before the request goes elsewhere")


class RoundRobin:
    def __init__(self, config: RouterConfig) -> None:
        self.next = 0

    def choose(self, replicas: Sequence[Routable], req: Request) -> int:
        i = self.next
        self.next = (i + 1) % len(replicas)
        return i


def least_outstanding(replicas: Sequence[Routable]) -> tuple[int, int]:
    """(index, load) of the replica with the fewest unfinished requests, ties to the lowest."""
    best, best_load = 0, replicas[0].outstanding
    for i in range(1, len(replicas)):
        load = replicas[i].outstanding
        if load < best_load:
            best, best_load = i, load
    return best, best_load


class LeastOutstanding:
    def __init__(self, config: RouterConfig) -> None:
        pass

    def choose(self, replicas: Sequence[Routable], req: Request) -> int:
        return least_outstanding(replicas)[0]


class PrefixAffinity:
    """Sticky by the first shared segment of the prompt, bounded by load."""

    def __init__(self, config: RouterConfig) -> None:
        self.max_imbalance = config.max_imbalance
        self.home: dict[int, int] = {}  # first segment id -> replica

    def choose(self, replicas: Sequence[Routable], req: Request) -> int:
        best, best_load = least_outstanding(replicas)
        # A conversation's first turn shares nothing yet, but its context (`prefix_tail`) opens
        # every later turn's prompt: it is the segment that places the conversation.
        seg = req.prefix[0][0] if req.prefix else req.prefix_tail
        if seg is None:
            return best
        home = self.home.get(seg)
        if home is None:
            self.home[seg] = best
            return best
        if replicas[home].outstanding - best_load > self.max_imbalance:
            return best
        return home


ROUTERS = {"round_robin": RoundRobin, "least_outstanding": LeastOutstanding, "prefix_affinity": PrefixAffinity}


def make_router(config: RouterConfig):
    return ROUTERS[config.policy](config)

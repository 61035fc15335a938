"""The attention-DP ranks of one replica run their forward passes together.

A MoE model served with attention data parallelism splits its experts over every rank, so
each MoE layer is a collective over all ranks: no rank gets past it before the slowest
arrives, and vLLM aligns the ranks' forward passes (idle ranks run dummy ones) so the
collectives match (vLLM docs, serving/data_parallel_deployment.md). A pass therefore lasts
as long as its slowest rank's step, each rank's experts carrying every rank's tokens; a
rank that is prefilling holds up its peers' decode steps for its attention and dense layers
as well as its experts.

The ranks stay separate engines (own scheduler and KV cache); a rank with work joins the
pass starting now, or waits for the one in progress to end. Idle ranks' dummy passes (one
token each) are not costed, nor is vLLM's padding of every rank to the largest token count
when all run CUDA graphs (vllm/v1/worker/dp_utils.py), small for a balanced decode load.
"""

from __future__ import annotations

import simpy

from simulator.cost.model import IterationCostModel, quantised_tokens
from simulator.cost.ops import IterationShape


class LockstepGroup:
    """Forward passes shared by the attention-DP ranks (engines) of one replica."""

    def __init__(self, env: simpy.Environment, cost: IterationCostModel):
        self.env = env
        self.cost = cost
        self.pass_end: simpy.Event | None = None  # fires when the pass in progress ends
        self._joined: list[tuple[object, IterationShape, bool, float]] = []
        self._priced: simpy.Event | None = None  # the pass being formed: fires with its duration
        # Ranks whose step just ended and that have not yet joined the next pass or rested:
        # the next pass is priced only once they have, so it starts with every rank that
        # has work at this instant (closed-loop replacements included).
        self._settling: set[object] = set()

    @property
    def busy(self) -> bool:
        """A pass is in progress (a rank with new work waits for its end)."""
        return self.pass_end is not None and not self.pass_end.processed

    def join(self, rank: object, shape: IterationShape, from_idle: bool, copy_s: float = 0.0) -> simpy.Event:
        """Add `rank`'s step to the pass starting now. The event fires, at this instant, with
        the pass's duration once every rank starting a step now has joined; the rank's step
        then ends with `pass_end`. `copy_s`: KV copies this rank's forward pass waits for
        (Step.copy_s), which hold up its peers' passes too."""
        self._settling.discard(rank)
        self._joined.append((rank, shape, from_idle, copy_s))
        if self._priced is None:
            self._priced = self.env.event()
            self.env.timeout(0).callbacks.append(self._price)
        return self._priced

    def rest(self, rank: object) -> None:
        """`rank` has no step to join now (idle, or waiting for the pass in progress)."""
        self._settling.discard(rank)

    def _price(self, _event: simpy.Event) -> None:
        if self._settling:  # a rank finishing its step at this instant may still join
            self.env.timeout(0).callbacks.append(self._price)
            return
        joined, priced = self._joined, self._priced
        self._joined, self._priced = [], None
        total = sum(shape.num_tokens for _, shape, _, _ in joined)
        duration = max(self.cost.iteration_time(shape, quantised_tokens(total - shape.num_tokens), from_idle) + copy_s
                       for _, shape, from_idle, copy_s in joined)
        self.pass_end = self.env.timeout(duration)
        ranks = {rank for rank, _, _, _ in joined}
        self.pass_end.callbacks.append(lambda _event: self._settling.update(ranks))
        priced.succeed(duration)

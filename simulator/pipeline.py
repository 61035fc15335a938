"""The pipeline stages of one replica, shared by the micro-batches that cross them.

A stage works on one micro-batch at a time, and micro-batches follow each other through the
stages (DESIGN.md §5). A micro-batch holds a stage for its share of the pass (the cost
model's pass over every stage, including the activation sends, divided by the stage count:
the slowest stage's time, which sets the pass) and waits for a stage another micro-batch
holds. Alone, a micro-batch crosses the stages in its pass's time.

Who sends the micro-batches depends on the engine generation. vLLM v1 runs one scheduler
that keeps a micro-batch per stage in flight (engine.py, `_run_queued`), so a prompt's
chunks follow each other through the stages. vLLM v0 runs one virtual engine per stage,
each scheduling its own micro-batch: two prompts that arrive together leave the first stage
one after the other, and a long prefill on one virtual engine holds up the decode steps of
the others at every stage it occupies.
"""

from __future__ import annotations

import simpy


class PipelineStages:
    """One resource per pipeline stage, held by one micro-batch at a time, first come first served."""

    def __init__(self, env: simpy.Environment, stages: int):
        self.env = env
        self.stages = [simpy.Resource(env, capacity=1) for _ in range(stages)]

    def traverse(self, pass_s: float):
        """A SimPy process body: the micro-batch crosses every stage, `pass_s / stages` in each."""
        per_stage = pass_s / len(self.stages)
        for stage in self.stages:
            with stage.request() as held:
                yield held
                yield self.env.timeout(per_stage)

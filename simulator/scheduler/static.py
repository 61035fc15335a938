"""Static and dynamic batching: a batch is formed, then runs to completion without joins.

Static: wait for `max_batch_size` requests (or for the last ones, when no more can
arrive); the batch is padded to its longest prompt and longest output, as a plain
`generate()` call computes it. Dynamic (Triton-style): dispatch when the queue reaches
`max_batch_size` or its oldest request has waited `max_wait_ms`; prompts are packed
without padding and finished sequences stop computing, but nobody joins mid-batch.
"""

from __future__ import annotations

from itertools import islice
from typing import Literal

from pydantic import Field

from simulator.cost.ops import IterationShape
from simulator.request import Request
from simulator.scheduler.base import Scheduler, SchedulerConfigBase, Step


class _BatchConfig(SchedulerConfigBase):
    def resolve_limits(self, gpu_name, gpu_memory_gib, max_model_len, release=None):
        # Only sizes the activation estimate of the memory plan: a batch of 2k-token prompts.
        return self.max_batch_size * min(max_model_len, 2048), self.max_batch_size


class StaticConfig(_BatchConfig):
    """Wait for a full batch; pad to the longest prompt and output; run it to completion."""

    policy: Literal["static"] = "static"
    max_batch_size: int = Field(8, ge=1, description="requests per batch; the memory plan also reserves "
                                "activations for a whole batch of prompts (up to 2,048 tokens each), "
                                "prefilled at once, so a large batch leaves less KV cache")


class DynamicConfig(_BatchConfig):
    """Dispatch at max_batch_size or after max_wait_ms; no padding, no joins mid-batch."""

    policy: Literal["dynamic"] = "dynamic"
    max_batch_size: int = Field(8, ge=1, description="dispatch as soon as this many are queued; sizes the "
                                "memory plan's activation reserve as static batching's does")
    max_wait_ms: float = Field(50.0, ge=0, description="or when the oldest queued request has waited this long, ms")


class _BatchRunner(Scheduler):
    """Shared run-to-completion mechanics; subclasses decide when and how to form a batch."""

    padded: bool = False

    def __init__(self, config, kv, max_model_len, itl, **limits):
        super().__init__(config, kv, max_model_len, itl, **limits)
        self.batch_size = config.max_batch_size
        self.batch: list[Request] = []
        self.pad_prompt = 0
        self.pad_total = 0

    def ready(self, now: float) -> bool:
        raise NotImplementedError

    def admission_error(self, req: Request) -> str | None:
        need = self._reserve(req) + self.kv.beside(req)  # and any state or window beside it
        if need > self.kv.total:
            return f"reserving {need} KV blocks exceeds the cache ({self.kv.total} blocks)"
        return super().admission_error(req)

    def _reserve(self, req: Request) -> int:
        return self.kv.blocks_for(req.prompt_tokens + req.output_tokens)

    def _choose(self) -> tuple[list[Request], list[int]]:
        """The waiting requests, in order, whose KV reservations fit together, and each one's
        blocks (beside it, any state or window blocks too)."""
        chosen, blocks, total = [], [], 0
        for req in islice(self.waiting, self.batch_size):
            need = self._reserve(req)
            total += need + self.kv.beside(req)
            if not self.kv.can_allocate(total):
                break
            chosen.append(req)
            blocks.append(need)
        return chosen, blocks

    def _form_batch(self) -> None:
        batch, blocks = self._choose()
        for req, need in zip(batch, blocks, strict=True):
            self.waiting.popleft()
            self.kv.admit(need, req)
            req.block_count = need
            req.status = "running"
        self.batch = batch
        self.running = list(batch)
        self.pad_prompt = max((r.prompt_tokens for r in batch), default=0)
        self.pad_total = self.pad_prompt + max((r.output_tokens for r in batch), default=0)

    def schedule(self, now: float) -> Step | None:
        if not self.running:
            if not self.waiting or not self.ready(now):
                return None
            self._form_batch()
            if not self.running:
                return None
        entries = [(r, r.prompt_tokens if r.num_generated == 0 else 1) for r in self.running]
        if not self.padded:
            shape, decode_only = self.shape_of(entries)
            return Step(entries, shape, decode_only)
        b = len(self.batch)
        if self.running[0].num_generated == 0:
            shape = IterationShape(b * self.pad_prompt, b, 0, 0, ((self.pad_prompt, 0),) * b)
            return Step(entries, shape, False)
        # Every row of the padded batch decodes, finished or not, at the padded length.
        ctx = self._padded_context()
        shape = IterationShape(b, b, b, b * ctx, ())
        return Step(entries, shape, True)

    def _padded_context(self) -> int:
        # All rows advance in lockstep; the longest-running row tells how far they are.
        return self.pad_prompt + max(r.num_generated for r in self.running) - 1

    def _retire(self, finished, end):
        super()._retire(finished, end)
        if not self.running:
            self.batch = []


class StaticScheduler(_BatchRunner):
    name = "static"
    padded = True

    def _choose(self) -> tuple[list[Request], list[int]]:
        """Every row of a padded batch holds KV for the longest prompt plus the longest
        output (a `generate()` call's cache is batch × padded length), so the batch takes
        requests in order while that whole padded cache fits."""
        chosen: list[Request] = []
        row = beside = 0
        longest_prompt = longest_output = 0
        for req in islice(self.waiting, self.batch_size):
            prompt, output = max(longest_prompt, req.prompt_tokens), max(longest_output, req.output_tokens)
            padded, held = self.kv.blocks_for(prompt + output), beside + self.kv.beside(req)
            if not self.kv.can_allocate((len(chosen) + 1) * padded + held):
                break
            chosen.append(req)
            longest_prompt, longest_output, row, beside = prompt, output, padded, held
        return chosen, [row] * len(chosen)

    def ready(self, now: float) -> bool:
        return len(self.waiting) >= self.batch_size or not self.expect_arrivals()

    def can_fast_forward(self, step: Step) -> bool:
        return False  # padded rows keep computing after a request finishes

    def _retire(self, finished, end):
        """A finished row keeps its padded KV until the whole batch ends: a `generate()`
        call frees its cache when it returns, not row by row."""
        for req in finished:
            req.finish_time = end
            req.status = "finished"
        self.running = [r for r in self.running if r.status != "finished"]
        if not self.running:
            for req in self.batch:
                self._release(req)
            self.batch = []


class DynamicScheduler(_BatchRunner):
    name = "dynamic"

    def __init__(self, config: DynamicConfig, kv, max_model_len, itl, **kw):
        super().__init__(config, kv, max_model_len, itl, **kw)
        self.max_wait = config.max_wait_ms * 1e-3

    def ready(self, now: float) -> bool:
        # Triton-style: a partial batch waits max_wait_ms even for the last requests,
        # since a real batcher cannot know that nothing else will arrive.
        if len(self.waiting) >= self.batch_size:
            return True
        # The same sum next_wakeup wakes the engine at: `now - arrival >= max_wait` rounds
        # differently once times are large (hours in), and the batch then never fired.
        return now >= self.waiting[0].arrival + self.max_wait

    def next_wakeup(self, now: float) -> float | None:
        if self.waiting and not self.running:
            return self.waiting[0].arrival + self.max_wait
        return None

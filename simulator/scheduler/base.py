"""The batching-policy interface and the token bookkeeping every policy shares.

A policy is a plain object (no SimPy): `schedule()` picks the next iteration's work and
returns a `Step`; `complete()` applies that step once the engine has advanced the clock.
Policies never see the cost model; the engine never sees queues.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from pydantic import Field

from simulator.cost.ops import IterationShape
from simulator.kv_cache import BlockManager
from simulator.request import Request
from simulator.strict import StrictModel


class SchedulerConfigBase(StrictModel):
    """Base of every policy's knobs. Subclasses add theirs and a `policy` literal."""

    def resolve_limits(self, gpu_name: str, gpu_memory_gib: float, max_model_len: int) -> tuple[int, int]:
        """(token budget per iteration, max sequences) with this policy's defaults applied."""
        raise NotImplementedError


def max_num_seqs_field(default_text: str):
    return Field(None, ge=1, description=f"most sequences running at once; default {default_text}")


@dataclass(slots=True)
class Step:
    """One iteration's work: (request, new tokens) pairs and the shape the cost model sees."""

    entries: list[tuple[Request, int]]
    shape: IterationShape
    decode_only: bool
    preempted: int = 0


@dataclass(slots=True)
class ItlSink:
    """Where emitted-token gaps go: (gap seconds, how many tokens had exactly that gap)."""

    values: list[float] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)

    def add(self, value: float, weight: int) -> None:
        self.values.append(value)
        self.weights.append(weight)


class Scheduler:
    """Shared state and mechanics; policies override `schedule` and `admission_error`."""

    name: ClassVar[str] = ""

    def __init__(self, config: SchedulerConfigBase, kv: BlockManager, max_model_len: int,
                 itl: ItlSink):
        self.config = config
        self.kv = kv
        self.max_model_len = max_model_len
        self.itl = itl
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.preemptions = 0
        # Set by the engine: whether any request may still arrive (static batching flush).
        self.expect_arrivals: Callable[[], bool] = lambda: False

    # -- admission -----------------------------------------------------------------
    def admission_error(self, req: Request) -> str | None:
        """Why this request can never be served here, or None."""
        total = req.prompt_tokens + req.output_tokens
        if total > self.max_model_len:
            return (f"prompt + output = {total} tokens exceeds max_model_len={self.max_model_len}")
        # The last output token's KV is never computed, hence total - 1.
        blocks = self.kv.blocks_for(total - 1)
        if blocks > self.kv.total:
            return (f"needs {blocks} KV blocks at full length; the cache holds {self.kv.total}")
        return None

    def add(self, req: Request) -> str | None:
        reason = self.admission_error(req)
        if reason is None:
            self.waiting.append(req)
        return reason

    @property
    def outstanding(self) -> int:
        return len(self.waiting) + len(self.running)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def next_wakeup(self, now: float) -> float | None:
        """A time at which an idle engine should re-run `schedule` without an arrival."""
        return None

    def schedule(self, now: float) -> Step | None:
        raise NotImplementedError

    # -- shared helpers ------------------------------------------------------------
    def _preempt(self, req: Request) -> None:
        """Recompute preemption: drop the KV, requeue at the front of the waiting queue."""
        self.kv.release(req.block_count)
        req.block_count = 0
        req.num_computed = 0
        req.preemptions += 1
        req.status = "waiting"
        self.preemptions += 1
        self.waiting.appendleft(req)

    def _release(self, req: Request) -> None:
        self.kv.release(req.block_count)
        req.block_count = 0

    @staticmethod
    def shape_of(entries: list[tuple[Request, int]]) -> tuple[IterationShape, bool]:
        """The unpadded shape of a list of (request, new tokens); and whether all are decodes."""
        tokens = emit = n_dec = dec_ctx = 0
        chunks: list[tuple[int, int]] = []
        for req, q in entries:
            c = req.num_computed
            known = req.prompt_tokens + req.num_generated
            tokens += q
            if c + q >= known:
                emit += 1
            if q == 1 and req.num_generated > 0 and c + 1 == known:
                n_dec += 1
                dec_ctx += c
            else:
                chunks.append((q, c))
        return IterationShape(tokens, emit, n_dec, dec_ctx, tuple(chunks)), not chunks

    def complete(self, step: Step, end: float) -> list[Request]:
        """Apply one finished iteration: KV advances, tokens are emitted, requests finish."""
        finished: list[Request] = []
        gaps: dict[float, int] = {}
        for req, q in step.entries:
            req.num_computed += q
            if req.num_computed >= req.prompt_tokens + req.num_generated:
                if req.num_generated == 0:
                    req.first_token_time = end
                else:
                    lt = req.last_token_time
                    gaps[lt] = gaps.get(lt, 0) + 1
                req.num_generated += 1
                req.last_token_time = end
                if req.num_generated >= req.output_tokens:
                    finished.append(req)
        for lt, n in gaps.items():
            self.itl.add(end - lt, n)
        if finished:
            self._retire(finished, end)
        return finished

    def _retire(self, finished: list[Request], end: float) -> None:
        for req in finished:
            req.finish_time = end
            req.status = "finished"
            self._release(req)
        self.running = [r for r in self.running if r.status != "finished"]

    # -- decode fast-forward -----------------------------------------------------
    def can_fast_forward(self, step: Step) -> bool:
        """Whether the following iterations repeat this decode-only step until an event.

        True for policies whose admission decisions cannot change while only decodes
        run: KV only shrinks and no sequence leaves, so a refused request stays refused.
        """
        return step.decode_only and step.preempted == 0

    def stretch_limit(self, step: Step) -> int:
        """How many identical decode iterations can run, starting with `step` (>= 1).

        Bounded by the first completion and by KV: block boundaries crossed later in the
        stretch must find free blocks, or the real scheduler would preempt.
        """
        if not self.can_fast_forward(step):
            return 1
        entries = step.entries
        k = min(req.output_tokens - req.num_generated for req, _ in entries)
        if k <= 1:
            return 1
        free = self.kv.free
        ctx = np.fromiter((req.num_computed for req, _ in entries), dtype=np.int64, count=len(entries))
        held = np.fromiter((req.block_count for req, _ in entries), dtype=np.int64, count=len(entries))
        bs = self.kv.block_size

        def need(j: int) -> int:
            return int(np.maximum(-(-(ctx + j) // bs) - held, 0).sum())

        if need(k) <= free:
            return k
        lo, hi = 1, k  # need(lo) <= free < need(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if need(mid) <= free:
                lo = mid
            else:
                hi = mid
        return lo

    def complete_stretch(self, step: Step, ends: list[float]) -> tuple[list[Request], np.ndarray]:
        """Apply n = len(ends) identical decode iterations at once.

        Returns the finished requests and the KV blocks in use during each iteration.
        Exactly equivalent to n calls of schedule()+complete() (tested).
        """
        n = len(ends)
        entries = step.entries
        bs = self.kv.block_size
        ctx = np.fromiter((req.num_computed for req, _ in entries), dtype=np.int64, count=len(entries))
        held = np.fromiter((req.block_count for req, _ in entries), dtype=np.int64, count=len(entries))
        steps = np.arange(1, n + 1, dtype=np.int64)
        extra = np.maximum(-(-(ctx[:, None] + steps[None, :]) // bs) - held[:, None], 0).sum(axis=0)
        kv_per_step = self.kv.used + extra
        gaps: dict[float, int] = {}
        finished: list[Request] = []
        first_end = ends[0]
        last_end = ends[-1]
        for req, _ in entries:
            lt = req.last_token_time
            gaps[lt] = gaps.get(lt, 0) + 1
            req.num_computed += n
            req.num_generated += n
            req.last_token_time = last_end
            blocks = -(-req.num_computed // bs)
            if blocks > req.block_count:
                self.kv.allocate(blocks - req.block_count)
                req.block_count = blocks
            if req.num_generated >= req.output_tokens:
                finished.append(req)
        for lt, c in gaps.items():
            self.itl.add(first_end - lt, c)
        b = len(entries)
        for i in range(1, n):
            self.itl.add(ends[i] - ends[i - 1], b)
        if finished:
            self._retire(finished, last_end)
        return finished, kv_per_step

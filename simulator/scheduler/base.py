"""The batching-policy interface and the token bookkeeping every policy shares.

A policy is a plain object (no SimPy): `schedule()` picks the next iteration's work and
returns a `Step`; `complete()` applies that step once the engine has advanced the clock.
Policies never see the cost model; the engine never sees queues.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate, pairwise
from operator import add
from typing import ClassVar

from pydantic import Field

from simulator.cost.ops import IterationShape
from simulator.errors import ConfigError
from simulator.kv_cache import BlockManager
from simulator.request import Request
from simulator.strict import StrictModel


class SchedulerConfigBase(StrictModel):
    """Base of every policy's knobs. Subclasses add theirs and a `policy` literal."""

    def resolve_limits(self, gpu_name: str, gpu_memory_gib: float, max_model_len: int,
                       release: tuple[int, ...] | None = None) -> tuple[int, int]:
        """(token budget per iteration, max sequences) with this policy's defaults applied."""
        raise NotImplementedError

    def for_model(self, model) -> SchedulerConfigBase:
        """This config with the defaults that depend on the served model applied (a
        policy whose engine treats some architectures differently overrides it)."""
        return self


def whole_prompt_budget(budget: int, max_model_len: int, policy: str) -> int:
    """A budget under which every prompt must run whole (no chunking) must hold the longest
    sequence: a request preempted after generating is recomputed as prompt + output in one
    iteration. vLLM refuses to start otherwise; so do we."""
    if budget < max_model_len:
        raise ConfigError(
            f"max_num_batched_tokens={budget} is below max_model_len={max_model_len}, and {policy} runs each "
            "prompt whole: a longer sequence, or one recomputed after a preemption, could never be scheduled "
            "(vLLM refuses this configuration too)", where="scheduler.max_num_batched_tokens",
            fix=f"raise it to at least {max_model_len}, lower model.max_model_len, or enable chunked prefill")
    return budget


def max_num_seqs_field(default_text: str):
    return Field(None, ge=1, description=f"most sequences running at once; default {default_text}")


#: `_grow`'s answer when the victim cannot be preempted yet (under PP's batch queue, a
#: sequence with tokens in flight): the sequence that asked skips this iteration, and
#: nothing is preempted.
WAIT_FOR_PIPELINE = -2


@dataclass(slots=True)
class Step:
    """One iteration's work: (request, new tokens) pairs and the shape the cost model sees."""

    entries: list[tuple[Request, int]]
    shape: IterationShape
    decode_only: bool
    preempted: int = 0
    crossings: list[int] | None = None  # each sequence's first KV block boundary in a decode stretch (stretch_limit)
    # Seconds of KV copies this step's forward pass waits for: blocks swapped to or from
    # host memory (vllm_v0), prompts pulled from a prefill instance (roles.MigratingDecodeRole).
    copy_s: float = 0.0


@dataclass(slots=True)
class ItlSink:
    """Where emitted-token gaps go: (gap seconds, how many tokens had exactly that gap)."""

    values: list[float] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)

    def add(self, value: float, weight: int) -> None:
        self.values.append(value)
        self.weights.append(weight)

    def add_gaps(self, ends: list[float], weight: int) -> None:
        """The gaps between consecutive `ends`, each shared by `weight` tokens."""
        if len(ends) > 1:
            self.values.extend([b - a for a, b in pairwise(ends)])
            self.weights.extend([weight] * (len(ends) - 1))


class Scheduler:
    """Shared state and mechanics; policies override `schedule` and `admission_error`."""

    name: ClassVar[str] = ""
    # Paged, on-demand KV (blocks follow the context): what a disaggregated pool needs.
    paged: ClassVar[bool] = False
    # How a pipeline-parallel replica runs this policy: True, one scheduler keeping a
    # micro-batch per stage in flight (vLLM v1's batch queue: `schedule_more`); False, one
    # virtual engine per stage, each with its share of the KV cache (vLLM v0).
    batch_queue: ClassVar[bool] = False

    def __init__(self, config: SchedulerConfigBase, kv: BlockManager, max_model_len: int,
                 itl: ItlSink, *, token_budget: int = 0, max_num_seqs: int = 0):
        self.config = config
        self.token_budget = token_budget
        self.max_num_seqs = max_num_seqs
        self.kv = kv
        self.max_model_len = max_model_len
        self.itl = itl
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        # Sequences preempted by swapping their KV to host memory (policies that swap).
        self.swapped: deque[Request] = deque()
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
        blocks = self.kv.blocks_for(total - 1) + self.kv.beside(req)
        if blocks > self.kv.total:
            return (f"needs {blocks} KV blocks at full length; the cache holds {self.kv.total}")
        return None

    def budget_error(self, req: Request, note: str = "") -> str | None:
        """A prompt that can never be scheduled whole under the token budget."""
        if req.prompt_tokens > self.token_budget:
            return (f"prompt of {req.prompt_tokens} tokens exceeds max_num_batched_tokens="
                    f"{self.token_budget}{note}")
        return None

    def add(self, req: Request) -> str | None:
        reason = self.admission_error(req)
        if reason is None:
            self.waiting.append(req)
        return reason

    @property
    def outstanding(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped)

    @property
    def queued(self) -> int:
        """Requests waiting for admission or swap-in (the iteration log's queue length)."""
        return len(self.waiting) + len(self.swapped)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.swapped)

    def next_wakeup(self, now: float) -> float | None:
        """A time at which an idle engine should re-run `schedule` without an arrival."""
        return None

    def schedule(self, now: float) -> Step | None:
        raise NotImplementedError

    # -- shared helpers ------------------------------------------------------------
    def _preempt(self, req: Request) -> None:
        """Recompute preemption: drop the KV, requeue at the front of the waiting queue."""
        self._release(req)
        req.num_computed = 0
        self._count_preemption(req, "waiting")
        self.waiting.appendleft(req)

    def _count_preemption(self, req: Request, status: str) -> None:
        req.preemptions += 1
        req.status = status
        self.preemptions += 1

    def _grow(self, req: Request, need: int) -> int:
        """Give `req` `need` more KV blocks, preempting from the back of `running` as vLLM
        does. Returns how many were preempted, -1 if `req` itself had to go, or
        WAIT_FOR_PIPELINE if the victim cannot go yet (`_next_victim`)."""
        kv = self.kv
        preempted = 0
        while need > kv.total - kv.used:
            victim = self._next_victim()
            if victim is None:
                return WAIT_FOR_PIPELINE
            self._preempt(victim)
            preempted += 1
            if victim is req:
                return -1
        kv.allocate(need)
        req.block_count += need
        return preempted

    def _next_victim(self) -> Request | None:
        """Take the lowest-priority running request out of `running` (the last admitted);
        None when it cannot be preempted now (a pipelined scheduler's sequence in flight)."""
        return self.running.pop()

    def _release(self, req: Request) -> None:
        """Free the request's blocks; those of cached prefix segments stay cached."""
        own = req.block_count
        if req.prefix_refs is not None:
            own = self.kv.prefix_cache.release(req)
        req.prefix_published = 0
        self.kv.release(own + self.kv.beside(req))  # and what it held beside them since admission
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
            c = req.num_computed + q
            req.num_computed = c
            g = req.num_generated
            if c >= req.prompt_tokens + g:
                if g:
                    lt = req.last_token_time
                    gaps[lt] = gaps.get(lt, 0) + 1
                else:
                    req.first_token_time = end
                g += 1
                req.num_generated = g
                req.last_token_time = end
                if g >= req.output_tokens:
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
        return step.decode_only and step.preempted == 0 and not step.copy_s

    def _first_crossings(self, entries) -> list[int]:
        """The step (1-based) at which each sequence first needs one more KV block; it needs
        another every block_size steps after. Step 1's blocks were allocated by `schedule()`;
        a sequence at context c holding h blocks next needs one at step h*bs - c + 1."""
        bs = self.kv.block_size
        return [req.block_count * bs - req.num_computed + 1 for req, _ in entries]

    @staticmethod
    def _blocks_per_step(firsts: list[int], steps: int, bs: int) -> list[int]:
        """per_step[j], j = 1..steps (per_step[0] = 0): the blocks the sequences need at step
        j. One that first needs a block at step s needs another every bs steps, so
        per_step[j] = (first needs at j) + per_step[j - bs]: counted, not listed one entry
        per block (which was most of a long stretch's cost)."""
        per_step = [0] * (steps + 1)
        for j in firsts:
            if j <= steps:
                per_step[j] += 1
        for lo in range(bs + 1, steps + 1, bs):
            hi = min(lo + bs, steps + 1)
            per_step[lo:hi] = map(add, per_step[lo:hi], per_step[lo - bs:hi - bs])
        return per_step

    def stretch_limit(self, step: Step) -> int:
        """How many identical decode iterations can run, starting with `step` (>= 1).

        Bounded by the first completion and by KV: block boundaries crossed later in the
        stretch must find free blocks, or the real scheduler would preempt.
        """
        if not self.can_fast_forward(step):
            return 1
        entries = step.entries
        k = min([req.output_tokens - req.num_generated for req, _ in entries])
        if k <= 1:
            return 1
        bs = self.kv.block_size
        firsts = self._first_crossings(entries)
        step.crossings = firsts  # reused by complete_stretch: computed once per stretch
        free = self.kv.total - self.kv.used
        needed = 0
        for j in firsts:
            if j <= k:
                needed += (k - j) // bs + 1
        if needed <= free:
            return k
        # The step of the (free+1)-th block request would fail: stop just before it.
        cumulative = list(accumulate(self._blocks_per_step(firsts, k, bs)))
        return max(bisect_left(cumulative, free + 1) - 1, 1)

    def complete_stretch(self, step: Step, ends: list[float]) -> tuple[list[Request], list[int]]:
        """Apply n = len(ends) identical decode iterations at once.

        Returns the finished requests and the KV blocks in use during each iteration.
        Exactly equivalent to n calls of schedule()+complete() (tested).
        """
        n = len(ends)
        entries = step.entries
        kv = self.kv
        bs = kv.block_size
        firsts = step.crossings if step.crossings is not None else self._first_crossings(entries)
        kv_per_step = list(accumulate(self._blocks_per_step(firsts, n, bs)[1:], initial=kv.used))[1:]
        gaps: dict[float, int] = {}
        finished: list[Request] = []
        first_end = ends[0]
        last_end = ends[-1]
        new_blocks = 0
        for req, _ in entries:
            lt = req.last_token_time
            gaps[lt] = gaps.get(lt, 0) + 1
            c = req.num_computed + n
            req.num_computed = c
            g = req.num_generated + n
            req.num_generated = g
            req.last_token_time = last_end
            held = req.block_count
            if c > held * bs:
                blocks = -(-c // bs)
                new_blocks += blocks - held
                req.block_count = blocks
            if g >= req.output_tokens:
                finished.append(req)
        if new_blocks:
            kv.allocate(new_blocks)
        itl = self.itl
        for lt, c in gaps.items():
            itl.add(first_end - lt, c)
        itl.add_gaps(ends, len(entries))
        if finished:
            self._retire(finished, last_end)
        return finished, kv_per_step

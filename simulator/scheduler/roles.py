"""Prefill-only and decode-only roles of a paged policy, for disaggregated pools.

A role is a thin subclass of the policy's own scheduler (`role_scheduler`), so the token
budget, max_num_seqs, KV accounting and preemption stay the policy's. A role only
changes where a request enters and leaves an instance:

- prefill: a request leaves `running` once its prefill has emitted the first token. It
  keeps its KV blocks while the KV is transferred; `finish_transfer` frees them. With
  nothing left to decode, every iteration of a prefill instance is a prefill.
- decode: a request arrives with its prompt's KV (num_computed > 0) and waits in
  `arrived` until blocks for its context plus the next token are free; then it joins
  `running` as an ordinary decode. A request preempted here is recomputed here, by the
  policy's own waiting-queue path, which takes precedence over new arrivals (FCFS).
- decode under `kv_transfer.protocol: distserve` (`MigratingDecodeRole`): the request
  arrives with its KV still on the prefill instance (`hold_for_pull` keeps the blocks),
  and the decode instance pulls it between its iterations under DistServe's rules.
"""

from __future__ import annotations

import copy
from collections import deque
from functools import cache

from simulator.request import Request
from simulator.scheduler.base import Scheduler, Step


class PrefillRole(Scheduler):
    """Runs prompts only; hands each request off after its first token."""

    # Whether a one-token request ends here (DistServe streams the prefill's token); under
    # vLLM's connectors (False, set by the cluster) it moves to a decode instance like any
    # other, whose step streams the client's token.
    finishes_one_token_requests = True

    def admission_error(self, req: Request) -> str | None:
        """The policy's checks at the length this instance holds: the prompt and its first
        token (the decode pool checks the whole request, cluster.py). Named by pool, since
        the pools' caches differ."""
        prompt_only = copy.copy(req)
        prompt_only.output_tokens = 1
        reason = super().admission_error(prompt_only)
        return None if reason is None else f"prefill pool: {reason}"

    def complete(self, step: Step, end: float) -> list[Request]:
        """Finished requests, then those handed off (status `transferring`, KV still held)."""
        finished = super().complete(step, end)
        if not self.finishes_one_token_requests:  # _retire kept them running: handed off below
            finished = []
        handed = [r for r, _ in step.entries if r.status == "running" and r.num_generated > 0]
        if handed:
            for req in handed:
                req.status = "transferring"
            self.running = [r for r in self.running if r.status == "running"]
        return finished + handed if finished else handed

    def _retire(self, finished: list[Request], end: float) -> None:
        if self.finishes_one_token_requests:
            super()._retire(finished, end)

    def finish_transfer(self, req: Request) -> None:
        """The KV has left this instance: free its blocks."""
        self._release(req)

    def hold_for_pull(self, req: Request) -> tuple[int, list[int] | None]:
        """Let the request go but keep its KV blocks until a decode instance has pulled them
        (`kv_transfer.protocol: distserve`): its own blocks stay allocated, and the cached
        prefix segments it reads stay referenced (counted once, not evictable). Returns
        what is kept, for `end_pull`."""
        refs = req.prefix_refs
        own = (req.block_count if refs is None else req.block_count - req.shared_blocks) + self.kv.beside(req)
        req.prefix_refs = None
        req.shared_blocks = req.block_count = req.prefix_published = 0
        return own, refs

    def end_pull(self, held: tuple[int, list[int] | None]) -> None:
        """A decode instance has copied the KV kept by `hold_for_pull`."""
        own, refs = held
        if refs:
            self.kv.prefix_cache.drop(refs)
        self.kv.release(own)


class DecodeRole(Scheduler):
    """Decodes requests whose prompt KV arrived from a prefill instance."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.arrived: deque[Request] = deque()
        self.entry = self.arrived  # where a handed-off request queues

    def add(self, req: Request) -> str | None:
        reason = self.admission_error(req)
        if reason is None:
            req.status = "waiting"
            self.entry.append(req)
        return reason

    def handed_off(self) -> int:
        """Requests handed to this instance that are neither running nor preempted."""
        return len(self.arrived)

    @property
    def outstanding(self) -> int:
        return self.handed_off() + super().outstanding

    @property
    def queued(self) -> int:
        return self.handed_off() + super().queued

    def has_work(self) -> bool:
        return self.handed_off() > 0 or super().has_work()

    def schedule(self, now: float) -> Step | None:
        if self.arrived and not self.waiting and not self.swapped:
            self._admit_arrived()
        return super().schedule(now)

    def _admit_arrived(self) -> None:
        """Admit arrived KV FCFS while max_num_seqs and the KV blocks allow.

        Blocks the running requests are about to need are set aside first, as the policy
        schedules running requests before it admits new ones.
        """
        kv = self.kv
        running = self.running
        growth = 0
        for r in running:
            more = kv.blocks_for(r.prompt_tokens + r.num_generated) - r.block_count
            if more > 0:
                growth += more
        free = kv.total - kv.used - growth - kv.watermark_blocks
        arrived = self.arrived
        while arrived and len(running) < self.max_num_seqs:
            req = arrived[0]
            need = kv.blocks_for(req.num_computed + 1)
            held = need + kv.beside(req)
            if held > free:
                break
            arrived.popleft()
            kv.admit(need, req)
            free -= held
            req.block_count = need
            req.status = "running"
            running.append(req)


class MigratingDecodeRole(DecodeRole):
    """A decode instance that pulls each prompt's KV itself, as DistServe's does
    (`kv_transfer.protocol: distserve`; LLMServe/DistServe, distserve/decoding_stage_scheduler.py
    and single_stage_engine.py).

    A handed-off request waits in `unaccepted` with its KV still on the prefill instance.
    After each iteration DistServe's decode loop accepts them FCFS while the prompts it
    holds but has not yet scheduled (`arrived`) take under WAITING_BLOCK_FRACTION of the
    cache and the prompt's blocks are free; it allocates those blocks and copies the KV
    in its own loop, so the copies delay its next iteration (`Step.copy_s`). A
    migrated request joins the batch when the blocks of the running requests (at their
    next token), of every held prompt, and its own context fit in the cache: its held
    blocks count twice, as DistServe's check counts them. The decode loop keeps no
    watermark. `on_migrated` (set by the cluster) frees the prefill side's copy once the
    iteration that carried the copy has ended.
    """

    # DistServe's DecodingStageSchedConfig.waiting_block_prop_threshold default.
    WAITING_BLOCK_FRACTION = 0.05

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.unaccepted: deque[Request] = deque()
        self.entry = self.unaccepted
        self.held_blocks = 0  # prompt blocks of the migrated requests in `arrived`
        self.migrated: list[Request] = []  # copied, waiting for an iteration to carry the copy time
        self.migrated_s = 0.0
        self.in_flight: list[Request] = []  # copied before the iteration in flight
        self.on_migrated = lambda req: None

    def handed_off(self) -> int:
        return len(self.unaccepted) + len(self.arrived)

    def schedule(self, now: float) -> Step | None:
        self._accept()
        if len(self.running) < self.max_num_seqs and self._starved():
            self._run_held_head()
        step = super().schedule(now)
        if step is None and self.arrived and not self.running:
            # Nothing runs and DistServe's check still refuses the head (its own held blocks
            # count twice, or preempted requests come first): DistServe would wait forever.
            # Run the head; the policy's decode path gives it its next block or preempts it.
            self._run_held_head()
            step = super(DecodeRole, self).schedule(now)
        if step is not None and self.migrated:
            step.copy_s += self.migrated_s
            self.in_flight, self.migrated, self.migrated_s = self.migrated, [], 0.0
        return step

    def _starved(self) -> bool:
        """Whether a preempted request being recomputed (running its chunks, or waiting to)
        can never fit beside the held prompts' blocks: it would preempt itself again at
        every attempt while they wait for it, a livelock (found by fuzzing: 26,000
        preemptions of one request under vllm-v1's chunked recompute)."""
        if not (self.arrived and self.preemptions):  # only a recompute can starve
            return False
        kv = self.kv
        room = kv.total - self.held_blocks
        for queue in (self.running, self.waiting):
            for r in queue:
                context = r.prompt_tokens + r.num_generated
                if r.num_computed < context and kv.blocks_for(context) + kv.beside(r) > room:
                    return True
        return False

    def _run_held_head(self) -> None:
        """The first held prompt joins the batch: its KV is here, and decoding it frees blocks."""
        req = self.arrived.popleft()
        self.held_blocks -= req.block_count
        req.status = "running"
        self.running.append(req)

    def complete(self, step: Step, end: float) -> list[Request]:
        if self.in_flight:
            for req in self.in_flight:
                self.on_migrated(req)
            self.in_flight = []
        return super().complete(step, end)

    def can_fast_forward(self, step: Step) -> bool:
        # Admitting a held request lowers the held blocks after this iteration's migrations
        # ran: the next iteration may then pull a queued one, which a stretch would skip.
        return super().can_fast_forward(step) and not self._can_pull_head()

    def _can_pull_head(self) -> bool:
        """Whether the next queued request would be pulled now."""
        if not self.unaccepted:
            return False
        kv = self.kv
        return (self.held_blocks < self.WAITING_BLOCK_FRACTION * kv.total
                and kv.blocks_for(self.unaccepted[0].num_computed) + kv.beside(self.unaccepted[0]) <= kv.free)

    def _accept(self) -> None:
        """DistServe's post-iteration migration: FCFS while the held prompts stay under the
        threshold and the prompt's blocks are free."""
        kv = self.kv
        queue = self.unaccepted
        while self._can_pull_head():
            req = queue[0]
            need = kv.blocks_for(req.num_computed)
            queue.popleft()
            kv.admit(need, req)
            req.block_count = need
            self.held_blocks += need
            self.arrived.append(req)
            self.migrated.append(req)
            self.migrated_s += req.kv_transfer_s

    def _admit_arrived(self) -> None:
        kv = self.kv
        running = self.running
        arrived = self.arrived
        bs = kv.block_size
        committed = sum(-(-(r.num_computed + 1) // bs) for r in running) + self.held_blocks
        while arrived and len(running) < self.max_num_seqs:
            req = arrived[0]
            own = kv.blocks_for(req.num_computed + 1)
            if committed + own > kv.total:
                break
            grow = own - req.block_count
            if grow > kv.free:
                break
            arrived.popleft()
            self.held_blocks -= req.block_count
            committed += own - req.block_count
            if grow > 0:
                kv.allocate(grow)
                req.block_count = own
            req.status = "running"
            running.append(req)


ROLES: dict[str, type[Scheduler]] = {"prefill": PrefillRole, "decode": DecodeRole}
# The decode role per `disaggregation.kv_transfer.protocol`.
DECODE_ROLES: dict[str, type[Scheduler]] = {"connector": DecodeRole, "distserve": MigratingDecodeRole}


@cache
def role_scheduler(policy: type[Scheduler], role: str, protocol: str = "connector") -> type[Scheduler]:
    """`policy`'s scheduler class playing `role` (one of ROLES) under `protocol`."""
    mixin = DECODE_ROLES[protocol] if role == "decode" else ROLES[role]
    return type(f"{mixin.__name__[:-4]}{policy.__name__}", (mixin, policy),
                {"name": f"{policy.name}/{role}"})

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
"""

from __future__ import annotations

from collections import deque
from functools import cache

from simulator.request import Request
from simulator.scheduler.base import Scheduler, Step


class PrefillRole(Scheduler):
    """Runs prompts only; hands each request off after its first token."""

    def complete(self, step: Step, end: float) -> list[Request]:
        """Finished requests, then those handed off (status `transferring`, KV still held)."""
        finished = super().complete(step, end)
        handed = [r for r, _ in step.entries if r.status == "running" and r.num_generated > 0]
        if handed:
            for req in handed:
                req.status = "transferring"
            self.running = [r for r in self.running if r.status == "running"]
        return finished + handed if finished else handed

    def finish_transfer(self, req: Request) -> None:
        """The KV has left this instance: free its blocks."""
        self._release(req)


class DecodeRole(Scheduler):
    """Decodes requests whose prompt KV arrived from a prefill instance."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.arrived: deque[Request] = deque()

    def add(self, req: Request) -> str | None:
        reason = self.admission_error(req)
        if reason is None:
            req.status = "waiting"
            self.arrived.append(req)
        return reason

    @property
    def outstanding(self) -> int:
        return len(self.arrived) + super().outstanding

    @property
    def queued(self) -> int:
        return len(self.arrived) + super().queued

    def has_work(self) -> bool:
        return bool(self.arrived) or super().has_work()

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
            if need + kv.state_blocks > free:
                break
            arrived.popleft()
            kv.admit(need)
            free -= need + kv.state_blocks
            req.block_count = need
            req.status = "running"
            running.append(req)


ROLES: dict[str, type[Scheduler]] = {"prefill": PrefillRole, "decode": DecodeRole}


@cache
def role_scheduler(policy: type[Scheduler], role: str) -> type[Scheduler]:
    """`policy`'s scheduler class playing `role` (one of ROLES)."""
    mixin = ROLES[role]
    return type(f"{mixin.__name__[:-4]}{policy.__name__}", (mixin, policy),
                {"name": f"{policy.name}/{role}"})

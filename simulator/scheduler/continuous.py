"""Continuous (iteration-level, Orca) batching: requests join and leave every iteration.

New requests run their whole prompt in the iteration that admits them, alongside the
decodes of running requests. KV is reserved for the request's maximum length on
admission, so there is no preemption, at the price of capacity.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simulator.scheduler.base import Scheduler, SchedulerConfigBase, Step, max_num_seqs_field


class ContinuousConfig(SchedulerConfigBase):
    """Orca-style iteration-level batching, KV reserved for the maximum length."""

    policy: Literal["continuous"] = "continuous"
    max_num_seqs: int | None = max_num_seqs_field("256")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="cap on new prompt tokens per iteration; default max_model_len")
    kv_reservation: Literal["request", "max_model_len"] = Field(
        "request", description="reserve KV for prompt + the request's max output tokens, "
        "or for max_model_len (Orca's original)")

    def resolve_limits(self, gpu_name, gpu_memory_gib, max_model_len, release=None):
        return self.max_num_batched_tokens or max_model_len, self.max_num_seqs or 256


class ContinuousScheduler(Scheduler):
    name = "continuous"

    def __init__(self, config: ContinuousConfig, kv, max_model_len, itl, **limits):
        super().__init__(config, kv, max_model_len, itl, **limits)
        self.reserve_max = config.kv_reservation == "max_model_len"

    def reservation(self, req) -> int:
        tokens = self.max_model_len if self.reserve_max else req.prompt_tokens + req.output_tokens
        return self.kv.blocks_for(tokens)

    def admission_error(self, req):
        err = self.budget_error(req)
        if err:
            return err
        need = self.reservation(req) + self.kv.beside(req)  # and any state or window beside it
        if need > self.kv.total:
            return (f"reserving {need} KV blocks exceeds the cache ({self.kv.total} blocks)")
        return super().admission_error(req)

    def schedule(self, now: float) -> Step | None:
        entries = [(req, 1) for req in self.running]
        budget = self.token_budget
        waiting = self.waiting
        kv = self.kv
        while waiting and len(self.running) < self.max_num_seqs:
            req = waiting[0]
            need = self.reservation(req)
            if req.prompt_tokens > budget or not kv.can_admit(need, req):
                break
            waiting.popleft()
            kv.admit(need, req)
            req.block_count = need
            req.status = "running"
            self.running.append(req)
            entries.append((req, req.prompt_tokens))
            budget -= req.prompt_tokens
        if not entries:
            return None
        shape, decode_only = self.shape_of(entries)
        return Step(entries, shape, decode_only)

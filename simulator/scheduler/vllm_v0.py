"""vLLM v0 (0.2-0.5 default): prefill-prioritised iterations over paged KV.

An iteration is all prefill or all decode. Waiting prompts are admitted FCFS, whole,
while the token budget, max_num_seqs and the KV watermark allow; if any were admitted
the iteration is theirs. Otherwise every running request decodes one token; a request
that cannot get a new block preempts the latest-arrived running request.

Preemption recomputes (vLLM's default for one-sequence requests) or, with
`preemption_mode: swap` (vLLM's `--preemption-mode swap`), copies the victim's KV blocks
to host memory. As in vLLM's v0 scheduler: no new prompt is admitted while any request
is swapped out; swapped requests come back FCFS (earliest arrival first), in a decode
iteration that preempted nothing, when their blocks plus one per sequence fit above the
watermark; a victim that finds the host space full is recomputed (vLLM aborts the engine
there). Before each decode step `running` is sorted by arrival, as vLLM up to 0.5.3 sorts
it, so the victim is always the latest arrival. The copies
run before the iteration's forward pass, over the GPU's host link (`Step.copy_s`,
simulator/kv_swap.py).
"""

from __future__ import annotations

from bisect import insort
from operator import attrgetter
from typing import Literal

from pydantic import Field

from simulator.cost.ops import IterationShape
from simulator.scheduler.base import (
    Scheduler,
    SchedulerConfigBase,
    Step,
    max_num_seqs_field,
    whole_prompt_budget,
)

_arrival = attrgetter("arrival")  # a C-level key: the decode path sorts by it every step


class VllmV0Config(SchedulerConfigBase):
    """vLLM v0: prefill-prioritised, paged KV with watermark, recompute preemption."""

    policy: Literal["vllm-v0"] = "vllm-v0"
    max_num_seqs: int | None = max_num_seqs_field("256")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="prefill token budget per iteration, at least max_model_len; default max(max_model_len, 2048)")
    watermark: float = Field(0.01, ge=0, lt=1, description="fraction of KV blocks kept free when admitting prompts")
    preemption_mode: Literal["recompute", "swap"] = Field(
        "recompute", description="how a running request gives up its KV blocks: `recompute` (drop them; "
        "prefill the prompt and the tokens so far again later) or `swap` (copy them to host memory over the GPU's host link "
        "and back; vLLM --preemption-mode)")
    swap_space_gib: float = Field(
        4.0, ge=0, description="host memory per GPU for swapped-out KV blocks, GiB (vLLM --swap-space); "
        "used with preemption_mode swap; a victim that finds it full is recomputed (vLLM aborts the engine there)")
    max_paddings: int | None = Field(
        None, ge=0, description="vLLM <= 0.2.x: prompts of one prefill are padded to the longest, the padded "
        "size counts against the budget, and at most this many pad tokens are allowed (0.2.x default 256); "
        "null = packed prompts, no padding (later versions)")

    def resolve_limits(self, gpu_name, gpu_memory_gib, max_model_len, release=None):
        budget = whole_prompt_budget(self.max_num_batched_tokens or max(max_model_len, 2048), max_model_len, "vllm-v0")
        return budget, self.max_num_seqs or 256


class VllmV0Scheduler(Scheduler):
    name = "vllm-v0"
    paged = True
    step_swapped = 0  # blocks copied to or from host memory by the iteration being scheduled


    def admission_error(self, req):
        err = self.budget_error(req)
        if err:
            return err
        # Admission keeps the watermark free; a request (recomputed after a preemption at
        # up to its full length) that could never pass it would block the queue forever.
        usable = self.kv.total - self.kv.watermark_blocks
        need = self.kv.blocks_for(req.prompt_tokens + req.output_tokens - 1) + self.kv.beside(req)
        if need > usable:
            return (f"needs {need} KV blocks at full length; {usable} can be admitted under the "
                    f"watermark (cache {self.kv.total} blocks)")
        if self.config.preemption_mode == "swap" and need + 1 > usable:
            # Swapped out at full length, it could never come back (swap-in needs one block
            # more than it holds), and no prompt is admitted while anything is swapped out.
            return (f"needs {need} KV blocks at full length, and one more to come back from host memory "
                    f"after a swap; {usable} fit under the watermark (cache {self.kv.total} blocks)")
        return super().admission_error(req)

    def _preempt(self, req) -> None:
        """Swap `req` out when the policy swaps and the host has room; else recompute it."""
        held = req.block_count + self.kv.beside(req)  # KV and any state or window beside it
        if self.config.preemption_mode == "swap" and req.block_count and self.kv.can_swap_out(held):
            self.kv.swap_out(held)  # block_count stays: the blocks to bring back
            self.step_swapped += held
            req.swaps += 1
            self._count_preemption(req, "swapped")
            insort(self.swapped, req, key=_arrival)  # brought back earliest arrival first
            return
        super()._preempt(req)

    def _swap_in(self, entries: list) -> None:
        """Bring swapped requests back FCFS into this decode iteration, as vLLM's v0 does when
        the iteration preempted nothing: each needs its blocks plus one for its next token
        above the watermark, and a slot under max_num_seqs."""
        kv = self.kv
        swapped = self.swapped
        while swapped and len(self.running) < self.max_num_seqs:
            req = swapped[0]
            held = req.block_count + kv.beside(req)
            if kv.free - (held + 1) < kv.watermark_blocks:
                break
            swapped.popleft()
            kv.swap_in(held)
            self.step_swapped += held
            grow = kv.blocks_for(req.num_computed + 1) - req.block_count
            if grow > 0:
                kv.allocate(grow)
                req.block_count += grow
            req.status = "running"
            self.running.append(req)
            entries.append((req, 1))

    def schedule(self, now: float) -> Step | None:
        kv = self.kv
        running = self.running
        waiting = self.waiting
        entries = []
        packed = longest = 0
        pad_limit = self.config.max_paddings
        self.step_swapped = 0
        while waiting and not self.swapped and len(running) < self.max_num_seqs:
            req = waiting[0]
            todo = req.prompt_tokens + req.num_generated
            n = len(entries) + 1
            new_longest = max(longest, todo)
            batched = n * new_longest if pad_limit is not None else packed + todo
            if batched > self.token_budget:
                break
            if pad_limit is not None and batched - (packed + todo) > pad_limit:
                break
            need = kv.blocks_for(todo)
            if not kv.can_admit(need, req, keep_watermark=True):
                break
            waiting.popleft()
            kv.admit(need, req)
            req.block_count = need
            req.status = "running"
            running.append(req)
            entries.append((req, todo))
            packed += todo
            longest = new_longest
        if entries:
            shape, _ = self.shape_of(entries)
            if pad_limit is not None and len(entries) > 1:
                # The model runs on a [seqs, longest] padded batch.
                n = len(entries)
                shape = IterationShape(n * longest, n, 0, 0, ((longest, 0),) * n)
            return Step(entries, shape, False)
        preempted = 0
        bs = kv.block_size
        # vLLM 0.2-0.5.3 sorts `running` by arrival before each decode step (FCFS priority),
        # so a victim is always the latest arrival, wherever a swapped request rejoined.
        running.sort(key=_arrival)
        i = 0
        while i < len(running):
            req = running[i]
            need = -(-(req.num_computed + 1) // bs) - req.block_count
            if need > 0:
                evicted = self._grow(req, need)
                if evicted < 0:
                    preempted += 1
                    break
                preempted += evicted
            entries.append((req, 1))
            i += 1
        if self.swapped and not preempted:  # vLLM swaps in only in a step that preempted nothing
            self._swap_in(entries)
        if not entries:
            return None
        shape, decode_only = self.shape_of(entries)
        return Step(entries, shape, decode_only, preempted, copy_s=self.step_swapped * kv.swap_s_per_block)

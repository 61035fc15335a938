"""vLLM v1 / Sarathi-Serve: chunked prefill under a per-iteration token budget.

Running requests go first (decodes at one token, unfinished prefills continue their
chunk), then waiting requests are admitted FCFS while the budget, max_num_seqs and KV
blocks allow (blocks for the whole prompt from vLLM 0.19, for the first chunk before). When a running request cannot get a block, the lowest-priority running
request (the last admitted) is preempted by recompute.

With prefix caching (vLLM v1's default), a request admitted with no KV first takes the
longest cached prefix of its known prompt content (`simulator.prefix_cache`), and its
prefill starts after it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simulator.cost.ops import IterationShape
from simulator.errors import ConfigError
from simulator.prefix_cache import PrefixCache
from simulator.scheduler.base import (
    WAIT_FOR_PIPELINE,
    Scheduler,
    SchedulerConfigBase,
    Step,
    max_num_seqs_field,
    whole_prompt_budget,
)


class VllmV1Config(SchedulerConfigBase):
    """vLLM v1: chunked prefill under a token budget, running requests first."""

    policy: Literal["vllm-v1"] = "vllm-v1"
    max_num_seqs: int | None = max_num_seqs_field(
        "same rule as the budget: 1024 or 256, and never above the budget (vLLM refuses a budget below it)")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="token budget per iteration; default 8192 on >= 70 GiB GPUs other than A100 "
        "(16384 on those of >= 160 GiB when cost_model.engine_version is 0.28 or later), else 2048 (vLLM's "
        "defaults); with chunked prefill off, at least max_model_len")
    enable_chunked_prefill: bool = Field(
        True, description="split long prompts across iterations; off: a prompt must fit the budget whole")
    async_scheduling: bool = Field(
        True, description="vLLM --async-scheduling: the next iteration is "
        "scheduled while this one runs, so a request that arrives mid-iteration joins the one after next, "
        "and an iteration that follows another lasts max(GPU time, CPU overheads) instead of their sum "
        "(on by default in vLLM since vllm-project/vllm#27614, as here; an opt-in flag up to vLLM ~0.13: "
        "set false to model those). With pp > 1 it sets only the CPU overlap: a request joins the next "
        "micro-batch scheduled, since the pipeline's batch queue already schedules while earlier ones run")
    reserve_full_prompt: bool = Field(
        True, description="admit a waiting request only when KV blocks for its whole prompt (and, for a "
        "preempted one, the output it had made) are free, not just its first chunk's: vLLM's "
        "scheduler_reserve_full_isl, on by default from 0.19; false models earlier releases, which admit "
        "a chunk and preempt when the rest does not fit (validate sets it from a measurement's release)")
    enable_prefix_caching: bool | None = Field(
        None, description="vLLM v1's automatic prefix caching: whole KV blocks of prompt content the "
        "workload marks as shared (workload.shared_prefix, a trace's prefix or hash columns, a "
        "conversation's earlier turns) stay cached after their request and are reused, so only the rest "
        "is prefilled; a request preempted by recompute finds its own computed blocks again unless they "
        "were evicted. Default (unset): on, as in vLLM, except for hybrid linear-attention models "
        "(Qwen3-Next, Qwen3.5, Qwen3.6; the Mamba2 hybrids Nemotron 3 Nano and Nemotron-H), where vLLM leaves it "
        "off (vllm-project/vllm#23716) because their "
        "recurrent state cannot resume from cached KV; true on such a model is refused")

    def for_model(self, model):
        """Resolve prefix caching for `model`: vLLM turns it off by default for hybrid models,
        whose linear-attention layers keep one recurrent state per sequence and no per-token
        KV, so a cached attention prefix alone cannot skip their prefill. vLLM's opt-in
        `mamba_cache_mode=align` checkpoints that state only on a coarse block grid, which
        is not modelled, so an explicit request for it is refused rather than over-credited."""
        if self.enable_prefix_caching is None:
            return self.model_copy(update={"enable_prefix_caching": not model.linear_layers})
        if self.enable_prefix_caching and model.linear_layers:
            raise ConfigError(
                f"prefix caching on {model.name}, a hybrid linear-attention model, is not modelled: vLLM "
                "leaves it off by default for these models, and its opt-in form (mamba_cache_mode align) "
                "reuses a prefix only at the coarse block boundaries where it checkpoints the recurrent "
                "state", where="scheduler.enable_prefix_caching",
                fix="leave scheduler.enable_prefix_caching unset (off for this model, as in vLLM), or set it false")
        return self

    def resolve_limits(self, gpu_name, gpu_memory_gib, max_model_len, release=None):
        budget, seqs = vllm_default_limits(gpu_name, gpu_memory_gib, release)
        if not self.enable_chunked_prefill:  # vLLM: a whole prompt must fit one iteration
            budget = whole_prompt_budget(self.max_num_batched_tokens or max(max_model_len, 2048),
                                         max_model_len, "vllm-v1 with enable_chunked_prefill: false")
        budget = self.max_num_batched_tokens or budget
        if self.max_num_seqs is None:  # vLLM's default never exceeds the budget (EngineArgs)
            return budget, min(seqs, budget)
        if budget < self.max_num_seqs:  # vLLM's SchedulerConfig refuses to start
            raise ConfigError(
                f"max_num_batched_tokens ({budget}) is below max_num_seqs ({self.max_num_seqs}); vLLM "
                "refuses this, since every running sequence needs a token of the budget each step",
                where="scheduler.max_num_batched_tokens",
                fix=f"raise scheduler.max_num_batched_tokens to at least {self.max_num_seqs}, or lower "
                    "scheduler.max_num_seqs")
        return budget, self.max_num_seqs


#: From vLLM 0.28 (EngineArgs.get_batch_defaults) a GPU of at least 160 GiB (B200, B300,
#: MI300X and larger) gets twice the token budget. Only a release named as 0.28 or later
#: gets it: a run of unknown release keeps the budget every release before it had, which
#: the published measurements of these GPUs ran (aiconfigurator's sample: 0.15 to 0.19).
LARGE_GPU_BUDGET_SINCE = (0, 28)


def vllm_default_limits(gpu_name: str, gpu_memory_gib: float,
                        release: tuple[int, ...] | None = None) -> tuple[int, int]:
    """vLLM's usage-context defaults for the online server: (token budget, max_num_seqs), at
    `release` (None: unknown, the long-standing defaults)."""
    if gpu_memory_gib >= 160 and release is not None and release[:2] >= LARGE_GPU_BUDGET_SINCE:
        return 16384, 1024
    if gpu_memory_gib >= 70 and not gpu_name.startswith("a100"):
        return 8192, 1024
    return 2048, 256


class VllmV1Scheduler(Scheduler):
    name = "vllm-v1"
    paged = True
    batch_queue = True

    def __init__(self, config: VllmV1Config, kv, max_model_len, itl, **limits):
        super().__init__(config, kv, max_model_len, itl, **limits)
        self.chunked = config.enable_chunked_prefill
        self.reserve_full = config.reserve_full_prompt
        # unset (a scheduler built without a Simulation) means vLLM's default for dense models: on
        self.prefix_cache = PrefixCache(kv) if config.enable_prefix_caching is not False else None

    def _preempt(self, req):
        if self.prefix_cache is not None:
            self.prefix_cache.keep_own(req)
        super()._preempt(req)

    def _retire(self, finished, end):
        cache = self.prefix_cache
        if cache is not None:
            for req in finished:
                if req.prefix_tail is not None:  # a conversation turn: its context stays cached
                    cache.keep_own(req)
        super()._retire(finished, end)

    def schedule_more(self, now: float) -> Step | None:
        """The next micro-batch while earlier ones still cross the pipeline (PP under vLLM v1).

        vLLM counts tokens as computed when it schedules them, so a prompt's next chunk can
        follow the previous one into the next micro-batch (its KV is written stage by stage
        ahead of it), while a sequence whose scheduled tokens are all in flight, a decode
        awaiting its token, is skipped until that micro-batch's output is back. Here the
        in-flight tokens count as computed for this call only; `land` adds each
        micro-batch's tokens as it lands, oldest first."""
        inflight = self.inflight
        if not inflight:
            return self.schedule(now)
        running = self.running
        for r, q in inflight.items():
            r.num_computed += q
        # Nothing left to schedule until its output returns (decodes; a prompt's last chunk).
        parked = {r for r in inflight if r.num_computed >= r.prompt_tokens + r.num_generated}
        self.running = [r for r in running if r not in parked]
        # Parked sequences still count toward max_num_seqs, and still stand in the admission
        # order (`running`, which victims leave) that picks preemption victims.
        limit = self.max_num_seqs
        self.max_num_seqs = limit - len(parked)
        self._admitted = running
        try:
            return self.schedule(now)
        finally:
            self.max_num_seqs = limit
            self._admitted = None
            for r, q in inflight.items():
                r.num_computed -= q
            # Parked sequences keep their places; admissions join at the end.
            kept, before = set(self.running), set(running)
            self.running = ([r for r in running if r in parked or r in kept]
                            + [r for r in self.running if r not in before])

    def enter_pipeline(self) -> None:
        """Serve a pipeline-parallel replica through its batch queue (Engine._run_queued):
        track each sequence's tokens in flight, and spare those sequences in preemption. The
        rule is bound on this instance only, so runs without PP keep the base one."""
        self.inflight: dict = {}  # request -> tokens scheduled in micro-batches not yet landed
        self._admitted: list | None = None  # during schedule_more: `running`, the parked ones included
        self._next_victim = self._next_victim_in_pipeline

    def launch(self, step: Step) -> None:
        """`step` leaves for the pipeline: its tokens are in flight until it lands."""
        inflight = self.inflight
        for req, q in step.entries:
            inflight[req] = inflight.get(req, 0) + q

    def land(self, step: Step, end: float) -> list:
        """`step`'s output is back: its tokens are computed (`complete`)."""
        inflight = self.inflight
        for req, q in step.entries:
            left = inflight[req] - q
            if left:
                inflight[req] = left
            else:
                del inflight[req]
        return self.complete(step, end)

    def _next_victim_in_pipeline(self):
        """The last admitted sequence, in flight or not, as vLLM picks it; but one with tokens
        in flight is not preempted (its micro-batch would land on a preempted request): None,
        so the sequence that needs its blocks skips this micro-batch, and the victim goes
        once its own micro-batch is back."""
        order = self._admitted if self._admitted is not None else self.running
        victim = order[-1]
        if victim in self.inflight:
            return None
        order.pop()
        if order is not self.running:
            self.running.remove(victim)
        return victim

    def admission_error(self, req):
        err = None if self.chunked else self.budget_error(req, " with chunked prefill off")
        return err or super().admission_error(req)

    def schedule(self, now: float) -> Step | None:
        kv = self.kv
        bs = kv.block_size
        cache = self.prefix_cache
        budget = self.token_budget
        running = self.running
        entries = []
        preempted = 0
        # The iteration's shape is accumulated here rather than in a second pass
        # (shape_of): this loop is the simulator's hottest path.
        tokens = emit = n_dec = dec_ctx = 0
        chunks: list[tuple[int, int]] = []
        # _grow may preempt from the back of `running` while this loop walks it; a list
        # iterator checks the length at every step, so the victims are never reached.
        for req in running:
            if budget <= 0:
                break
            c = req.num_computed
            g = req.num_generated
            q = req.prompt_tokens + g - c
            if q == 1 and g:
                # A decode, the common case: one token, and a block at each block boundary.
                if c >= req.block_count * bs:
                    evicted = self._grow(req, -(-(c + 1) // bs) - req.block_count)
                    if evicted < 0:
                        if evicted == WAIT_FOR_PIPELINE:
                            continue
                        preempted += 1
                        break
                    preempted += evicted
                entries.append((req, 1))
                budget -= 1
                n_dec += 1
                dec_ctx += c
                continue
            if q > budget:
                q = budget
            need = -(-(c + q) // bs) - req.block_count
            if need > 0:
                evicted = self._grow(req, need)
                if evicted < 0:
                    if evicted == WAIT_FOR_PIPELINE:
                        continue
                    preempted += 1
                    break
                preempted += evicted
            entries.append((req, q))
            budget -= q
            tokens += q
            if c + q >= req.prompt_tokens + g:
                emit += 1
            chunks.append((q, c))
            if req.prefix is not None and cache is not None:
                cache.publish(req, c + q)
        tokens += n_dec  # each decode is one token, and emits one
        emit += n_dec
        # vLLM admits nothing in a step that preempted; a step left with no work at all (the
        # only running request preempted itself) is followed at once by the next, which
        # admits: here that is the same call, or the engine would idle with work queued.
        if not preempted or not entries:
            waiting = self.waiting
            while waiting and budget > 0 and len(running) < self.max_num_seqs:
                req = waiting[0]
                c = req.num_computed
                hit = None
                revived = 0  # cached blocks the hit takes back out of the free pool
                if cache is not None and c == 0 and (req.prefix is not None or req.preemptions):
                    hit = cache.match(req)
                    c, revived = hit.blocks * bs, hit.revived
                todo = req.prompt_tokens + req.num_generated - c
                if not self.chunked and todo > budget:
                    break
                q = min(todo, budget)
                # Blocks beyond those it holds, or will hold once the hit is referenced.
                held = max(req.block_count, c // bs)
                need = -(-(c + q) // bs) - held
                # Admission asks for the whole sequence's blocks where vLLM reserves them (>= 0.19),
                # else the chunk's; and a hybrid model's recurrent state or last window.
                gate = -(-(req.prompt_tokens + req.num_generated) // bs) - held if self.reserve_full else need
                if gate + revived + kv.beside(req) > kv.total - kv.used:
                    break
                waiting.popleft()
                if hit is not None:
                    cache.acquire(req, hit)
                    if req.preemptions == 0:
                        req.cached_tokens = c
                    if req.prefix is not None:
                        cache.publish(req, c + q)
                kv.admit(need, req)
                req.block_count += need
                req.status = "running"
                running.append(req)
                entries.append((req, q))
                budget -= q
                tokens += q
                if q == todo:
                    emit += 1
                chunks.append((q, c))
        if not entries:
            return None
        shape = IterationShape(tokens, emit, n_dec, dec_ctx, tuple(chunks))
        return Step(entries, shape, not chunks, preempted)

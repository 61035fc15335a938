"""Builds a runnable simulation from a validated scenario, and runs it.

build: catalogs → memory plan → cost model → replicas of engines → arrival process.
run: SimPy until every request has finished or been rejected, then metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import simpy

from simulator import __version__
from simulator.cluster import DisaggregatedCluster, Replica
from simulator.config import LoadedScenario, ModelConfig, ParallelismConfig, PoolConfig, Scenario
from simulator.cost import (
    COST_BACKENDS,
    IterationCostModel,
    ShardedModel,
    kernel_times_source,
    missing_tables,
    roofline_estimated,
)
from simulator.cost.ops import compute_dtypes, token_ops
from simulator.cost.releases import (
    decode_attention_model,
    nccl_allreduce_note,
    parse_version,
    release_allreduce,
    release_expert_kernel,
    untuned_fp8_decode_note,
)
from simulator.engine import Engine
from simulator.errors import (
    CatalogError,
    ConfigError,
    DoesNotFitError,
    ExpertSplitError,
    ServesimError,
)
from simulator.frontend import ApiServer, describe_api_server
from simulator.hardware import LINKS, GPUSpec, get_gpu
from simulator.kv_cache import BlockManager
from simulator.kv_swap import host_swap_blocks, seconds_per_block
from simulator.kv_transfer import build_kv_transfer
from simulator.lockstep import LockstepGroup
from simulator.memory import MemoryPlan, plan_memory
from simulator.metrics import IterationLog, describe, requests_frame, summarize
from simulator.models import ModelSpec, get_model, load_hf_config
from simulator.models.spec import FP8_WEIGHT_BLOCK
from simulator.pipeline import PipelineStages
from simulator.request import Request
from simulator.router import make_router
from simulator.scheduler import POLICIES, ItlSink
from simulator.scheduler.roles import role_scheduler
from simulator.workload import ClosedLoopWorkload, OpenLoopWorkload, build_workload, prompt_content


@dataclass
class SimulationResult:
    """Everything a run produced: the summary contract and the per-request/iteration tables."""

    summary: dict
    requests: pd.DataFrame
    iterations: pd.DataFrame
    memory: MemoryPlan
    scenario: LoadedScenario


@dataclass(frozen=True)
class InstancePlan:
    """What every instance of one layout shares: its memory plan and cost model."""

    tp: int
    pp: int
    replicas: int
    memory: MemoryPlan
    sharded: ShardedModel
    cost: IterationCostModel
    gpu: GPUSpec
    token_budget: int  # vLLM's max_num_batched_tokens for this GPU
    max_num_seqs: int
    price: float  # $ per GPU-hour
    dp: int = 1  # attention data-parallel ranks per replica, each with its own KV cache

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.replicas


def _layout_path(role: str) -> str:
    """The scenario section that lays out a pool: `parallelism`, or a disaggregated pool's."""
    return "parallelism" if role == "serve" else f"disaggregation.{role}"


def resolve_model(scenario: Scenario, base_dir) -> ModelSpec:
    m = scenario.model
    if m.config_json is not None:
        path = base_dir / m.config_json if not str(m.config_json).startswith("/") else m.config_json
        try:
            spec = load_hf_config(path)
        except CatalogError as exc:  # name the field, so the error also names a --set behind it
            raise CatalogError(f"{exc.where}: {exc.message}" if exc.where else exc.message,
                               where="model.config_json", fix=exc.fix) from None
    else:
        spec = get_model(m.name)
    if m.moe_routing is not None and spec.is_moe:
        spec = spec.model_copy(update={"moe_routing": m.moe_routing})
    return spec


def with_links(gpu: GPUSpec, intra: str | None, inter: str | None) -> GPUSpec:
    """The GPU with the scenario's interconnect overrides applied."""
    update = {}
    if intra is not None:
        update["intra_node_link"] = LINKS[intra]
    if inter is not None:
        update["inter_node_link"] = LINKS[inter]
    return gpu.model_copy(update=update) if update else gpu


def check_parallelism(model: ModelSpec, gpu: GPUSpec, scenario: Scenario, *,
                      layout: ParallelismConfig | PoolConfig | None = None, where: str = "parallelism") -> None:
    """`layout` and `where` name a disaggregated pool instead of `parallelism`."""
    layout = layout or scenario.parallelism
    tp, pp = layout.tp, layout.pp
    if model.num_heads % tp:
        divisors = [d for d in range(1, model.num_heads + 1) if model.num_heads % d == 0 and d <= 64]
        raise ConfigError(f"tp={tp} does not divide the {model.num_heads} attention heads of {model.name}",
                          where=f"{where}.tp", fix=f"set {where}.tp to one that divides {model.num_heads}: {divisors}")
    kvh = model.num_kv_heads
    if kvh % tp and tp % kvh:
        raise ConfigError(f"tp={tp} neither divides nor is a multiple of the {kvh} KV heads of {model.name}",
                          where=f"{where}.tp", fix=f"set {where}.tp to one that divides the {kvh} KV heads, or a multiple of them")
    if layout.dp > 1 and pp > 1:
        raise ConfigError("attention data parallelism (dp > 1) with pipeline stages (pp > 1) is not modelled",
                          where=f"{where}.dp", fix="use pp: 1 with dp, or dp: 1 with pp")
    if pp > model.num_layers:
        raise ConfigError(f"pp={pp} exceeds the {model.num_layers} layers of {model.name}",
                          where=f"{where}.pp", fix=f"use pp <= {model.num_layers}")
    _check_block_fp8_expert_split(model, scenario, layout, where)
    _check_expert_kernel(model, scenario.model, gpu)
    for field in ("activation_dtype", "expert_activation_dtype"):
        act = getattr(scenario.model, field)
        if act in ("fp8", "int8", "fp4") and act not in gpu.peak_tflops:
            pool = "" if where == "parallelism" else f" ({where}'s GPU)"
            raise ConfigError(f"{gpu.name}{pool} has no {act} tensor cores", where=f"model.{field}",
                              fix=f"use {field}: bf16 (weight-only quantisation) or a GPU that supports it"
                                  + (f" ({where}.gpu)" if pool else ""))


def _check_triton_rows(sharded: ShardedModel, timer, gpu: GPUSpec) -> None:
    """vLLM's Triton FP8 MoE off Hopper is timed by its own rows (B200's profile carries
    them); kernel tables without them would time it as the default kernel's fitted roofline,
    up to ~3x fast at prefill, so such a run is refused rather than guessed."""
    if sharded.expert_kernel != "triton" or not hasattr(timer, "source_of"):
        return
    moe = next((op for op in token_ops(64, sharded) if op.name == "fused_moe"), None)
    if moe is not None and moe.shape[-1] == "fp8t" and timer.source_of(moe) == "roofline-fitted":
        raise ConfigError(f"the kernel tables for {gpu.name} time no Triton FP8 MoE (of the shipped profiles, "
                          "B200's carries those rows, which GB200 reads)",
                          where="model.expert_kernel",
                          fix="use expert_kernel: auto, a profile with Triton MoE rows, or "
                              "cost_model.backend: roofline for a datasheet estimate")


def _check_expert_kernel(model: ModelSpec, m: ModelConfig, gpu: GPUSpec) -> None:
    """Marlin MoE runs 4-bit experts under 16-bit inputs only (vLLM's weight-only path);
    the Triton MoE kernels are vLLM's path for MXFP4 experts on Hopper (OpenAI's) and for
    FP8 experts under FP8 inputs on FP8 tensor cores (vLLM's fused_moe)."""
    if m.expert_kernel == "auto":
        return
    if not model.num_experts:
        raise ConfigError(f"{model.name} has no routed experts, so no MoE kernel to choose",
                          where="model.expert_kernel",
                          fix="use expert_kernel: auto (it applies to mixture-of-experts models only)")
    experts = m.expert_weight_dtype or m.weight_dtype
    inputs = m.expert_activation_dtype or m.activation_dtype
    if m.expert_kernel == "triton":
        mxfp4_hopper = experts == "fp4" and inputs in ("bf16", "fp16") and gpu.architecture == "hopper"
        fp8 = experts == "fp8" and inputs == "fp8" and gpu.peak_tflops.get("fp8", 0) > 0
        if not (mxfp4_hopper or fp8):
            raise ConfigError(f"the Triton MoE kernels (`expert_kernel: triton`) are vLLM's paths for MXFP4 experts "
                              f"under 16-bit inputs on Hopper and for FP8 experts under FP8 inputs; this run has "
                              f"{model.name} with {experts} experts under {inputs} inputs on {gpu.name}",
                              where="model.expert_kernel",
                              fix="use expert_kernel: auto (the kernel vLLM picks here)")
        return
    if experts not in ("fp4", "int4") or inputs not in ("bf16", "fp16"):
        raise ConfigError(f"Marlin MoE needs routed experts in fp4 or int4 under bf16/fp16 inputs; {model.name} "
                          f"has {experts} experts under {inputs} inputs",
                          where="model.expert_kernel",
                          fix="use expert_kernel: auto, or 4-bit experts (expert_weight_dtype: fp4) with 16-bit inputs")



def _check_block_fp8_expert_split(model: ModelSpec, scenario: Scenario, layout: ParallelismConfig | PoolConfig,
                                  where: str) -> None:
    m = scenario.model
    expert_dtype = m.expert_weight_dtype or m.weight_dtype
    if not model.has_block_fp8_experts(expert_dtype):
        return
    if layout.expert_parallel:
        return
    ways = layout.tp * layout.dp
    if model.splits_fp8_expert_blocks(ways):
        return
    fix = f"set {where}.expert_parallel: true (vLLM --enable-expert-parallel: whole experts per GPU)"
    raise ExpertSplitError(
        f"{model.name}'s block-FP8 experts ({model.moe_ffn_size} wide) cannot be split {ways} ways: "
        f"{model.moe_ffn_size / ways:g} per GPU is not a multiple of the {FP8_WEIGHT_BLOCK}-wide "
        "quantisation block, and vLLM refuses it", where=f"{where}.tp", fix=fix)


def check_disaggregation(scenario: Scenario) -> None:
    """A disaggregated layout replaces `parallelism`, and needs a paged-KV policy."""
    par = scenario.parallelism
    if par != ParallelismConfig():
        raise ConfigError(
            f"parallelism (tp={par.tp}, pp={par.pp}, replicas={par.replicas}) conflicts with "
            "disaggregation, which sets each pool's own layout", where="parallelism",
            fix="move tp/pp/replicas under disaggregation.prefill and disaggregation.decode, and "
            "drop parallelism (or leave it at tp=1, pp=1, replicas=1)")
    policy = scenario.scheduler.policy
    if not POLICIES[policy].scheduler.paged:
        paged = [name for name, p in POLICIES.items() if p.scheduler.paged]
        raise ConfigError(f"disaggregated serving needs paged KV; scheduler.policy {policy} "
                          "reserves KV per batch", where="scheduler.policy",
                          fix=f"use one of: {', '.join(paged)}")


class Simulation:
    """One scenario wired into SimPy; `run()` executes it once."""

    def __init__(self, loaded: LoadedScenario,
                 workload: OpenLoopWorkload | ClosedLoopWorkload | None = None):
        """`workload` replaces the scenario's own (validation replays measured requests)."""
        self.loaded = loaded
        sc = loaded.scenario
        self.scenario = sc
        self.model = resolve_model(sc, loaded.base_dir)
        self.gpu = with_links(get_gpu(sc.hardware.gpu), sc.hardware.intra_node_link,
                              sc.hardware.inter_node_link)
        dis = sc.disaggregation
        #: Each role's layout and GPU: "serve" when colocated, else "prefill" and "decode".
        layouts = {"serve": sc.parallelism} if dis is None else {"prefill": dis.prefill, "decode": dis.decode}
        gpus = {role: self._pool_gpu(layout, role) for role, layout in layouts.items()}
        if dis is None:
            check_parallelism(self.model, self.gpu, sc)
        else:
            check_disaggregation(sc)
            for role, pool in layouts.items():
                check_parallelism(self.model, gpus[role], sc, layout=pool, where=f"disaggregation.{role}")
        self.max_model_len = sc.model.max_model_len or self.model.max_position_embeddings
        self.block_size = self._block_size()
        #: The scenario's scheduler knobs with the model-dependent defaults resolved.
        self.scheduler_config = sc.scheduler.for_model(self.model)
        backend = COST_BACKENDS.get(sc.cost_model.backend)
        if backend is None:
            raise ConfigError(f"unknown cost back end {sc.cost_model.backend!r}", where="cost_model.backend",
                              fix=f"use one of: {', '.join(COST_BACKENDS)}")
        timers: dict[str, object] = {}  # one per GPU type
        for role, gpu in gpus.items():
            if gpu.name not in timers:
                timers[gpu.name] = self._timer(backend, gpu, role)
        self.pools: dict[str, InstancePlan] = {}
        for role, layout in layouts.items():
            gpu = gpus[role]
            self.pools[role] = self._plan(layout.tp, layout.pp, layout.replicas, timers[gpu.name], gpu,
                                          None if dis is None else role, dp=layout.dp,
                                          expert_parallel=layout.expert_parallel,
                                          price=getattr(layout, "cost_per_gpu_hour", None))
        for role, plan in self.pools.items():
            self._check_swap(plan, role)
            self._check_engine_blocks(plan, role)
        if dis is not None:
            self.kv_transfer = build_kv_transfer(dis, self.model, gpus["prefill"], sc.model.kv_dtype,
                                                 sc.hardware.gpus_per_node, decode_gpu=gpus["decode"])
        #: The pool whose KV capacity bounds the batch: the only one, or the decode pool.
        self.batch_pool = main = self.pools["serve" if dis is None else "decode"]
        self.memory, self.sharded, self.cost = main.memory, main.sharded, main.cost
        self.token_budget, self.max_num_seqs = main.token_budget, main.max_num_seqs
        timer = timers[main.gpu.name]
        dtypes = {d for p in self.pools.values() for d in compute_dtypes(p.sharded)}
        if len(timers) == 1:
            self.kernel_times = kernel_times_source(timer, dtypes)
        else:  # pools on different GPUs read each GPU's own tables
            self.kernel_times = "; ".join(
                f"{role} pool on {plan.gpu.name}: "
                f"{kernel_times_source(timers[plan.gpu.name], compute_dtypes(plan.sharded))}"
                for role, plan in self.pools.items())
        # Each pool's ops as its own GPU's timer sees them.
        by_timer = [(timers[g], [p.cost for p in self.pools.values() if p.gpu.name == g]) for g in timers]
        estimated = list(dict.fromkeys(f for t, costs in by_timer for f in roofline_estimated(t, costs)))
        if estimated:
            self.kernel_times += f"; roofline estimates for {', '.join(estimated)} (no table times them)"
        missing = list(dict.fromkeys(f for t, costs in by_timer for f in missing_tables(t, costs)))
        if missing:
            self.kernel_times += f"; not in the profile: {', '.join(missing)}"
        if any(p.cost.older_decode_kernel for p in self.pools.values()):
            self.kernel_times += "; " + untuned_fp8_decode_note(sc.cost_model.engine_version)
        if any(p.sharded.nccl_pinned for p in self.pools.values()):
            self.kernel_times += "; " + nccl_allreduce_note(sc.cost_model.engine_version)
        self.workload = workload if workload is not None else build_workload(sc.workload, loaded.base_dir)

    # DeepSeek Sparse Attention: vLLM's FlashMLA-sparse kernels page the KV cache in 64-token
    # blocks, and vLLM sets that block size for these models (docs/fidelity.md).
    SPARSE_BLOCK_SIZE = 64

    def _required_block_size(self) -> tuple[int, str] | None:
        """(the KV block size the model's attention kernels need, why), where they need one."""
        if self.model.is_sparse and self.model.is_mla:
            return self.SPARSE_BLOCK_SIZE, "runs vLLM's FlashMLA-sparse kernels, which need"
        if self.model.is_sparse:  # MiniMax-M3: vLLM's KV-cache init needs its sparse block size
            return self.model.sparse_block_size, "selects whole blocks of its KV, so vLLM needs"
        return None

    def _block_size(self) -> int:
        """memory.block_size, or the one the model's attention kernels require when the
        scenario leaves it at the default; a different explicit size is refused."""
        memory = self.scenario.memory
        required = self._required_block_size()
        if required is None:
            return memory.block_size
        size, why = required
        if "block_size" in memory.model_fields_set and memory.block_size != size:
            raise ConfigError(f"{self.model.name} {why} {size}-token KV blocks, not {memory.block_size}",
                              where="memory.block_size", fix=f"set memory.block_size: {size}, or leave it out")
        return size

    def _timer(self, backend, gpu: GPUSpec, role: str):
        """The kernel timer of one GPU type. `hardware.profile` times `hardware.gpu`'s
        kernels; a pool on another GPU reads that GPU's shipped tables (`auto`)."""
        sc = self.scenario
        if gpu.name == self.gpu.name:
            return backend(gpu, sc.cost_model, sc.hardware.profile)
        try:
            return backend(gpu, sc.cost_model, "auto")
        except ServesimError as exc:
            raise ConfigError(f"no kernel tables ship for {gpu.name}, the {role} pool's GPU ({exc.message})",
                              where=f"disaggregation.{role}.gpu",
                              fix="use cost_model.backend: auto (the roofline where no tables ship), or a GPU "
                                  "with shipped tables (`simulate list gpus`)") from None

    def _pool_gpu(self, layout, role: str) -> GPUSpec:
        """A disaggregated pool's own GPU (`gpu`), else the scenario's, with its link overrides."""
        name = getattr(layout, "gpu", None)
        if name is None:
            return self.gpu
        hw = self.scenario.hardware
        try:
            return with_links(get_gpu(name), hw.intra_node_link, hw.inter_node_link)
        except ServesimError as exc:
            exc.where = f"disaggregation.{role}.gpu"
            exc.args = (exc.render(),)
            raise

    def _plan(self, tp: int, pp: int, replicas: int, timer, gpu: GPUSpec, role: str | None = None,
              dp: int = 1, expert_parallel: bool = False, price: float | None = None) -> InstancePlan:
        """One layout's memory plan, limits, price and cost model on `gpu`; `role` names a
        disaggregated pool in errors."""
        sc = self.scenario
        budget, max_seqs = self.scheduler_config.resolve_limits(
            gpu.name, gpu.usable_memory_gib, self.max_model_len, parse_version(sc.cost_model.engine_version))
        if price is None:
            price = (sc.hardware.cost_per_gpu_hour if sc.hardware.cost_per_gpu_hour is not None
                     and gpu.name == self.gpu.name else gpu.cost_per_gpu_hour)
        expert_kernel = release_expert_kernel(sc.model.expert_kernel, sc.model.expert_weight_dtype,
                                              sc.model.activation_dtype, gpu, sc.cost_model.engine_version)
        try:
            memory = plan_memory(
                self.model, gpu, tp=tp, pp=pp, weight_dtype=sc.model.weight_dtype,
                expert_weight_dtype=sc.model.expert_weight_dtype, kv_dtype=sc.model.kv_dtype,
                utilization=sc.memory.gpu_memory_utilization,
                runtime_reserve_gib=sc.memory.runtime_reserve_gib, block_size=self.block_size,
                max_batched_tokens=budget, max_num_seqs=max_seqs,
                max_model_len=self.max_model_len, kv_cache_tokens=sc.memory.kv_cache_tokens,
                dp=dp, expert_parallel=expert_parallel,
                expert_kernel=expert_kernel, gpus_per_node=sc.hardware.gpus_per_node)
        except DoesNotFitError as exc:
            if role is None:
                raise
            pool = f"disaggregation.{role}"
            raise DoesNotFitError(exc.message, where=f"{pool}: {exc.where}",
                                  fix=(exc.fix or "").replace("parallelism.", f"{pool}.")
                                  .replace("hardware.gpu:", f"{pool}.gpu:")) from None
        sharded = ShardedModel.build(self.model, tp, pp, sc.model.weight_dtype,
                                     sc.model.activation_dtype, sc.model.kv_dtype,
                                     sc.hardware.gpus_per_node, sc.model.expert_weight_dtype, dp,
                                     expert_parallel, sc.model.expert_activation_dtype, expert_kernel)
        _check_triton_rows(sharded, timer, gpu)
        sharded = release_allreduce(sharded, gpu, sc.cost_model.engine_version)
        decode = decode_attention_model(sharded, gpu, sc.cost_model.engine_version)
        return InstancePlan(tp, pp, replicas, memory, sharded,
                            IterationCostModel(sharded, timer, sc.cost_model,
                                               overlap_cpu=getattr(sc.scheduler, "async_scheduling", False),
                                               decode_sharded=decode), gpu, budget, max_seqs, price, dp)

    # -- wiring ------------------------------------------------------------------------
    def _build_engines(self, env, itl, log, plan: InstancePlan, first: int = 0,
                       role: str | None = None) -> list[Replica]:
        """`plan.replicas` replicas numbered from `first`; `role` picks a disaggregated role."""
        sc = self.scenario
        policy = POLICIES[sc.scheduler.policy].scheduler
        if role is not None:
            dis = sc.disaggregation
            policy = role_scheduler(policy, role, dis.kv_transfer.protocol if dis is not None else "connector")
        pp = plan.pp
        engines_per_rank = self.virtual_engines(plan)
        blocks_per_engine = plan.memory.num_blocks // engines_per_rank
        coupled = plan.sharded.dp > 1  # MoE layers shared by the DP ranks
        swap_blocks, swap_s = 0, 0.0
        if getattr(sc.scheduler, "preemption_mode", "recompute") == "swap":
            per_token = plan.memory.kv_bytes_per_token
            swap_blocks = host_swap_blocks(sc.scheduler.swap_space_gib, self.block_size, per_token, pp)
            swap_s = seconds_per_block(self.block_size, per_token, plan.gpu.pcie)
        replicas = []
        for r in range(first, first + plan.replicas):
            engines = []
            lockstep = LockstepGroup(env, plan.cost) if coupled else None
            stages = PipelineStages(env, pp) if pp > 1 else None
            for k in range(plan.dp * engines_per_rank):  # each DP rank's engines; ranks pick by load as vLLM's DP balancer does
                kv = BlockManager(blocks_per_engine, self.block_size,
                                  getattr(sc.scheduler, "watermark", 0.0), plan.memory.state_blocks, swap_blocks,
                                  swap_s, plan.memory.window)
                sched = policy(self.scheduler_config, kv, self.max_model_len, itl,
                               token_budget=plan.token_budget, max_num_seqs=plan.max_num_seqs)
                sched.expect_arrivals = self._expect_arrivals
                engines.append(Engine(env, r, sched, plan.cost, log, self._on_finish, self._on_reject,
                                      fast_forward=self._fast_forward, lockstep=lockstep,
                                      settle_after_finish=isinstance(self.workload, ClosedLoopWorkload),
                                      rank=k // engines_per_rank if plan.dp > 1 else k % engines_per_rank,
                                      stages=stages, batch_queue=engines_per_rank < pp))
            replicas.append(Replica(r, engines))
        return replicas

    def _check_swap(self, plan: InstancePlan, role: str) -> None:
        """Swap preemption with attention DP is refused while the scenario is read, so the
        error names the file like every other (api.run)."""
        if plan.sharded.dp > 1 and getattr(self.scenario.scheduler, "preemption_mode", "recompute") == "swap":
            raise ConfigError("swap preemption is not modelled with attention data parallelism (ranks "
                              "stepping in lockstep)", where="scheduler.preemption_mode",
                              fix=f"use preemption_mode: recompute, or {_layout_path(role)}.dp: 1")

    def virtual_engines(self, plan: InstancePlan) -> int:
        """Engines per DP rank: a PP replica under vLLM v1 (colocated) is one scheduler with a
        batch queue over the whole cache; under other policies, or in a disaggregated pool,
        one virtual engine per stage, each holding blocks // pp."""
        queued = POLICIES[self.scenario.scheduler.policy].scheduler.batch_queue and self.scenario.disaggregation is None
        return 1 if queued else plan.pp

    def _check_engine_blocks(self, plan: InstancePlan, role: str) -> None:
        """Each pipeline virtual engine holds blocks // pp of the cache: at least one each."""
        blocks, pp = plan.memory.num_blocks, self.virtual_engines(plan)
        if blocks // pp:
            return
        layout = _layout_path(role)
        set_tokens = self.scenario.memory.kv_cache_tokens is not None
        raise ConfigError(
            f"the KV cache holds {blocks} block(s) of {self.block_size} tokens, fewer than the {pp} pipeline "
            "virtual engines that split it", where="memory.kv_cache_tokens" if set_tokens else f"{layout}.pp",
            fix=f"give memory.kv_cache_tokens at least {pp * self.block_size}, or fewer stages ({layout}.pp)")

    def _build_cluster(self, env, itl, log) -> DisaggregatedCluster:
        prefill = self._build_engines(env, itl, log, self.pools["prefill"], 0, "prefill")
        decode = self._build_engines(env, itl, log, self.pools["decode"], len(prefill), "decode")
        return DisaggregatedCluster(env, prefill, decode, self.kv_transfer, self.scenario.router,
                                    self._on_finish, self._on_reject)

    def _expect_arrivals(self) -> bool:
        return self._pending_sources > 0

    def _dispatch(self, req: Request) -> None:
        self.requests.append(req)
        if self.api_server.active:
            self.api_server.submit(req)
        else:
            self._route(req)

    def _route(self, req: Request) -> None:
        self.replicas[self.router.choose(self.replicas, req)].submit(req)

    def _on_reject(self, req: Request, reason: str) -> None:
        req.status = "rejected"
        req.reject_reason = reason
        self._settle(req)

    def _on_finish(self, req: Request) -> None:
        self._settle(req)

    def _settle(self, req: Request) -> None:
        self.settled += 1
        if self.settled % self._tick_every == 0 and not self._tick.triggered:
            self._tick.succeed()
        if isinstance(self.workload, ClosedLoopWorkload):
            # Replacement sends wait for one event that runs after every engine has applied
            # what completes at this instant, and go out in request order. Same-instant ties
            # then break one way whatever the event order (fast-forward and stepping agree),
            # and a run of rejections cannot recurse.
            if not self._sends_due:
                self._pending_sources += 1
                flush = self.env.event()
                flush.callbacks.append(self._send_due)
                flush.succeed()
            self._sends_due.append((req.id, req.client))

    def _send_due(self, _event) -> None:
        due, self._sends_due = sorted(self._sends_due), []
        self._pending_sources -= 1
        for _, client in due:
            self._next_send(client, first=False)

    def _next_send(self, client: int, *, first: bool) -> None:
        """Client `client` sends its next request, after its think time if any; not at all
        when that send would fall at or past `duration_s` (the request is sent then, not
        decided on now)."""
        wl = self.workload
        i = self._next_index
        if i >= len(wl.prompt_tokens):
            self._wake_all()
            return
        if wl.release_s is not None:
            delay = max(0.0, float(wl.release_s[i]) - self.env.now)
        elif wl.think_times is not None:
            delay = float(wl.think_times[i])
        else:
            delay = 0.0 if first else wl.think_time_s
        if wl.duration_s is not None and self.env.now + delay >= wl.duration_s:
            self._wake_all()
            return
        self._next_index += 1
        if delay > 0:
            self._pending_sources += 1
            self.env.process(self._think_then_send(client, i, delay))
        else:
            self._send_closed_loop(client, i)

    def _think_then_send(self, client: int, i: int, delay: float):
        yield self.env.timeout(delay)
        self._pending_sources -= 1
        self._send_closed_loop(client, i)

    def _send_closed_loop(self, client: int, i: int) -> None:
        wl = self.workload
        self._dispatch(Request(i, self.env.now, int(wl.prompt_tokens[i]), int(wl.output_tokens[i]),
                               client=client, **prompt_content(wl.prefixes, i)))

    def _open_loop(self, wl: OpenLoopWorkload):
        env = self.env
        n = len(wl)
        for i, req in enumerate(wl.iter_requests()):
            if req.arrival > env.now:
                yield env.timeout(req.arrival - env.now)
            self._pending_sources = n - i - 1
            self._dispatch(req)
        self._wake_all()

    def _wake_all(self) -> None:
        for rep in self.replicas:
            for e in rep.engines:
                e.wake()

    # -- running -----------------------------------------------------------------------
    def expected_requests(self) -> int:
        wl = self.workload
        return len(wl.prompt_tokens)

    def run(self, *, record_iterations: bool = True, fast_forward: bool = True,
            progress: Callable[[int, int], None] | None = None) -> SimulationResult:
        """Run once. `fast_forward=False` steps every decode iteration (for equivalence tests)."""
        t0 = time.perf_counter()
        self._fast_forward = fast_forward
        env = self.env = simpy.Environment()
        self.requests: list[Request] = []
        self.settled = 0
        self._next_index = 0
        self._sends_due: list[tuple[int, int]] = []
        total = self.expected_requests()
        self._tick_every = max(1, total // 100)
        self._tick = env.event()
        itl = ItlSink()
        log = IterationLog(record_iterations)
        if any(p.dp > 1 for p in self.pools.values()):
            log.record_ranks()
        elif any(self.virtual_engines(p) > 1 for p in self.pools.values()):
            log.record_ranks("virtual_engine")
        self.router = make_router(self.scenario.router)
        # Late-bound: a disaggregated run rebinds _route to its cluster just below.
        self.api_server = ApiServer(env, self.scenario.cost_model, lambda req: self._route(req))
        if self.scenario.disaggregation is None:
            self.replicas = self._build_engines(env, itl, log, self.pools["serve"])
        else:
            self.cluster = self._build_cluster(env, itl, log)
            self.replicas = self.cluster.instances
            self._route = self.cluster.route
        wl = self.workload
        if isinstance(wl, OpenLoopWorkload):
            self._pending_sources = len(wl.arrival_s)
            env.process(self._open_loop(wl))
        else:
            self._pending_sources = 0
            # Clients past the request count would never send: one wake stands for all of them.
            for c in range(min(wl.concurrency, len(wl.prompt_tokens))):
                self._next_send(c, first=True)
            if wl.concurrency > len(wl.prompt_tokens):
                self._wake_all()
        while True:
            try:
                env.run(until=self._tick)
            except RuntimeError as exc:  # no events left before the tick: finished or stuck
                if "No scheduled events left" not in str(exc):
                    raise
                break
            if progress is not None:
                progress(self.settled, total)
            self._tick = env.event()
            if env.peek() == float("inf"):  # nothing scheduled: every engine is idle
                break
        if progress is not None:
            progress(self.settled, total)
        for req in self.requests:
            if req.status not in ("finished", "rejected"):
                req.status = "rejected"
                req.reject_reason = ("stopped mid-run: still waiting to resume when nothing else could happen "
                                     "(deadlock)" if req.num_generated else
                                     "never scheduled: still queued when nothing else could happen (deadlock)")
        wall = time.perf_counter() - t0
        return self._result(itl, log, wall)

    def _result(self, itl: ItlSink, log: IterationLog, wall: float) -> SimulationResult:
        sc = self.scenario
        dis = sc.disaggregation is not None
        req_df = requests_frame(self.requests, disaggregated=dis,
                                rank_column=log.rank_column if log.ranks is not None else None)
        it_df = log.frame()
        slo = sc.slo.model_dump()
        summary: dict = {"scenario": self.loaded.name}
        summary.update(summarize(req_df, itl, slo))
        # KV figures describe the pool that holds requests while they decode.
        main = self.batch_pool
        instances = self.cluster.decode if dis else self.replicas
        if dis:
            n_prefill = len(self.cluster.prefill)
            it_df.insert(1, "pool", np.where(it_df["replica"].to_numpy() < n_prefill, "prefill", "decode"))
        peak, mean_util = _kv_use(instances, it_df[it_df["pool"] == "decode"] if dis else it_df, log)
        gpus = sum(plan.gpus for plan in self.pools.values())
        usd_per_hour = sum(plan.gpus * plan.price for plan in self.pools.values())
        out_tps = summary["throughput"]["output_tokens_per_s"]
        # Under PP's virtual engines each holds blocks // pp: what the replica can use.
        engines = self.virtual_engines(main)
        blocks = self.memory.num_blocks // engines * engines
        capacity = blocks * self.memory.block_size
        summary["kv_cache"] = {
            "capacity_tokens": capacity,
            "total_capacity_tokens": capacity * main.dp * main.replicas,
            "block_size": self.memory.block_size,
            "blocks_per_replica": blocks,
            "peak_utilization": peak,
            "mean_utilization": mean_util,
            "prefix_cache_hit_rate": _prefix_hit_rate(req_df),
        }
        if self.memory.state_blocks:  # hybrid linear attention: each sequence's recurrent state
            summary["kv_cache"]["state_blocks_per_sequence"] = self.memory.state_blocks
        if self.memory.window[0]:  # sliding-window layers: the most one sequence's windows take
            summary["kv_cache"]["window_blocks_per_sequence"] = self.memory.window[0] * self.memory.window[1]
        if getattr(self.workload, "trace_rows", None) is not None:  # what of the trace was replayed
            summary["trace"] = {"rows": int(self.workload.trace_rows),
                                "replayed": int(self.workload.arrival_s.size),
                                "skipped_failed_rows": int(self.workload.skipped_rows),
                                "cut_by": list(self.workload.trace_cut_by),
                                "unused_columns": list(self.workload.trace_unused)}
        summary["memory_gib"] = {
            "gpu": self.memory.gpu_memory_gib,
            "weights": self.memory.weights_gib,
            "activations": self.memory.activation_gib,
            "runtime": self.memory.runtime_gib,
            "kv_cache": self.memory.kv_gib,
        }
        summary["cost"] = {
            "gpus": gpus,
            "usd_per_hour": usd_per_hour,
            "usd_per_million_output_tokens": (usd_per_hour / 3600 / out_tps * 1e6) if out_tps > 0 else None,
        }
        summary["config"] = {
            "model": self.model.name,
            "gpu": self.gpu.name,
            "tp": main.tp,
            "pp": main.pp,
            "virtual_engines": engines,
            "replicas": main.replicas,
            "dp": main.dp,
            "ep": main.sharded.ep,
            # The formats simulated: a scenario's defaults (bf16) are not a checkpoint's own.
            "dtypes": {"weights": sc.model.weight_dtype, "activations": sc.model.activation_dtype,
                       "experts": sc.model.expert_weight_dtype, "kv": sc.model.kv_dtype},
            "scheduler": sc.scheduler.policy,
            "max_num_batched_tokens": self.token_budget,
            "max_num_seqs": self.max_num_seqs,
            "max_model_len": self.max_model_len,
            "prefix_caching": getattr(self.scheduler_config, "enable_prefix_caching", None),
            "cost_backend": sc.cost_model.backend,
            "kernel_times": self.kernel_times,
            "api_server": describe_api_server(sc.cost_model),
            "seed": sc.workload.seed,
        }
        if self.model.is_moe:  # the routing its fused-MoE kernel rows were read under
            summary["config"]["moe_routing"] = self.model.moe_routing
        if self.model.compressed:  # DeepSeek-V4 caches its own FP8 layout whatever kv_dtype says
            summary["config"]["compressed_attention"] = True
            summary["config"]["dtypes"]["kv"] = "fp8"
        if dis:
            summary["disaggregation"] = self._disaggregation_summary(req_df, it_df, log)
        summary["iterations"] = log.count
        summary["servesim_version"] = __version__
        summary["sim_wall_s"] = wall
        return SimulationResult(summary, req_df, it_df, self.memory, self.loaded)

    def _disaggregation_summary(self, req_df: pd.DataFrame, it_df: pd.DataFrame, log: IterationLog) -> dict:
        """Per-pool layout and KV use, and the KV transfers' links and durations."""
        out: dict = {}
        for role, instances in (("prefill", self.cluster.prefill), ("decode", self.cluster.decode)):
            plan = self.pools[role]
            peak, mean_util = _kv_use(instances, it_df[it_df["pool"] == role], log)
            out[role] = {
                "gpu": plan.gpu.name, "tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "ep": plan.sharded.ep,
                "replicas": plan.replicas, "gpus": plan.gpus, "usd_per_hour": plan.gpus * plan.price,
                "max_num_batched_tokens": plan.token_budget, "max_num_seqs": plan.max_num_seqs,
                "kv_capacity_tokens": plan.memory.capacity_tokens,  # per attention-DP rank
                "kv_capacity_tokens_per_instance": plan.memory.capacity_tokens * plan.dp,
                "kv_blocks_per_replica": plan.memory.num_blocks,
                "kv_peak_utilization": peak,
                "kv_mean_utilization": mean_util,
                "iterations": log.iterations_of(rep.index for rep in instances),
            }
        kt = self.kv_transfer
        done = req_df[req_df["status"] == "completed"]
        out["kv_transfer"] = {
            "links": sorted({name for row in kt.links for name in row}),
            "protocol": kt.protocol,
            "bytes_per_token_per_gpu": kt.bytes_per_token,
            "ms": describe(done["kv_transfer_ms"].to_numpy()),
        }
        return out


def _prefix_hit_rate(requests: pd.DataFrame) -> float:
    """Prompt tokens served from the prefix cache at admission, over the prompt tokens of
    the requests admitted (a refused request never reached the cache)."""
    admitted = requests[requests["status"] != "rejected"]
    prompts = int(admitted["prompt_tokens"].sum())
    return int(admitted["cached_tokens"].sum()) / prompts if prompts else 0.0


def _kv_use(instances: list[Replica], iterations: pd.DataFrame, log: IterationLog) -> tuple[float, float | None]:
    """Peak KV-block use of any engine, and the duration-weighted mean use per iteration
    (None where the log kept no rows: compare, plan and validate do not keep them)."""
    peak = max(e.scheduler.kv.peak_used / e.scheduler.kv.total for rep in instances for e in rep.engines)
    if not log.enabled:
        mean_util = None
    elif len(iterations):
        w = iterations["duration_ms"].to_numpy()
        util = iterations["kv_blocks_used"].to_numpy() / np.maximum(iterations["kv_blocks_total"].to_numpy(), 1)
        mean_util = float((util * w).sum() / w.sum()) if w.sum() > 0 else 0.0
    else:
        mean_util = 0.0
    return peak, mean_util

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
from simulator.config import LoadedScenario, Scenario
from simulator.cost import COST_BACKENDS, IterationCostModel, ShardedModel
from simulator.engine import Engine
from simulator.errors import ConfigError
from simulator.hardware import LINKS, GPUSpec, get_gpu
from simulator.kv_cache import BlockManager
from simulator.memory import MemoryPlan, plan_memory
from simulator.metrics import IterationLog, requests_frame, summarize
from simulator.models import ModelSpec, get_model, load_hf_config
from simulator.request import Request
from simulator.router import make_router
from simulator.scheduler import POLICIES, ItlSink
from simulator.workload import ClosedLoopWorkload, OpenLoopWorkload, build_workload


@dataclass
class SimulationResult:
    """Everything a run produced: the summary contract and the per-request/iteration tables."""

    summary: dict
    requests: pd.DataFrame
    iterations: pd.DataFrame
    memory: MemoryPlan
    scenario: LoadedScenario


class Replica:
    """A model copy: one engine, or one per pipeline stage's micro-batch (virtual engines)."""

    def __init__(self, index: int, engines: list[Engine]):
        self.index = index
        self.engines = engines

    @property
    def outstanding(self) -> int:
        return sum(e.outstanding for e in self.engines)

    def submit(self, req: Request) -> None:
        req.replica = self.index
        # vLLM's PP engine hands a new request to the virtual engine with the least work.
        engine = min(self.engines, key=lambda e: e.outstanding) if len(self.engines) > 1 else self.engines[0]
        engine.submit(req)


def resolve_model(scenario: Scenario, base_dir) -> ModelSpec:
    m = scenario.model
    if m.config_json is not None:
        path = base_dir / m.config_json if not str(m.config_json).startswith("/") else m.config_json
        return load_hf_config(path)
    return get_model(m.name)


def with_links(gpu: GPUSpec, intra: str | None, inter: str | None) -> GPUSpec:
    """The GPU with the scenario's interconnect overrides applied."""
    update = {}
    if intra is not None:
        update["intra_node_link"] = LINKS[intra]
    if inter is not None:
        update["inter_node_link"] = LINKS[inter]
    return gpu.model_copy(update=update) if update else gpu


def check_parallelism(model: ModelSpec, gpu: GPUSpec, scenario: Scenario) -> None:
    tp, pp = scenario.parallelism.tp, scenario.parallelism.pp
    if model.num_heads % tp:
        divisors = [d for d in range(1, model.num_heads + 1) if model.num_heads % d == 0 and d <= 64]
        raise ConfigError(f"tp={tp} does not divide the {model.num_heads} attention heads of {model.name}",
                          where="parallelism.tp", fix=f"use a tp that divides {model.num_heads}: {divisors}")
    kvh = model.num_kv_heads
    if kvh % tp and tp % kvh:
        raise ConfigError(f"tp={tp} neither divides nor is a multiple of the {kvh} KV heads of {model.name}",
                          where="parallelism.tp", fix="use a tp that divides the KV heads, or a multiple of them")
    if pp > model.num_layers:
        raise ConfigError(f"pp={pp} exceeds the {model.num_layers} layers of {model.name}",
                          where="parallelism.pp", fix=f"use pp <= {model.num_layers}")
    act = scenario.model.activation_dtype
    if act in ("fp8", "int8", "fp4") and act not in gpu.peak_tflops:
        raise ConfigError(f"{gpu.name} has no {act} tensor cores", where="model.activation_dtype",
                          fix="use activation_dtype: bf16 (weight-only quantisation) or a GPU that supports it")


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
        check_parallelism(self.model, self.gpu, sc)
        tp, pp = sc.parallelism.tp, sc.parallelism.pp
        self.max_model_len = sc.model.max_model_len or self.model.max_position_embeddings
        sched_cfg = sc.scheduler
        budget, max_seqs = sched_cfg.resolve_limits(self.gpu.name, self.gpu.usable_memory_gib, self.max_model_len)
        self.token_budget, self.max_num_seqs = budget, max_seqs
        self.memory = plan_memory(
            self.model, self.gpu, tp=tp, pp=pp, weight_dtype=sc.model.weight_dtype,
            expert_weight_dtype=sc.model.expert_weight_dtype, kv_dtype=sc.model.kv_dtype, utilization=sc.memory.gpu_memory_utilization,
            runtime_reserve_gib=sc.memory.runtime_reserve_gib, block_size=sc.memory.block_size,
            max_batched_tokens=budget, max_num_seqs=max_seqs, max_model_len=self.max_model_len,
            kv_cache_tokens=sc.memory.kv_cache_tokens)
        backend = COST_BACKENDS.get(sc.cost_model.backend)
        if backend is None:
            raise ConfigError(f"unknown cost back end {sc.cost_model.backend!r}", where="cost_model.backend",
                              fix=f"use one of: {', '.join(COST_BACKENDS)}")
        timer = backend(self.gpu, sc.cost_model, sc.hardware.profile)
        self.sharded = ShardedModel.build(self.model, tp, pp, sc.model.weight_dtype,
                                          sc.model.activation_dtype, sc.model.kv_dtype,
                                          sc.hardware.gpus_per_node, sc.model.expert_weight_dtype)
        self.cost = IterationCostModel(self.sharded, timer, sc.cost_model)
        self.workload = workload if workload is not None else build_workload(sc.workload, loaded.base_dir)

    # -- wiring ------------------------------------------------------------------------
    def _build_engines(self, env, itl, log) -> list[Replica]:
        sc = self.scenario
        policy = POLICIES[sc.scheduler.policy]
        pp = sc.parallelism.pp
        blocks_per_engine = self.memory.num_blocks // pp
        replicas = []
        for r in range(sc.parallelism.replicas):
            engines = []
            for _ in range(pp):
                kv = BlockManager(blocks_per_engine, sc.memory.block_size,
                                  getattr(sc.scheduler, "watermark", 0.0))
                sched = policy.scheduler(sc.scheduler, kv, self.max_model_len, itl,
                                         token_budget=self.token_budget, max_num_seqs=self.max_num_seqs)
                sched.expect_arrivals = self._expect_arrivals
                engines.append(Engine(env, r, sched, self.cost, log, self._on_finish, self._on_reject,
                                      fast_forward=self._fast_forward))
            replicas.append(Replica(r, engines))
        return replicas

    def _expect_arrivals(self) -> bool:
        return self._pending_sources > 0

    def _dispatch(self, req: Request) -> None:
        self.requests.append(req)
        if self._frontend_fixed or self._frontend_per_token or self._frontend_latency:
            # The API server's CPU work (parsing, tokenising) is serial (one event loop);
            # its latency (HTTP, process hand-offs) is not.
            service = self._frontend_fixed + self._frontend_per_token * req.prompt_tokens
            ready = max(self.env.now, self._frontend_free) + service
            self._frontend_free = ready
            self.env.process(self._deliver_at(req, ready + self._frontend_latency))
        else:
            self._route(req)

    def _deliver_at(self, req: Request, when: float):
        yield self.env.timeout(when - self.env.now)
        self._route(req)

    def _route(self, req: Request) -> None:
        self.replicas[self.router.choose(self.replicas)].submit(req)

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
            # After a rejection the client's next send goes through the event queue, so a
            # run of rejections cannot recurse.
            self._next_send(req.client, first=False, defer=req.status == "rejected")

    def _next_send(self, client: int, *, first: bool, defer: bool = False) -> None:
        """Client `client` sends its next request, after its think time if any."""
        wl = self.workload
        i = self._next_index
        if i >= len(wl.prompt_tokens) or (wl.duration_s is not None and self.env.now >= wl.duration_s):
            self._wake_all()
            return
        self._next_index += 1
        if wl.think_times is not None:
            delay = float(wl.think_times[i])
        else:
            delay = 0.0 if first else wl.think_time_s
        if delay > 0 or defer:
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
                               client=client))

    def _open_loop(self, wl: OpenLoopWorkload):
        env = self.env
        arrivals = wl.arrival_s.tolist()
        prompts = wl.prompt_tokens.tolist()
        outputs = wl.output_tokens.tolist()
        sessions = wl.session_id.tolist() if wl.session_id is not None else None
        prefixes = wl.prefix_id.tolist() if wl.prefix_id is not None else None
        for i, t in enumerate(arrivals):
            if t > env.now:
                yield env.timeout(t - env.now)
            self._pending_sources = len(arrivals) - i - 1
            req = Request(i, t, prompts[i], outputs[i],
                          sessions[i] if sessions else -1, prefixes[i] if prefixes else -1)
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
        total = self.expected_requests()
        self._tick_every = max(1, total // 100)
        self._tick = env.event()
        itl = ItlSink()
        log = IterationLog(record_iterations)
        self.router = make_router(self.scenario.router)
        cm = self.scenario.cost_model
        self._frontend_fixed = cm.frontend_ms_per_request * 1e-3
        self._frontend_per_token = cm.frontend_us_per_token * 1e-6
        self._frontend_free = 0.0
        self._frontend_latency = cm.frontend_latency_ms * 1e-3
        self.replicas = self._build_engines(env, itl, log)
        wl = self.workload
        if isinstance(wl, OpenLoopWorkload):
            self._pending_sources = len(wl.arrival_s)
            env.process(self._open_loop(wl))
        else:
            self._pending_sources = 0
            for c in range(wl.concurrency):
                self._next_send(c, first=True)
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
                req.reject_reason = "never scheduled: still queued when nothing else could happen (deadlock)"
        wall = time.perf_counter() - t0
        return self._result(itl, log, wall)

    def _result(self, itl: ItlSink, log: IterationLog, wall: float) -> SimulationResult:
        sc = self.scenario
        req_df = requests_frame(self.requests)
        it_df = log.frame()
        slo = sc.slo.model_dump()
        summary: dict = {"scenario": self.loaded.name}
        summary.update(summarize(req_df, itl, slo))
        peak = max(e.scheduler.kv.peak_used / e.scheduler.kv.total
                   for rep in self.replicas for e in rep.engines)
        if len(it_df):
            w = it_df["duration_ms"].to_numpy()
            util = it_df["kv_blocks_used"].to_numpy() / np.maximum(it_df["kv_blocks_total"].to_numpy(), 1)
            mean_util = float((util * w).sum() / w.sum()) if w.sum() > 0 else 0.0
        else:
            mean_util = 0.0
        gpus = sc.parallelism.tp * sc.parallelism.pp * sc.parallelism.replicas
        price = sc.hardware.cost_per_gpu_hour if sc.hardware.cost_per_gpu_hour is not None else self.gpu.cost_per_gpu_hour
        out_tps = summary["throughput"]["output_tokens_per_s"]
        summary["kv_cache"] = {
            "capacity_tokens": self.memory.capacity_tokens,
            "total_capacity_tokens": self.memory.capacity_tokens * sc.parallelism.replicas,
            "block_size": self.memory.block_size,
            "blocks_per_replica": self.memory.num_blocks,
            "peak_utilization": peak,
            "mean_utilization": mean_util,
        }
        summary["memory_gib"] = {
            "gpu": self.memory.gpu_memory_gib,
            "weights": self.memory.weights_gib,
            "activations": self.memory.activation_gib,
            "runtime": self.memory.runtime_gib,
            "kv_cache": self.memory.kv_gib,
        }
        summary["cost"] = {
            "gpus": gpus,
            "usd_per_hour": gpus * price,
            "usd_per_million_output_tokens": (gpus * price / 3600 / out_tps * 1e6) if out_tps > 0 else None,
        }
        summary["config"] = {
            "model": self.model.name,
            "gpu": self.gpu.name,
            "tp": sc.parallelism.tp,
            "pp": sc.parallelism.pp,
            "replicas": sc.parallelism.replicas,
            "scheduler": sc.scheduler.policy,
            "max_num_batched_tokens": self.token_budget,
            "max_num_seqs": self.max_num_seqs,
            "max_model_len": self.max_model_len,
            "cost_backend": sc.cost_model.backend,
            "seed": sc.workload.seed,
        }
        summary["iterations"] = log.count
        summary["servesim_version"] = __version__
        summary["sim_wall_s"] = wall
        return SimulationResult(summary, req_df, it_df, self.memory, self.loaded)

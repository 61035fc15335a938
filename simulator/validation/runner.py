"""Re-simulates measured runs under the base scenario and scores the predictions."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.config import load_scenario
from simulator.errors import (
    DoesNotFitError,
    ExpertSplitError,
    KVBelowMaxModelLenError,
    ServesimError,
)
from simulator.simulation import Simulation, resolve_model
from simulator.validation.measurement import MeasuredRun, MeasuredSet
from simulator.workload import ClosedLoopWorkload, OpenLoopWorkload
from simulator.workload.arrivals import gamma_gaps
from simulator.workload.generate import SharedPrefixes

METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass
class RunPrediction:
    run: MeasuredRun
    predicted: dict[str, float]
    requests: pd.DataFrame  # simulated per-request frame, in the measured order when replayed
    summary: dict
    error: str | None = None
    note: str | None = None  # how the run was simulated, where that differs from its overrides
    # The measured means over the requests the simulated server completed, where it refused
    # some that were measured (else None: the run's own means stand).
    measured: dict[str, float] | None = None

    @classmethod
    def failed(cls, run: MeasuredRun, error: str) -> RunPrediction:
        """A run that could not be simulated, with the reason."""
        return cls(run, {}, pd.DataFrame(), {}, error=error)


def _replay_workload(run: MeasuredRun, seed: int) -> OpenLoopWorkload | ClosedLoopWorkload | None:
    req = run.requests
    if req is None:
        return None
    prompts = req["prompt_tokens"].to_numpy(dtype=np.int64)
    outputs = np.maximum(req["output_tokens"].to_numpy(dtype=np.int64), 1)
    if run.kind == "trace":
        arrival = req["arrival_s"].to_numpy(dtype=float)
        order = np.argsort(arrival, kind="stable")
        ids = req["prefix_id"].to_numpy(dtype=np.int64)[order] if "prefix_id" in req else None
        shared = (SharedPrefixes(ids, req["prefix_tokens"].to_numpy(dtype=np.int64)[order])
                  if "prefix_tokens" in req else None)
        return OpenLoopWorkload(arrival[order] - arrival[order][0], prompts[order], outputs[order],
                                prefix_id=ids, prefixes=shared)
    n = len(prompts)
    if run.ramp is not None:  # vLLM --ramp-up-strategy: the rate climbs request by request
        arrival = run.ramp.arrival_times(n, None, np.random.default_rng(seed))
    elif run.rate is None or math.isinf(run.rate):
        arrival = np.zeros(n)
    else:
        gaps = gamma_gaps(np.random.default_rng(seed), run.burstiness, run.rate, n)
        arrival = np.concatenate([[0.0], np.cumsum(gaps[1:])])
    if run.kind == "closed_loop":
        # vLLM --max-concurrency: at most N in flight; with a finite --request-rate too,
        # each request also waits for its issue time.
        release = None if run.ramp is None and (run.rate is None or math.isinf(run.rate)) else arrival
        return ClosedLoopWorkload(run.concurrency, 0.0, prompts, outputs, None, release_s=release)
    return OpenLoopWorkload(arrival, prompts, outputs)


# Attention data-parallel sizes tried, smallest first, for a sweep row whose MoE model
# does not fit its tp_size alone (vLLM --data-parallel-size takes powers of two in practice).
INFERRED_DP_SIZES = (2, 4, 8)


def sets_field(overrides: list[str], *keys: str) -> bool:
    """Whether the user's --set assignments name any of `keys`."""
    return any(o.split("=", 1)[0].strip() in keys for o in overrides)


def _longest_request(run: MeasuredRun, workload_config) -> int | None:
    """The longest prompt + output the measured server accepted: the replayed requests',
    or the bounds of the lengths a sweep row is simulated with."""
    if run.requests is not None and len(run.requests):
        req = run.requests
        return int((req["prompt_tokens"] + req["output_tokens"].clip(lower=1)).max())
    bounds = [getattr(d, "max", None) or getattr(d, "value", None)
              for d in (workload_config.prompt_tokens, workload_config.output_tokens)]
    return int(sum(bounds)) if all(isinstance(b, int) for b in bounds) else None


class _Builder:
    """Builds one run's simulation, adjusting max_model_len as the measurement allows.

    The measured server started and served every request, so its max_model_len covered
    the longest request and its KV cache held max_model_len tokens (vLLM refuses to start
    otherwise). Unless the user sets model.max_model_len, a base scenario whose limit is
    shorter than the run's longest request is raised to it, and a default the KV cache
    cannot hold (a model's 256K-10M-token context) is lowered to what the cache holds."""

    def __init__(self, run: MeasuredRun, scenario_path: Path, overrides: list[str]):
        self.scenario_path = scenario_path
        self.assignments = [*run.overrides, *overrides]
        self.loaded = load_scenario(scenario_path, self.assignments)
        self._loaded_for = list(self.assignments)  # what self.loaded was parsed from
        sc = self.loaded.scenario
        self.model = resolve_model(sc, self.loaded.base_dir)
        self.workload = _replay_workload(run, sc.workload.seed)
        self.adjust = not sets_field(overrides, "model", "model.max_model_len")
        self.longest = _longest_request(run, sc.workload)
        self.notes: list[str] = [run.note] if run.note else []  # the reader's approximations first
        limit = sc.model.max_model_len or self.model.max_position_embeddings
        if self.adjust and self.longest and self.longest > limit:
            self.assignments.append(f"model.max_model_len={self.longest}")
            self.notes.append(f"model.max_model_len raised from {limit} to {self.longest}, the run's "
                              "longest request")
        context = self.model.max_position_embeddings
        if self.longest and self.longest > context:
            self.notes.append(f"its longest request ({self.longest:,} tokens) is beyond the model's context "
                              f"({context:,}): vLLM serves it only with RoPE scaling or "
                              "VLLM_ALLOW_LONG_MAX_MODEL_LEN; simulated as if allowed")

    def _simulate(self, assignments: list[str]) -> Simulation:
        # Most runs need no adjustment: reuse the scenario already parsed (a sweep has hundreds).
        loaded = self.loaded if assignments == self._loaded_for else load_scenario(self.scenario_path, assignments)
        return Simulation(loaded, workload=self.workload)

    def build(self, extra: list[str] | None = None) -> Simulation:
        assignments = [*self.assignments, *(extra or [])]
        try:
            return self._simulate(assignments)
        except KVBelowMaxModelLenError as exc:
            if not self.adjust or exc.capacity_tokens < (self.longest or 1):
                raise
            sim = self._simulate([*assignments, f"model.max_model_len={exc.capacity_tokens}"])
            self.notes.append(f"simulated with model.max_model_len={exc.capacity_tokens}: the KV cache "
                              "cannot hold the default, and the measured server ran")
            return sim

    def note(self) -> str | None:
        return "; ".join(self.notes) or None


def _simulation(run: MeasuredRun, scenario_path: Path, overrides: list[str]) -> tuple[Simulation, str | None]:
    """The run's simulation, and a note when a setting had to be inferred (the context
    limit, see _Builder, or the layout).

    A sweep row states only tp_size. When a MoE model does not fit that many GPUs, the
    measurement itself shows the server held it: such rows (aiconfigurator's silicon
    sample has them, for Qwen3-235B on one H200) ran attention data parallelism with the
    experts split over the DP ranks. The smallest DP size that holds the model is taken,
    and said so; nothing else about the row changes."""
    builder = _Builder(run, scenario_path, overrides)
    try:
        return builder.build(), builder.note()
    except ExpertSplitError as exc:
        # The measured server ran, so it split the experts the only way vLLM can.
        if sets_field(overrides, "parallelism", "parallelism.expert_parallel"):
            raise
        builder.assignments.append("parallelism.expert_parallel=true")
        sim = builder.build()
        builder.notes.insert(0, f"simulated with parallelism.expert_parallel=true: {exc.message}")
        return sim, builder.note()
    except DoesNotFitError:
        par = builder.loaded.scenario.parallelism
        if run.infer_dp and not sets_field(overrides, "parallelism", "parallelism.dp") and par.dp == 1 \
                and par.pp == 1 and builder.model.is_moe:
            inferred = _with_smallest_fitting_dp(builder)
            if inferred is not None:
                return inferred
        raise


def _with_smallest_fitting_dp(builder: _Builder) -> tuple[Simulation, str] | None:
    """The simulation with the first of INFERRED_DP_SIZES (within one node) that holds the model."""
    sc = builder.loaded.scenario
    tp = sc.parallelism.tp
    for dp in INFERRED_DP_SIZES:
        if tp * dp > sc.hardware.gpus_per_node:
            return None
        try:
            sim = builder.build([f"parallelism.dp={dp}"])
        except DoesNotFitError:
            continue
        builder.notes.insert(0, f"simulated with parallelism.dp={dp}: tp={tp} alone cannot hold "
                                f"{sim.model.name} (attention data parallelism, the experts over {tp * dp} GPUs)")
        return sim, builder.note()
    return None


def simulate_run(run: MeasuredRun, scenario_path: Path, overrides: list[str],
                 fast_forward: bool = True) -> RunPrediction:
    """`fast_forward=False` steps every decode iteration (benchmarks/fast_forward_check.py)."""
    if run.requests is not None and run.requests.empty:  # the readers refuse these; a caller's own may not
        return RunPrediction.failed(run, f"{run.label}: no successful request to replay\n  fix: pass a run "
                                         "in which requests completed")
    simulation, note = _simulation(run, scenario_path, overrides)
    result = simulation.run(record_iterations=False, fast_forward=fast_forward)
    sim = result.requests
    if run.kind == "trace" and run.requests is not None:
        # Map simulated requests back to the measured row order.
        order = np.argsort(run.requests["arrival_s"].to_numpy(dtype=float), kind="stable")
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        sim = sim.set_index("request_id").loc[back].reset_index()
    if not (sim["status"] == "completed").any():
        return RunPrediction.failed(run, _none_completed(run, sim))
    predicted, measured, refused = _paired_means(run, sim)
    if refused:
        note = "; ".join(filter(None, [note, refused]))
    return RunPrediction(run, predicted, sim, result.summary, note=note, measured=measured)


def _paired_means(run: MeasuredRun, sim: pd.DataFrame) -> tuple[dict[str, float], dict[str, float] | None, str]:
    """Each metric's predicted and measured mean over the same requests.

    Where the run was measured per request, a request counts for a metric only when it
    was measured (a blank cell is a failed request or an unmeasured metric) and completed
    in the simulation; else the run's own means compare with all completed requests.
    Returns the predicted means, the measured ones when the simulated server refused a
    measured request (None otherwise), and a note saying how many it refused.
    """
    done = (sim["status"] == "completed").to_numpy()
    req = run.requests
    paired = req is not None and len(req) == len(sim)
    predicted, measured, refused = {}, {}, 0
    for m in METRICS:
        pred = sim[m].to_numpy(dtype=float)
        meas = req[m].to_numpy(dtype=float) if paired and m in req else None
        if meas is not None and not np.isnan(meas).all():  # an all-blank column: predicted, not scored
            seen = ~np.isnan(meas)
            refused = max(refused, int((seen & ~done).sum()))
            use = seen & done & ~np.isnan(pred)
            if use.any():
                predicted[m] = float(pred[use].mean())
                measured[m] = float(meas[use].mean())
        elif (done & ~np.isnan(pred)).any():
            predicted[m] = float(pred[done & ~np.isnan(pred)].mean())
    if not refused:
        return predicted, None, ""
    first = sim.loc[~done, "reject_reason"].iloc[0]
    return predicted, measured, (f"{refused} measured request(s) rejected by the simulated server (the first: "
                                 f"{first}); both means leave them out")


def _none_completed(run: MeasuredRun, sim: pd.DataFrame) -> str:
    """Why a run has nothing to compare: the simulated server refused every request (the
    first one's reason stands for all), or there was no request to simulate."""
    if sim.empty:
        return f"{run.label}: the simulation ran no request\n  fix: check the run's request count"
    return (f"{run.label}: every simulated request was rejected ({len(sim)}; the first: "
            f"{sim['reject_reason'].iloc[0]})\n  fix: check the base scenario against the "
            "measured server's settings (model.max_model_len, memory), or leave them to validate")


def _predict(run: MeasuredRun, scenario_path: Path, overrides: list[str]) -> RunPrediction:
    """One run's prediction, or the reason it cannot be simulated."""
    if run.error:  # the reader already knows why this one cannot run
        return RunPrediction.failed(run, run.error)
    try:
        return simulate_run(run, scenario_path, overrides)
    except ServesimError as exc:
        # One configuration we cannot simulate (an unknown model, a model that does not
        # fit) is reported and skipped; it does not abort the others.
        return RunPrediction.failed(run, exc.render())


def validate(measured: MeasuredSet, scenario_path: Path, overrides: list[str],
             progress: Callable[[int, int], None] | None = None, workers: int = 1) -> list[RunPrediction]:
    """Predictions in the order of `measured.runs`.

    Runs are independent simulations, each seeded by its scenario, so with `workers` > 1
    they go to a process pool and the results are the same as run one by one.
    """
    runs = measured.runs
    out: list[RunPrediction | None] = [None] * len(runs)
    if workers <= 1 or len(runs) <= 1:
        for i, run in enumerate(runs):
            out[i] = _predict(run, scenario_path, overrides)
            if progress is not None:
                progress(i + 1, len(runs))
        return out
    with ProcessPoolExecutor(max_workers=min(workers, len(runs))) as pool:
        futures = {pool.submit(_predict, run, scenario_path, overrides): i for i, run in enumerate(runs)}
        for n, fut in enumerate(as_completed(futures), start=1):
            i = futures[fut]
            try:
                out[i] = fut.result()
            except Exception as exc:  # a worker died (e.g. out of memory): report, keep going
                out[i] = RunPrediction.failed(runs[i], (
                    f"{runs[i].label}: the worker process failed ({type(exc).__name__}: {exc})\n"
                    "  fix: rerun with fewer --workers (each needs ~1.5 GiB), or -j 1"))
            if progress is not None:
                progress(n, len(runs))
    return out

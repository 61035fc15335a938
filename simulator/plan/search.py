"""One configuration's search: its maximum sustainable request rate under the SLO.

This module holds the worker entry point, `search_config(task) -> record`. It takes and
returns plain JSON-able dicts, so local processes and Ray workers run the same code, and a
record can be appended to the results file as it is.

Method (one replica; every probe uses the same workload seed, so only the arrival times
scale with the rate while the requests stay the same: common random numbers):

1. Saturation: all requests arrive at once; completed/duration is a rough capacity C
   (a little low: the last requests drain with a shrinking batch).
2. Bracket: probe 0.6·C. If it passes, probe 1.2·C (doubling while it passes) for a
   failing upper end; if it fails, probe 0.05·C, and a failure there means the SLO is
   out of reach at any load (max rate 0).
3. Bisect until (hi − lo)/lo <= tolerance. The answer is lo, a rate that passed.

A probe passes when the SLO holds over the measured requests and the run is stable
(`simulator.plan.slo`). Failing probes usually end early: the verdict is decided long
before the last request. A run lasts at least `flight_multiple` × the requests in flight
(Little: rate × mean E2E), else a large batch could absorb the whole run as one burst and
an overloaded rate would look sustainable; bursty arrivals lengthen it by (1 + 1/b)/2
(`burst_factor`).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import replace
from pathlib import Path

import numpy as np

from simulator.config import load_scenario
from simulator.errors import ServesimError
from simulator.plan.config import PlanSLO, SearchSettings
from simulator.plan.slo import EarlyStop, LiveMonitor, evaluate
from simulator.simulation import Simulation
from simulator.workload import ConstantArrival, build_workload

#: Arrival rate of the saturation probe: every request arrives within a millisecond.
SATURATION_RATE = 1e6
FIRST_PROBE = 0.6  # × capacity
UPPER_PROBE = 1.2  # × capacity
FLOOR_PROBE = 0.05  # × capacity: below this, queueing is negligible
MAX_DOUBLINGS = 3

#: Probe metrics kept in the results file (the rest of the verdict's statistics are dropped).
_KEEP = ("ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p99_ms", "e2e_p99_ms", "attainment")


def burst_factor(arrival) -> float:
    """How many times longer than a Poisson probe a probe of these arrivals must run.

    A queue's fluctuations, and the time it takes to forget them, grow with the arrivals'
    squared coefficient of variation Ca² (Kingman: the wait scales with (Ca² + Cs²)/2):
    for gamma gaps of shape b, Ca² = 1/b. A bursty stream's thirds hold only a few bursts
    at a Poisson probe's length, and one burst in the last third reads as a growing queue
    (the stability test). Smoother streams keep the Poisson length."""
    b = getattr(arrival, "burstiness", 1.0)
    return max(1.0, (1.0 + 1.0 / b) / 2.0)


def search_config(task: dict) -> dict:
    """Worker entry point. Never raises: a failure becomes a record with its error."""
    t0 = time.perf_counter()
    rec = {"key": task["key"], "label": task["label"], "params": task["params"]}
    try:
        rec.update(_search(task))
    except Exception as exc:
        tb = traceback.format_exc(limit=6)
        rec.update(status="error", reason=f"{type(exc).__name__}: {exc}", traceback=tb)
    rec["wall_s"] = time.perf_counter() - t0
    return rec


def _search(task: dict) -> dict:
    slo = PlanSLO.model_validate(task["slo"])
    s = SearchSettings.model_validate(task["search"])
    loaded = replace(load_scenario(data=task["scenario"]), base_dir=Path(task["base_dir"]))
    base_dir = loaded.base_dir
    try:
        sim = Simulation(loaded)  # memory plan, parallelism and dtype checks
    except ServesimError as exc:  # the message and fix apart, so the terminal can group them
        return {"status": "infeasible", "reason": exc.render(), "message": exc.message.splitlines()[0],
                "fix": exc.fix}
    main = sim.batch_pool
    gpu = main.gpu
    gpr = sum(p.gpus for p in sim.pools.values())  # one replica, or both pools of one unit
    mem = sim.memory
    info = {
        "gpus_per_replica": gpr,
        # Pools on different GPUs: the unit's $/h spread over its GPUs, so GPUs x this is its cost.
        "usd_per_gpu_hour": sum(p.gpus * p.price for p in sim.pools.values()) / gpr,
        "max_num_batched_tokens": sim.token_budget,  # the decode pool's, when disaggregated
        "prefill_max_num_batched_tokens": sim.pools["prefill"].token_budget if "prefill" in sim.pools else None,
        "max_num_seqs": sim.max_num_seqs,
        # One replica's (or decode instance's) cache: every attention-DP rank holds its own.
        "kv_capacity_tokens": mem.capacity_tokens * main.dp,
        "memory_gib": {"gpu": mem.gpu_memory_gib, "weights": mem.weights_gib,
                       "activations": mem.activation_gib, "runtime": mem.runtime_gib, "kv_cache": mem.kv_gib},
        # Roofline floor of one decode step: every GPU reads from HBM the weights one token
        # passes through (its whole shard for a dense model; for MoE, a token's experts only).
        "decode_floor_ms": mem.weights_read_per_token_gib * 2**30 / (gpu.hbm_tbps * 1e12) * 1e3,
        "mean_prompt_tokens": float(np.mean(sim.workload.prompt_tokens)),
        "mean_output_tokens": float(np.mean(sim.workload.output_tokens)),
    }
    wcfg = loaded.scenario.workload
    probes: list[dict] = []
    sims = [0]

    def simulate(rate: float, n: int, early_stop: bool = s.early_stop) -> dict:
        arrival = wcfg.arrival.model_copy(update={"rate": rate})
        wl = build_workload(wcfg.model_copy(update={"arrival": arrival, "num_requests": n}), base_dir)
        sim = Simulation(loaded, workload=wl)
        warmup_n = int(np.ceil(s.warmup_fraction * n))
        monitor = LiveMonitor(sim, slo, warmup_n, s, burst) if early_stop else None
        t = time.perf_counter()
        sims[0] += 1
        try:
            res = sim.run(record_iterations=False, progress=monitor)
        except EarlyStop as stop:
            p = {"rate": rate, "requests": n, "passed": False, "reason": stop.reason, "early_stop": True,
                 **stop.metrics}
        else:
            v = evaluate(res.requests, slo, warmup_n, s)
            e2e = v.metrics.get("e2e_completed_mean_ms")
            p = {"rate": rate, "requests": n, "passed": v.passed, "reason": v.reason, "early_stop": False,
                 **{k: v.metrics.get(k) for k in _KEEP}, "e2e_mean_ms": e2e,
                 "in_flight": rate * e2e / 1000 if e2e is not None else None,
                 "throughput_rps": res.summary["throughput"]["requests_per_s"]}
        p["wall_s"] = time.perf_counter() - t
        return p

    burst = burst_factor(wcfg.arrival)

    def needed(in_flight: float | None) -> int:
        floor = s.requests_per_point * burst
        if in_flight is None:
            return int(min(s.max_requests_per_point, np.ceil(floor)))
        return int(min(s.max_requests_per_point, np.ceil(max(floor, s.flight_multiple * in_flight * burst))))

    def run_at(rate: float) -> dict:
        """A probe long enough to see steady state: at least flight_multiple × the requests
        in flight, estimated from the nearest probe run so far (E2E grows with the rate),
        and re-run longer when a pass turns out to have had more in flight than planned."""
        known = [q for q in probes if q.get("e2e_mean_ms") is not None]
        est = None
        if known:
            near = min(known, key=lambda q: (q["rate"] > rate, abs(q["rate"] - rate)))
            est = rate * near["e2e_mean_ms"] / 1000
        n = needed(est)
        p = simulate(rate, n)
        if p["passed"] and needed(p["in_flight"]) > n:
            p = simulate(rate, needed((p["in_flight"] or 0) * 1.25))
        probes.append(p)
        return p

    # 1. capacity: everything at once
    t = time.perf_counter()
    sat_wl = build_workload(wcfg.model_copy(update={"arrival": ConstantArrival(rate=SATURATION_RATE)}), base_dir)
    sat = Simulation(loaded, workload=sat_wl).run(record_iterations=False)
    cap = sat.summary["throughput"]["requests_per_s"]
    info["saturation_rps"] = cap
    info["saturation_wall_s"] = time.perf_counter() - t
    if cap <= 0:
        reasons = sat.requests["reject_reason"].value_counts()
        why = reasons.index[0] if len(reasons) else "no request completed"
        return {"status": "infeasible", "reason": f"cannot serve this workload: {why}", **info}

    # 2. bracket
    lo, hi = 0.0, None
    lo_probe = None
    p = run_at(FIRST_PROBE * cap)
    if p["passed"]:
        lo, lo_probe = p["rate"], p
        r = UPPER_PROBE * cap
        for _ in range(MAX_DOUBLINGS + 1):
            p = run_at(r)
            if not p["passed"]:
                hi = r
                break
            lo, lo_probe = r, p
            r *= 2
    else:
        hi = p["rate"]
        p = run_at(FLOOR_PROBE * cap)
        if not p["passed"] and p["early_stop"]:  # run it out: what it reaches is the fix to offer
            probes[-1] = p = simulate(p["rate"], p["requests"], early_stop=False)
        if not p["passed"]:
            return {"status": "ok", "max_rate": 0.0, "bracket": [0.0, p["rate"]],
                    "reason": f"SLO not met even at {p['rate']:.3g} req/s ({p['reason']})",
                    "at_max": None, "probes": sorted(probes, key=lambda q: q["rate"]), "sims": sims[0] + 1,
                    **info}
        lo, lo_probe = p["rate"], p

    # 3. bisect
    while hi is not None and hi - lo > s.tolerance * lo and len(probes) < s.max_probes:
        p = run_at((lo + hi) / 2)
        if p["passed"]:
            lo, lo_probe = p["rate"], p
        else:
            hi = p["rate"]
    first_fail = min((q for q in probes if not q["passed"] and q["rate"] > lo), key=lambda q: q["rate"], default=None)
    return {"status": "ok", "max_rate": lo, "bracket": [lo, hi],
            "limited_by": first_fail["reason"] if first_fail else "search range",
            "at_max": lo_probe, "probes": sorted(probes, key=lambda q: q["rate"]),
            "sims": sims[0] + 1, **info}

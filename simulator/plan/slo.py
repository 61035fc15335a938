"""Judging one simulated rate against the plan's SLO, after the run or while it runs.

`evaluate` reads a finished run's requests frame. `LiveMonitor` watches a run in progress
(through `Simulation.run`'s progress callback) and stops it as soon as the verdict can
no longer change: enough measured requests already violate a limit, counting a request
still in flight by a lower bound of its latency (its age). That is exact, not a guess,
so early stopping never changes a verdict; it only saves the rest of an overloaded run.

Semantics: the first `warmup_fraction` of requests (by arrival) are left out (the system
starts empty). Rejected requests count as infinitely slow, so they fail every limit;
single-token requests have no TPOT and are left out of TPOT statistics (as vLLM does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulator.formatting import percent
from simulator.plan.config import PlanSLO, SearchSettings

#: Stand-in for "never" (rejected) latencies, so numpy's linear percentile stays finite.
_NEVER = 1e18
#: Fewer completed measured requests than this: too few for the stability test.
_MIN_FOR_STABILITY = 30

_LABEL = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}


@dataclass
class Verdict:
    passed: bool
    reason: str = ""
    metrics: dict = field(default_factory=dict)


def _stat(values: np.ndarray, stat: str) -> float:
    if values.size == 0:
        return math.nan
    v = float(values.mean()) if stat == "mean" else float(np.percentile(values, float(stat[1:])))
    return math.inf if v >= _NEVER / 10 else v


def _latencies(m: pd.DataFrame) -> dict[str, np.ndarray]:
    done = (m["status"] == "completed").to_numpy()
    out = {k: np.where(done, m[k].to_numpy(dtype=float), _NEVER) for k in ("ttft_ms", "e2e_ms")}
    multi = (m["output_tokens"] > 1).to_numpy()
    out["tpot_ms"] = np.where(done, m["tpot_ms"].to_numpy(dtype=float), _NEVER)[multi]
    return out


def _finite(v: float) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def evaluate(requests: pd.DataFrame, slo: PlanSLO, warmup_n: int, s: SearchSettings) -> Verdict:
    """Pass/fail of a finished run, the first failed criterion, and the measured statistics."""
    m = requests[requests["request_id"] >= warmup_n]
    if len(m) == 0:
        return Verdict(False, "no measured requests (the run is shorter than its warm-up)")
    lat = _latencies(m)
    metrics: dict = {"measured": len(m), "rejected": int((m["status"] != "completed").sum())}
    for key, vals in lat.items():
        for stat in ("mean", "p50", "p90", "p99"):
            metrics[f"{key.removesuffix('_ms')}_{stat}_ms"] = _finite(_stat(vals, stat))
    failures = []
    if metrics["rejected"] == len(m):
        reasons = m["reject_reason"].value_counts()
        failures.append(f"every request rejected ({reasons.index[0] if len(reasons) else 'unknown'})")
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        lim = getattr(slo, key)
        if lim is None:
            continue
        for stat, limit in lim.limits().items():
            v = _stat(lat[key], stat)
            if math.isnan(v):  # no sample: every request has a single output token (no TPOT)
                continue
            if v > limit:
                failures.append(f"{stat} {_LABEL[key]} {_show(v)} > {limit:g} ms")
    if slo.attainment is not None:
        a = slo.attainment
        done = (m["status"] == "completed").to_numpy()
        meets = done.copy()
        for key, limit in a.limits().items():
            vals = m[key].to_numpy(dtype=float)
            meets &= np.where(np.isnan(vals), key == "tpot_ms", vals <= limit)
        frac = float(meets.mean())
        metrics["attainment"] = frac
        if frac < a.min_fraction:
            failures.append(f"attainment {percent(frac, apart_from=a.min_fraction)} < {percent(a.min_fraction)}")
    done = m[m["status"] == "completed"]
    metrics["e2e_completed_mean_ms"] = float(done["e2e_ms"].mean()) if len(done) else None
    stable, why = stability(m, s)
    metrics["stable"] = stable
    if not stable:
        failures.append(why)
    return Verdict(not failures, "; ".join(failures), metrics)


def stability(m: pd.DataFrame, s: SearchSettings) -> tuple[bool, str]:
    """The queue and the batch must not grow without bound. Compare the median TTFT (the
    queue) and the median TPOT (the batch) of the last third of the measured requests, by
    arrival, with the middle third's. In overload TTFT grows linearly with arrival time (a
    ratio near 1.5 between those thirds) or the batch, hence TPOT, keeps growing; in a
    stable run both are flat. Runs last several times the requests in flight, so the
    thirds are past the ramp-up."""
    done = m[m["status"] == "completed"].sort_values("arrival_s")
    n = len(done)
    if n < _MIN_FOR_STABILITY:
        return True, ""
    for key, label, slack in (("ttft_ms", "TTFT (the queue grows)", s.stability_slack_ms),
                              ("tpot_ms", "TPOT (the batch grows)", s.stability_slack_ms / 20)):
        vals = done[key].to_numpy(dtype=float)
        mid, last = vals[n // 3: 2 * n // 3], vals[2 * n // 3:]
        mid, last = mid[~np.isnan(mid)], last[~np.isnan(last)]
        if mid.size < _MIN_FOR_STABILITY // 3 or last.size < _MIN_FOR_STABILITY // 3:
            continue
        a, b = float(np.median(mid)), float(np.median(last))
        if b > s.stability_growth * a + slack:
            return False, (f"unstable: median {label} {b:,.1f} ms in the last third of the run vs "
                           f"{a:,.1f} ms in the middle third")
    return True, ""


def _show(v: float) -> str:
    return "∞ (rejected requests)" if math.isinf(v) else f"{v:,.1f} ms"


class EarlyStop(Exception):
    """Raised from the progress callback: the run's verdict is already decided."""

    def __init__(self, reason: str, metrics: dict):
        super().__init__(reason)
        self.reason = reason
        self.metrics = metrics


class LiveMonitor:
    """A `progress` callback for `Simulation.run` that stops a run whose verdict is decided.

    Decided-fail for a percentile p over a sample of n: once at least n − floor((n−1)·p/100)
    values are above the limit, numpy's linear percentile is above it too. Latencies of
    requests in flight are bounded below by their age (TTFT, E2E) or by
    (now − first token)/(output − 1) (TPOT). A run-away waiting queue (more than
    `queue_factor` × max_num_seqs, at least 16, × the arrivals' burst factor, since a
    stable queue's excursions grow with it too) is also a stop: clear overload.
    """

    def __init__(self, sim, slo: PlanSLO, warmup_n: int, s: SearchSettings, burst: float = 1.0):
        self.sim = sim
        self.warmup_n = warmup_n
        outputs = np.asarray(sim.workload.output_tokens)[warmup_n:]
        n = int(outputs.size)
        n_tpot = int((outputs > 1).sum())
        # (metric, limit, violations that decide a fail, set of violating request ids)
        self.criteria: list[tuple[str, float, int, set, str]] = []
        for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
            lim = getattr(slo, key)
            if lim is None:
                continue
            size = n_tpot if key == "tpot_ms" else n
            for stat, limit in lim.limits().items():
                if stat == "mean" or size == 0:
                    continue
                p = float(stat[1:])
                need = size - math.floor((size - 1) * p / 100)
                self.criteria.append((key, limit, need, set(), f"{stat} {_LABEL[key]} > {limit:g} ms"))
        self.attain = None
        if slo.attainment is not None and n:
            a = slo.attainment
            need = math.floor(n * (1 - a.min_fraction) + 1e-9) + 1
            self.attain = (a.limits(), need, set(), f"attainment < {a.min_fraction:.1%}")
        self.queue_limit = max(16, s.queue_factor * sim.max_num_seqs * burst)
        self.open: list = []
        self.seen = 0

    def __call__(self, done: int, total: int) -> None:
        sim = self.sim
        now = sim.env.now
        reqs = sim.requests
        for r in reqs[self.seen:]:
            if r.id >= self.warmup_n:
                self.open.append(r)
        self.seen = len(reqs)
        still = []
        for r in self.open:
            final = r.status in ("finished", "rejected")
            lb = self._bounds(r, now, final)
            for key, limit, _need, bad, _ in self.criteria:
                v = lb.get(key)
                if v is not None and v > limit:
                    bad.add(r.id)
            if self.attain is not None:
                limits, _need, bad, _ = self.attain
                if any((v := lb.get(k)) is not None and v > lim for k, lim in limits.items()):
                    bad.add(r.id)
            if not final:
                still.append(r)
        self.open = still
        for _key, _limit, need, bad, text in self.criteria:
            if len(bad) >= need:
                raise EarlyStop(f"early stop: {text} already decided ({len(bad)} measured "
                                f"requests over the limit at t = {now:,.1f} s)", self.snapshot())
        if self.attain is not None and len(self.attain[2]) >= self.attain[1]:
            raise EarlyStop(f"early stop: {self.attain[3]} already decided ({len(self.attain[2])} "
                            f"measured requests miss the SLO at t = {now:,.1f} s)", self.snapshot())
        waiting = sum(e.scheduler.queued for rep in sim.replicas for e in rep.engines)
        if waiting > self.queue_limit:
            raise EarlyStop(f"early stop: overload ({waiting} requests waiting > "
                            f"{self.queue_limit:g} at t = {now:,.1f} s)", self.snapshot())

    @staticmethod
    def _bounds(r, now: float, final: bool) -> dict[str, float | None]:
        """Exact latencies of a settled request, lower bounds (ms) of one in flight."""
        if r.status == "rejected":
            return {"ttft_ms": math.inf, "e2e_ms": math.inf,
                    "tpot_ms": math.inf if r.output_tokens > 1 else None}
        ftt = r.first_token_time
        ttft = (now if math.isnan(ftt) else ftt) - r.arrival
        end = r.finish_time if final else now
        tpot = None
        if r.output_tokens > 1 and not math.isnan(ftt):
            tpot = (end - ftt) / (r.output_tokens - 1) * 1e3
        return {"ttft_ms": ttft * 1e3, "e2e_ms": (end - r.arrival) * 1e3, "tpot_ms": tpot}

    def snapshot(self) -> dict:
        return {"dispatched": self.seen, "stopped_at_s": self.sim.env.now}

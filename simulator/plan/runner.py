"""Orchestrates a plan: search every configuration, stream results, rank, verify, report.

The output folder is filled as the sweep goes: `results.jsonl` gets one line per finished
configuration (flushed and fsynced), so an interrupted sweep loses only the searches in
flight and `--resume` skips every configuration already in the file. A record is reused
only if its key (a hash of the configuration's scenario, the SLO and the search
settings) still matches, so editing the plan and resuming recomputes exactly what changed.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from simulator.config import load_scenario
from simulator.errors import ServesimError
from simulator.output import OWN_FIGURES, check_creatable, folder_name, make_dirs, write_outputs
from simulator.plan.analysis import allowed_replicas, derive, fewer_replicas, sort_key, within_caps
from simulator.plan.config import LoadedPlan, gpus_per_replica
from simulator.plan.executor import check_executor, run_tasks
from simulator.plan.search import burst_factor
from simulator.plan.slo import evaluate
from simulator.simulation import Simulation

RESULTS = "results.jsonl"
RECOMMENDED = "recommended"
#: Files and folders a plan writes; a folder holding anything else is not ours to write into.
OWN = {RESULTS, "plan.yaml", "plan.csv", "plan.json", "plan.html", RECOMMENDED}


@dataclass
class PlanOutcome:
    out_dir: Path
    rows: list[dict]
    records: dict[str, dict]
    reused: int
    searched: int
    wall_s: float
    recommendation: dict | None = None
    runner_up: dict | None = None
    verification: list[dict] = field(default_factory=list)
    #: Told before each whole-deployment run (the verification and refinement take minutes on big plans).
    on_check: Callable[[str], None] | None = None

    def checking(self, row: dict, rate: float, why: str) -> None:
        if self.on_check is not None:
            self.on_check(f"checking {row['label']} × {row['replicas']} at {rate:.3g} req/s ({why})")


def default_output_dir(name: str) -> Path:
    """reports/plan-<name>-<timestamp>, the name made safe as a run's is."""
    return Path("reports") / f"plan-{folder_name(name)}-{time.strftime('%Y%m%d-%H%M%S')}"


def latest_output_dir(name: str) -> Path | None:
    """The newest reports/plan-<name>-* folder with results (what a bare --resume continues)."""
    found = sorted(p for p in Path("reports").glob(f"plan-{folder_name(name)}-*") if (p / RESULTS).is_file())
    return found[-1] if found else None


def prepare_output_dir(out: Path, resume: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ServesimError("the output path exists and is a file", where=str(out),
                            fix="pass a folder path to --output-dir")
    if out.is_dir():
        foreign = [p.name for p in out.iterdir() if p.name not in OWN and not OWN_FIGURES.fullmatch(p.name)
                   and not p.name.startswith(".")]
        if foreign:
            raise ServesimError(f"the output folder holds files a plan did not write ({', '.join(sorted(foreign)[:5])})",
                                where=str(out), fix="choose a new or empty folder for --output-dir")
        if (out / RESULTS).exists() and not resume:
            raise ServesimError("the output folder holds a previous sweep", where=str(out),
                                fix="add --resume to continue it, or choose a new folder for --output-dir")
    else:
        check_creatable(out)
    make_dirs(out)


def read_results(path: Path) -> dict[str, dict]:
    """Records by key; the last record of a key wins. A torn last line (a kill mid-write)
    is ignored."""
    out: dict[str, dict] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "key" in rec:
            out[rec["key"]] = rec
    return out


def clean(obj):
    """Strict JSON: NaN and infinities become null."""
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, np.generic):
        return clean(obj.item())
    return obj


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def run_plan(loaded: LoadedPlan, out_dir: Path | None = None, *, executor: str = "local",
             workers: int | None = None, address: str | None = None, resume: bool = False,
             on_start: Callable[[int, int], None] | None = None,
             on_result: Callable[[dict], None] | None = None,
             on_check: Callable[[str], None] | None = None) -> PlanOutcome:
    """Search, rank, verify and write the plan's output folder; returns the outcome."""
    t0 = time.perf_counter()
    check_executor(executor, address)
    if out_dir is None and resume:
        out_dir = latest_output_dir(loaded.name)
        if out_dir is None:
            raise ServesimError(f"nothing to resume: no reports/plan-{loaded.name}-*/{RESULTS}",
                                where="--resume", fix="pass the sweep's folder with --output-dir")
    out = Path(out_dir) if out_dir is not None else default_output_dir(loaded.name)
    prepare_output_dir(out, resume)
    write_atomic(out / "plan.yaml", loaded.text)

    keys = {p.key for p in loaded.points}
    previous = read_results(out / RESULTS) if resume else {}
    # Errors are retried (a worker may have died); searches and infeasible verdicts are kept.
    records = {k: r for k, r in previous.items() if k in keys and r.get("status") in ("ok", "infeasible")}
    tasks = [p.task(loaded) for p in loaded.points if p.key not in records]
    if on_start is not None:
        on_start(len(loaded.points), len(records))

    with open(out / RESULTS, "a+", encoding="utf-8") as sink:
        if sink.tell() > 0:
            sink.seek(sink.tell() - 1)
            if sink.read(1) != "\n":
                sink.write("\n")  # end a line torn by a kill, so the next record starts clean
        def collect(rec: dict) -> None:
            records[rec["key"]] = rec
            sink.write(json.dumps(clean(rec)) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            if on_result is not None:
                on_result(rec)

        run_tasks(tasks, executor=executor, workers=workers, address=address, on_result=collect)

    rows = derive(loaded, records)
    outcome = PlanOutcome(out, rows, records, reused=len(keys) - len(tasks), searched=len(tasks),
                          wall_s=0.0, on_check=on_check)
    result = None
    if loaded.plan.search.verify:
        result = verify(loaded, outcome)
    ranked = [r for r in outcome.rows if r["rank"] is not None]
    outcome.recommendation = ranked[0] if ranked else None
    outcome.runner_up = ranked[1] if len(ranked) > 1 else None
    rec_dir = out / RECOMMENDED
    if result is not None:
        write_outputs(result, rec_dir)
    elif rec_dir.exists():
        import shutil

        shutil.rmtree(rec_dir)  # a report from an earlier run would mislead
    outcome.wall_s = time.perf_counter() - t0
    from simulator.plan.report import write_plan_outputs

    write_plan_outputs(loaded, outcome, has_report=result is not None)
    return outcome


# -- verification ------------------------------------------------------------------------------
def deployment_scenario(loaded: LoadedPlan, row: dict, rate: float, requests: int) -> dict:
    """The full deployment (all replicas) at `rate`, as a scenario dict."""
    point = next(p for p in loaded.points if p.key == row["key"])
    d = json.loads(json.dumps(point.scenario))
    if "disaggregation" in d:  # N units: N × each pool's instances behind the one router
        for role in ("prefill", "decode"):
            d["disaggregation"][role]["replicas"] *= row["replicas"]
    else:
        d["parallelism"]["replicas"] = row["replicas"]
    d["workload"]["arrival"]["rate"] = rate
    d["workload"]["num_requests"] = requests
    d["name"] = f"{loaded.name}-recommended"
    unit = "unit" if "disaggregation" in d else "replica"
    d["description"] = (f"{loaded.name}: recommended deployment, {row['label']}, {row['replicas']} "
                        f"{unit}{'s' if row['replicas'] > 1 else ''}")
    return d


def simulate_deployment(loaded: LoadedPlan, row: dict, rate: float):
    s = loaded.plan.search
    # Long enough for every replica, and for flight_multiple × the requests in flight.
    in_flight = rate * (row.get("_e2e_mean_ms") or 0) / 1000
    burst = burst_factor(loaded.base.scenario.workload.arrival)
    n = s.verify_requests or int(min(20000, burst * max(2000, s.requests_per_point * row["replicas"],
                                                         s.flight_multiple * in_flight)))
    d = deployment_scenario(loaded, row, rate, n)
    sc = replace(load_scenario(data=d), base_dir=loaded.base.base_dir)
    result = Simulation(sc).run()
    warmup_n = int(np.ceil(s.warmup_fraction * n))
    return result, evaluate(result.requests, loaded.plan.slo, warmup_n, s)


def verify(loaded: LoadedPlan, outcome: PlanOutcome):
    """Re-simulate the top deployment with all its replicas at the target (or, for a budget,
    at the rate it claims). On a miss, add a replica (rate target) or lower the claimed
    rate by the tolerance (budget target), at most max_verify_bumps times, then re-rank;
    a deployment that still misses drops out. Returns the passing run, or None.

    It goes down the ranking until one passes or none is left (each drops out after
    max_verify_bumps + 1 misses, so this ends): stopping after a fixed number of misses
    left the next row recommended unverified, and where the search's premise fails (a
    static batcher's latency falls as load rises), that row misses as well."""
    plan = loaded.plan
    mode = plan.target.mode
    rows = outcome.rows
    bumps: dict[str, int] = {}
    while True:
        ranked = [r for r in rows if r["rank"] is not None]
        if not ranked:
            return None
        top = ranked[0]
        rate = top["carried_rps"]
        result, verdict, step = _check(loaded, outcome, top, rate, "the ranking's top")
        if verdict.passed:
            _mark_verified(top, step, result)
            return refine(loaded, outcome, top, result)
        n = bumps[top["key"]] = bumps.get(top["key"], 0) + 1
        if n > plan.search.max_verify_bumps:
            top.update(rank=None, meets_target=False, reason=f"failed verification at {rate:.3g} req/s: {verdict.reason}")
        else:
            if mode == "rate":
                more = _more(plan, top["replicas"])  # the next count space.replicas allows
                if more is None:
                    top.update(rank=None, meets_target=False, reason=f"failed verification at {rate:.3g} req/s "
                               f"({verdict.reason}); space.replicas allows no more replicas")
                    more = top["replicas"]
                top["replicas"] = more
                _reprice(top, plan.target.rate)
            else:
                _reprice(top, rate * (1 - plan.search.tolerance))
            if top["rank"] is not None and not within_caps(plan, top):
                top.update(rank=None, meets_target=False,
                           reason=f"failed verification at {rate:.3g} req/s ({verdict.reason}); "
                           "one more replica is over the budget cap")
        ranked = sorted((r for r in rows if r["rank"] is not None), key=sort_key(mode))
        for i, r in enumerate(ranked, 1):
            r["rank"] = i
        rows.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0))


def _mark_verified(row: dict, step: dict, result) -> None:
    row["verified"] = True
    row["verified_ttft_p99_ms"] = step["ttft_p99_ms"]
    row["verified_tpot_p99_ms"] = step["tpot_p99_ms"]
    row["verified_usd_per_m_output_tokens"] = result.summary["cost"]["usd_per_million_output_tokens"]


def _check(loaded: LoadedPlan, outcome: PlanOutcome, row: dict, rate: float, why: str):
    """One whole-deployment run after the sweep (verification or refinement), announced and logged."""
    outcome.checking(row, rate, why)
    result, verdict = simulate_deployment(loaded, row, rate)
    step = {"label": row["label"], "replicas": row["replicas"], "rate": rate, "check": why,
            "passed": verdict.passed, "reason": verdict.reason, "ttft_p99_ms": verdict.metrics.get("ttft_p99_ms"),
            "tpot_p99_ms": verdict.metrics.get("tpot_p99_ms"), "attainment": verdict.metrics.get("attainment")}
    outcome.verification.append(step)
    return result, verdict, step


def refine(loaded: LoadedPlan, outcome: PlanOutcome, best: dict, result):
    """Replicas behind a router pool their traffic, so N of them carry more than N × one
    replica's rate and the derived deployments are conservative (analysis.py). With the
    best one verified, whole-deployment runs (at most `search.max_refine_runs`) test what
    that pooling may buy: for a rate target, fewer replicas (one fewer, then bisected),
    cheapest first, of every deployment that would then cost less than the best; for a budget, a higher rate for the
    best, raised by the tolerance's doubling steps until a miss and bisected; then, highest
    claim first, whether another deployment passes above that rate, and if so how far.
    Returns the run of the deployment recommended at its carried rate."""
    plan = loaded.plan
    runs = plan.search.max_refine_runs
    if plan.target.mode == "rate":
        best, result = _trim(loaded, outcome, best, result, runs)
    else:
        best, result = _raise_all(loaded, outcome, best, result, runs)
    ranked = sorted((r for r in outcome.rows if r["rank"] is not None), key=sort_key(plan.target.mode))
    ranked.remove(best)
    for i, r in enumerate([best, *ranked], 1):  # the verified deployment leads
        r["rank"] = i
    outcome.rows.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0))
    return result


def _more(plan, replicas: int) -> int | None:
    """The next larger replica count the space allows, or None."""
    allowed = allowed_replicas(plan)
    if allowed is None:
        return replicas + 1
    fits = [n for n in allowed if n > replicas]
    return min(fits) if fits else None


def _seen_failing(outcome: PlanOutcome, row: dict, replicas: int, rate: float) -> bool:
    """Whether a run of this deployment at this rate already missed (verification bumps)."""
    return any(not v["passed"] and v["label"] == row["label"] and v["replicas"] == replicas and v["rate"] == rate
               for v in outcome.verification)


def _trim(loaded: LoadedPlan, outcome: PlanOutcome, best: dict, result, runs: int):
    """Fewer replicas for a rate target, cheapest deployment first. Each deployment first
    tries one replica fewer (pooling usually buys one at most); once that passes, its count
    is bisected between its last pass and the largest count known to miss, so one derived
    far above its minimum reaches it within a few runs. With no cheaper trial left, a
    deployment that trimmed would cost the same as the best, and whose probes read a lower
    p99 TTFT, is tried too, and wins the tie if its run's p99 TTFT is lower (the ranking's
    tie-break). A search that runs out of runs while fewer replicas might still pass says
    so (`trim_cut_short`)."""
    plan = loaded.plan
    target = plan.target.rate
    checked = target * (1 + plan.target.headroom)  # a trimmed deployment keeps the headroom
    cost = 1 if checked == target else 2  # and is then run at the target itself, for the report
    failed: set[str] = set()
    steps: dict[str, int] = {}  # 1: try one fewer (a deployment's first trial); 0: bisect
    misses: dict[str, int] = {}  # a deployment's largest count known to miss
    passes: dict[str, int] = {}  # a deployment's smallest count known to pass
    ties_tried: set[str] = set()

    def upper(r: dict) -> int:  # the fewest replicas seen to pass, the trials' ceiling
        return passes.get(r["key"], r["replicas"])

    while True:
        cheaper, ties = [], []
        best_usd = best["usd_per_hour"]
        for r in outcome.rows:
            if r["rank"] is None or r["key"] in failed:
                continue
            n = fewer_replicas(plan, upper(r), steps.get(r["key"], 1), misses.get(r["key"], 0))
            if n is None or _seen_failing(outcome, r, n, checked):
                continue
            usd = n * gpus_per_replica(r) * r["usd_per_gpu_hour"]
            if usd < best_usd * (1 - 1e-9):
                cheaper.append((usd, r["label"], r, n))
            elif (usd <= best_usd * (1 + 1e-9) and r is not best and r["key"] not in ties_tried
                  and _ttft(r) < _ttft(best)):
                ties.append((_ttft(r), r["label"], r, n))
        options = cheaper or ties
        if not options:
            break
        if runs < cost:
            if cheaper:
                best["trim_cut_short"] = True
            break
        _first, _label, row, n = min(options, key=lambda o: o[:2])
        tie = not cheaper
        trial = {**row, "replicas": n}
        runs -= 1
        res, verdict, step = _check(loaded, outcome, trial, checked, "fewer replicas" + (", same cost" if tie else ""))
        steps[row["key"]] = 0
        if not verdict.passed:
            misses[row["key"]] = max(misses.get(row["key"], 0), n)
            if fewer_replicas(plan, upper(row), 0, misses[row["key"]]) is None:
                failed.add(row["key"])
            continue
        passes[row["key"]] = n
        if cost == 2:
            runs -= 1
            res, _verdict, step = _check(loaded, outcome, trial, target, "fewer replicas, at the target")
        if tie:
            ties_tried.add(row["key"])
            if not (step["ttft_p99_ms"] if step["ttft_p99_ms"] is not None else math.inf) < _ttft(best):
                continue  # it carries the target as well, for the same price, but no faster
        row["replicas"] = n
        _reprice(row, target)
        best.pop("trim_cut_short", None)  # the old best keeps its own passing run's figures
        _mark_verified(row, step, res)
        row["ttft_p99_ms"], row["tpot_p99_ms"] = step["ttft_p99_ms"], step["tpot_p99_ms"]  # no probe bounds it now
        best, result = row, res
    return best, result


def _ttft(row: dict) -> float:
    """A deployment's p99 TTFT: its verified run's, else its probes' bound at the target."""
    for column in ("verified_ttft_p99_ms", "ttft_p99_ms"):
        if row.get(column) is not None:
            return row[column]
    return math.inf


def _raise_all(loaded: LoadedPlan, outcome: PlanOutcome, best: dict, result, runs: int):
    """A budget's claim from the whole deployment's own runs (refine's docstring)."""
    plan = loaded.plan
    grow = 1 + plan.search.tolerance
    report = 1 if plan.target.headroom > 0 else 0  # a run kept for the claim less the headroom
    rivals = sorted((r for r in outcome.rows if r["rank"] is not None and r is not best),
                    key=lambda r: (-r["carried_rps"], r["label"]))
    if runs <= report:
        if runs and rivals:
            best["rivals_unchecked"] = len(rivals)
        return best, result
    claim = best["carried_rps"]
    # Runs kept for the rivals' checks: the derived claims underrate many small replicas,
    # which pool their traffic most, so raising the best must not spend them all.
    # (Each check that passes may need a report run of its own too.)
    kept = min(len(rivals), (runs - report) // 2)
    kept += report if kept else 0
    rate, bracketed, res, runs = _raise(loaded, outcome, best, claim, result, runs - report - kept)
    best, result, runs = _settle(loaded, outcome, best, rate, res, bracketed, claim, runs + report + kept)
    # A rival matters only if its whole deployment passes above the best's rate: one run
    # each decides it, most promising (highest claim) first.
    for i, row in enumerate(rivals):
        if runs <= report:
            best["rivals_unchecked"] = len(rivals) - i
            break
        runs -= 1
        start = rate * grow
        res, verdict, _step = _check(loaded, outcome, row, start, "beating the best")
        if not verdict.passed:  # it misses where the best passed: it cannot claim more
            if row["carried_rps"] > best["carried_rps"]:
                _reprice(row, best["carried_rps"])
            continue
        top, bracketed, res, runs = _raise(loaded, outcome, row, start, res, runs - report)
        # Its first check passed at `start`; with no miss above, its claim is at least that
        # less the headroom, as the best's derived claim is. Claims compare less the headroom.
        floor = start / (1 + plan.target.headroom)
        if max(top / (1 + plan.target.headroom), 0.0 if bracketed else floor) <= best["carried_rps"]:
            if row["carried_rps"] > best["carried_rps"]:
                _reprice(row, best["carried_rps"])
            runs += report
            continue
        rate = top  # the old best keeps its own passing run's figures
        best, result, runs = _settle(loaded, outcome, row, rate, res, bracketed, floor, runs + report)
    return best, result


def _raise(loaded: LoadedPlan, outcome: PlanOutcome, row: dict, lo: float, lo_result, runs: int):
    """The highest rate the whole deployment passes, from `lo` (passed) up: steps of
    tolerance × 2^k until a miss, then bisection to the tolerance. Returns (that rate,
    whether a miss bounds it above, its run, runs left)."""
    tol = loaded.plan.search.tolerance
    step, hi = 2 * tol, None
    while runs > 0 and (hi is None or hi - lo > tol * lo):
        rate = lo * (1 + step) if hi is None else (lo + hi) / 2
        runs -= 1
        res, verdict, _step = _check(loaded, outcome, row, rate, "a higher rate")
        if verdict.passed:
            lo, lo_result = rate, res
            step *= 2
        else:
            hi = rate
    return lo, hi is not None, lo_result, runs


def _settle(loaded: LoadedPlan, outcome: PlanOutcome, row: dict, rate: float, rate_result, bracketed: bool,
            passed: float, runs: int):
    """The claim: the highest passing rate less the headroom when a miss bounds it (the
    capacity is then measured), else at least `passed` (the derived claim, or a rival's
    first check, which passed), with its report run made at the claim itself where that
    is not `rate` (the caller keeps a run for it). Returns (row, the claim's run, runs left)."""
    carried = rate / (1 + loaded.plan.target.headroom)
    if not bracketed:
        carried = max(carried, passed)
    result = rate_result
    step = next(v for v in reversed(outcome.verification) if v["passed"] and v["rate"] == rate
                and v["label"] == row["label"] and v["replicas"] == row["replicas"])
    if carried != rate:
        runs -= 1
        claimed, verdict, claim_step = _check(loaded, outcome, row, carried, "the claim, less the headroom")
        if verdict.passed:
            result, step = claimed, claim_step
        else:  # latency is not monotone in load here: claim the rate that passed
            carried = rate
    _reprice(row, carried)
    _mark_verified(row, step, result)
    return row, result, runs


def _reprice(row: dict, carried: float) -> None:
    row["gpus"] = row["replicas"] * gpus_per_replica(row)
    row["usd_per_hour"] = row["gpus"] * row["usd_per_gpu_hour"]
    row["carried_rps"] = carried
    row["capacity_rps"] = row["replicas"] * row["max_rate_per_replica"]
    row["utilization"] = carried / row["capacity_rps"]
    row["usd_per_m_output_tokens"] = row["usd_per_hour"] / (carried * row["mean_output_tokens"] * 3600) * 1e6

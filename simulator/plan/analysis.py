"""From per-replica maximum rates to deployments: replicas, cost, ranking, Pareto fronts.

Replicas are derived, not simulated: N replicas behind the router carry N × the
one-replica rate. Round-robin splitting of the arrivals makes each replica's traffic
smoother than the whole, so this is conservative; the runner re-simulates the winner
with all its replicas to confirm it.
"""

from __future__ import annotations

import math

from simulator.plan.config import LoadedPlan, pool_label

#: The most replicas (or units) a deployment may have: the recommendation is re-simulated
#: with every one of them, whose memory and time grow with the count (8,000 replicas ran
#: out of 24 GB). A larger fleet is planned as a share of its traffic, deployed k times.
MAX_REPLICAS = 1024

#: Columns of plan.csv, in order.
COLUMNS = (
    "rank", "label", "status", "meets_target", "gpu", "tp", "pp", "dp", "expert_parallel", "prefill", "decode",
    "policy",
    "max_num_batched_tokens",
    "max_num_seqs", "prefill_max_num_batched_tokens", "weight_dtype", "activation_dtype", "kv_dtype", "max_rate_per_replica", "replicas",
    "gpus", "usd_per_hour", "carried_rps", "capacity_rps", "utilization", "usd_per_m_output_tokens",
    "output_tok_s_per_gpu", "tok_s_per_user", "ttft_p99_ms", "tpot_p99_ms", "ttft_p99_at_max_ms",
    "tpot_mean_at_max_ms", "pareto_cost_latency", "pareto_throughput", "limited_by", "reason",
    "kv_capacity_tokens", "weights_gib_per_gpu", "kv_gib_per_gpu", "decode_floor_ms", "usd_per_gpu_hour",
    "mean_output_tokens", "sims", "wall_s", "key",
    # A whole-deployment run that passed at the carried rate (the recommendation's, and any
    # other deployment's that refinement ran and passed; blank for those never run): p99s,
    # and $/M output tokens over the whole run, drain included.
    "verified", "verified_ttft_p99_ms", "verified_tpot_p99_ms", "verified_usd_per_m_output_tokens",
)  # fmt: skip


def _replicas_for_rate(rate: float, per_replica: float, allowed: list[int] | None) -> int | None:
    need = max(1, math.ceil(rate / per_replica - 1e-9))
    if allowed is None:
        return need
    fits = [r for r in allowed if r >= need]
    return min(fits) if fits else None


def _replicas_for_budget(plan, gpr: int, price: float, allowed: list[int] | None) -> int | float:
    """The most replicas the caps pay for (an allowed count), 0 if not one; math.inf where
    no cap bounds them (a $0/h GPU under a dollar cap alone)."""
    t = plan.target
    most = math.inf
    if t.max_usd_per_hour is not None:
        most = min(most, math.floor(t.max_usd_per_hour / (gpr * price) + 1e-9) if price > 0 else math.inf)
    if t.max_gpus is not None:
        most = min(most, t.max_gpus // gpr)
    if allowed is not None:
        fits = [r for r in allowed if r <= most]
        return max(fits) if fits else 0
    return int(most) if math.isfinite(most) else math.inf


def _unaffordable(plan, unit: str, gpr: int, price: float, allowed: list[int] | None) -> str:
    """Why the caps pay for no allowed count of this configuration."""
    smallest = min(allowed) if allowed else 1
    if smallest == 1:
        return f"one {unit} is over the budget"
    return (f"the smallest count space.replicas allows ({smallest} {unit}s, {smallest * gpr} GPUs, "
            f"${smallest * gpr * price:,.2f}/h) is over the budget")


def _operating_probe(rec: dict, load: float) -> dict | None:
    """The passing probe nearest above a replica's load: its latency bounds the latency there
    (latency grows with load; the probes all use the same requests)."""
    above = [p for p in rec.get("probes", []) if p["passed"] and p["rate"] >= load * (1 - 1e-9)]
    return min(above, key=lambda p: p["rate"]) if above else rec.get("at_max")


def derive(loaded: LoadedPlan, records: dict[str, dict]) -> list[dict]:
    """One row per configuration: the deployment it implies and its figures of merit."""
    plan = loaded.plan
    allowed = allowed_replicas(plan)
    rows = []
    for point in loaded.points:
        rec = records.get(point.key)
        p = point.params
        row = {c: None for c in COLUMNS}
        row.update(label=point.label, key=point.key, gpu=p["gpu"], tp=p["tp"], pp=p["pp"], dp=p.get("dp", 1),
                   expert_parallel=p.get("expert_parallel", False), pools=p.get("pools"),
                   prefill=pool_label(p["pools"]["prefill"]) if p.get("pools") else None,
                   decode=pool_label(p["pools"]["decode"]) if p.get("pools") else None,
                   policy=p["scheduler"]["policy"], weight_dtype=p["weight_dtype"],
                   activation_dtype=p["activation_dtype"], kv_dtype=p["kv_dtype"], meets_target=False,
                   pareto_cost_latency=False, pareto_throughput=False)
        if rec is None:
            row.update(status="missing", reason="not searched")
            rows.append(row)
            continue
        row.update(status=rec["status"], reason=rec.get("reason"), sims=rec.get("sims"), wall_s=rec.get("wall_s"),
                   max_num_batched_tokens=rec.get("max_num_batched_tokens"), max_num_seqs=rec.get("max_num_seqs"),
                   prefill_max_num_batched_tokens=rec.get("prefill_max_num_batched_tokens"),
                   kv_capacity_tokens=rec.get("kv_capacity_tokens"), usd_per_gpu_hour=rec.get("usd_per_gpu_hour"),
                   mean_output_tokens=rec.get("mean_output_tokens"), decode_floor_ms=rec.get("decode_floor_ms"),
                   weights_gib_per_gpu=(rec.get("memory_gib") or {}).get("weights"),
                   kv_gib_per_gpu=(rec.get("memory_gib") or {}).get("kv_cache"),
                   limited_by=rec.get("limited_by"))
        if rec["status"] != "ok":
            rows.append(row)
            continue
        rate1 = rec["max_rate"]
        row["max_rate_per_replica"] = rate1
        if rate1 <= 0:
            rows.append(row)
            continue
        gpr, price, out_tok = rec["gpus_per_replica"], rec["usd_per_gpu_hour"], rec["mean_output_tokens"]
        at_max = rec.get("at_max") or {}
        row["output_tok_s_per_gpu"] = rate1 * out_tok / gpr
        tpot = at_max.get("tpot_mean_ms")
        row["tok_s_per_user"] = 1000.0 / tpot if tpot else None
        row["ttft_p99_at_max_ms"] = at_max.get("ttft_p99_ms")
        row["tpot_mean_at_max_ms"] = tpot
        row["_e2e_mean_ms"] = at_max.get("e2e_mean_ms")  # sizes the verification run
        unit = "unit" if p.get("pools") else "replica"
        if plan.target.mode == "rate":
            n = _replicas_for_rate(plan.target.rate * (1 + plan.target.headroom), rate1, allowed)
            carried = plan.target.rate
            if n and not within_caps(plan, {"usd_per_hour": n * gpr * price, "gpus": n * gpr}):
                # Replicas pool their traffic: one fewer than derived may still carry the
                # target (refine's trim), so the count the caps allow is verified when it
                # is that close; below it, the caps stop it.
                fewer = fewer_replicas(plan, n)
                if fewer is not None and _replicas_for_budget(plan, gpr, price, allowed) >= fewer:
                    n = fewer
        else:
            n = _replicas_for_budget(plan, gpr, price, allowed)
            if n == math.inf:
                row["reason"] = (f"a ${price:g}/h GPU leaves target.max_usd_per_hour no bound on the {unit}s: "
                                 "add target.max_gpus, or price it under prices")
                rows.append(row)
                continue
            carried = n * rate1 / (1 + plan.target.headroom)
        if n and n > MAX_REPLICAS:
            row["reason"] = (f"needs {n:,} {unit}s ({rate1:.3g} req/s each), more than the planner simulates "
                             f"({MAX_REPLICAS:,}): plan a share of the traffic (target.rate / k) and deploy it k times"
                             if plan.target.mode == "rate" else
                             f"the budget buys {n:,} {unit}s, more than the planner simulates ({MAX_REPLICAS:,}): "
                             "plan with a share of the budget and deploy it k times")
            rows.append(row)
            continue
        if not n:
            row["reason"] = (f"the allowed {unit} counts cannot carry the target" if plan.target.mode == "rate"
                             else _unaffordable(plan, unit, gpr, price, allowed))
            rows.append(row)
            continue
        usd = n * gpr * price
        row.update(replicas=n, gpus=n * gpr, usd_per_hour=usd, carried_rps=carried, capacity_rps=n * rate1,
                   utilization=carried / (n * rate1),
                   usd_per_m_output_tokens=usd / (carried * out_tok * 3600) * 1e6 if carried > 0 else None)
        op = _operating_probe(rec, carried / n) or {}
        row["ttft_p99_ms"], row["tpot_p99_ms"] = op.get("ttft_p99_ms"), op.get("tpot_p99_ms")
        row["meets_target"] = within_caps(plan, row)
        if not row["meets_target"]:
            row["reason"] = "over the budget cap (target.max_usd_per_hour / max_gpus)"
        rows.append(row)
    return rank(loaded, rows)


def allowed_replicas(plan) -> list[int] | None:
    """The replica counts `space.replicas` lists, or None where it says `minimise`."""
    return plan.space.replicas if isinstance(plan.space.replicas, list) else None


def fewer_replicas(plan, replicas: int, step: int = 1, miss: int = 0) -> int | None:
    """The count to try below `replicas`, above `miss` (a count known to miss; 0: none): the
    next smaller allowed one (step 1), or the middle one (step 0, bisecting); None when no
    allowed count lies between."""
    allowed = allowed_replicas(plan)
    between = [n for n in (allowed or range(1, replicas)) if miss < n < replicas]
    if not between:
        return None
    between.sort()
    return between[len(between) // 2] if step == 0 else between[-1]


def within_caps(plan, row: dict) -> bool:
    t = plan.target
    if t.max_usd_per_hour is not None and row["usd_per_hour"] > t.max_usd_per_hour * (1 + 1e-9):
        return False
    return not (t.max_gpus is not None and row["gpus"] > t.max_gpus)


def _latency(row: dict) -> float:
    v = row.get("ttft_p99_ms")
    return v if v is not None else math.inf


def sort_key(mode: str):
    """Rate target: cheapest first, ties by p99 TTFT then p99 TPOT at the operating load.
    Budget target: most carried rate first, then cheapest, then latency."""
    def key(r: dict):
        tail = (_latency(r), r.get("tpot_p99_ms") or math.inf, r["label"])
        if mode == "rate":
            return (round(r["usd_per_hour"], 6), *tail)
        return (-round(r["carried_rps"], 9), round(r["usd_per_hour"], 6), *tail)
    return key


def rank(loaded: LoadedPlan, rows: list[dict]) -> list[dict]:
    """Rank the rows that meet the target, mark Pareto fronts; meeting rows come first."""
    meeting = sorted((r for r in rows if r["meets_target"]), key=sort_key(loaded.plan.target.mode))
    for i, r in enumerate(meeting, 1):
        r["rank"] = i
    for r in rows:
        r["pareto_cost_latency"] = r["pareto_throughput"] = False
    for r in pareto(meeting, lambda r: (r["usd_per_hour"], _latency(r))):
        r["pareto_cost_latency"] = True
    served = [r for r in rows if r.get("output_tok_s_per_gpu") and r.get("tok_s_per_user")]
    for r in pareto(served, lambda r: (-r["output_tok_s_per_gpu"], -r["tok_s_per_user"])):
        r["pareto_throughput"] = True
    rest = [r for r in rows if not r["meets_target"]]
    order = {"ok": 0, "infeasible": 1, "error": 2, "missing": 3}
    rest.sort(key=lambda r: (order.get(r["status"], 4), -(r.get("max_rate_per_replica") or 0), r["label"]))
    return meeting + rest


def pareto(rows: list[dict], objectives) -> list[dict]:
    """Rows not dominated (every objective minimised): no other row is at least as good in
    all objectives and better in one."""
    vals = [objectives(r) for r in rows]
    front = []
    for i, a in enumerate(vals):
        dominated = any(all(b_k <= a_k for a_k, b_k in zip(a, b, strict=True)) and b != a
                        for j, b in enumerate(vals) if j != i)
        if not dominated:
            front.append(rows[i])
    return front

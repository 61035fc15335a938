"""Where the measurements contradict each other: the same workload measured faster under more load.

On one server, sending the same requests faster (open loop) or through more clients (closed
loop) can only lengthen their mean TTFT and TPOT, and sending them again at the same load
should measure the same. A pair of measured runs that went the other way, or a repeat that
differs, is run-to-run noise, and it bounds every model that slows with load: if the slower
run measured `slow` and the other `fast`, the prediction closest to both is the same value
for the two, 2·slow·fast/(slow + fast), which is still (slow − fast)/(slow + fast) off each.
Reported beside the errors so a user can tell the simulator's error from the benchmark's own
spread.

Runs are compared when they measured the same workload:
- per-request runs whose first requests have the same prompt and output lengths in the same
  order (a benchmark re-run from the same dataset and seed), over the requests they share;
- sweep rows of one configuration (`group`), by their client counts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

METRICS = ("ttft_ms", "tpot_ms")
MIN_SHARED = 20  # requests two runs must share, in order, to count as one workload
MIN_RATE_STEP = 1.02  # send rates closer than this count as one load (a repeat)
HINT_FLOOR_PCT = 2.5  # the CLI mentions the spread when a pair bounds every model this far off
MAX_PAIRS = 50  # pairs kept in validation.json, largest first


@dataclass
class _Run:
    label: str
    load: float  # clients, or the send rate in req/s
    unit: str  # "req/s" or "clients"
    lengths: np.ndarray  # (n, 2): each request's prompt and output tokens
    values: dict[str, np.ndarray | None]  # each metric's per-request measurements (NaN: none)
    arrivals: np.ndarray | None = None  # an open-loop trace's send times: its rate is theirs

    def load_over(self, n: int) -> float:
        """The load over the first n requests (the part two runs share)."""
        if self.arrivals is None:
            return self.load
        span = self.arrivals[n - 1] - self.arrivals[0]
        return (n - 1) / span if span > 0 else self.load


def _per_request(run) -> _Run | None:
    """A per-request run as compared here: None without lengths, enough requests or a load."""
    req = run.requests
    if req is None or len(req) < MIN_SHARED or not {"prompt_tokens", "output_tokens"} <= set(req.columns):
        return None
    arrivals = None
    if run.kind == "closed_loop":
        if not run.concurrency:
            return None
        load, unit = float(run.concurrency), "clients"
    elif run.kind == "rate" and run.rate and np.isfinite(run.rate):
        load, unit = float(run.rate), "req/s"
    elif "arrival_s" in req:
        arrivals = req["arrival_s"].to_numpy(dtype=float)
        span = arrivals[-1] - arrivals[0]
        if not span > 0:
            return None
        load, unit = (len(arrivals) - 1) / span, "req/s"
        if run.kind != "trace":  # only exact send times carry a rate over a prefix
            arrivals = None
    else:
        return None
    values = {m: req[m].to_numpy(dtype=float) if m in req else None for m in METRICS}
    if values["tpot_ms"] is not None:  # a one-token output has no TPOT
        values["tpot_ms"] = np.where(req["output_tokens"].to_numpy() >= 2, values["tpot_ms"], np.nan)
    return _Run(run.label, load, unit, req[["prompt_tokens", "output_tokens"]].to_numpy(dtype=np.int64),
                values, arrivals)


def _mean(values: np.ndarray | None, n: int) -> float | None:
    if values is None:
        return None
    head = values[:n]
    head = head[~np.isnan(head)]
    return float(head.mean()) if head.size else None


def _pair_entries(metric: str, a: tuple[str, float, float], b: tuple[str, float, float], unit: str,
                  shared: int | None) -> dict | None:
    """The entry for two (label, load, measured mean) when they contradict: the busier one
    measured less ("inverted"), or the two ran at the same load and measured differently
    ("repeat")."""
    lo, hi = (a, b) if a[1] <= b[1] else (b, a)
    same_load = hi[1] == lo[1] if unit == "clients" else hi[1] < lo[1] * MIN_RATE_STEP
    if same_load:
        if hi[2] == lo[2]:
            return None
        slow, fast = (lo, hi) if lo[2] > hi[2] else (hi, lo)
    elif hi[2] < lo[2]:
        slow, fast = lo, hi
    else:
        return None
    return {"metric": metric, "kind": "repeat" if same_load else "inverted", "unit": unit,
            "slower_run": slow[0], "faster_run": fast[0], "slower_load": slow[1], "faster_load": fast[1],
            "slower_measured": slow[2], "faster_measured": fast[2], "shared_requests": shared,
            "drop_pct": 100.0 * (1.0 - fast[2] / slow[2]),
            "floor_pct": 100.0 * (slow[2] - fast[2]) / (slow[2] + fast[2])}


def _compare(a: tuple[str, float, dict], b: tuple[str, float, dict], unit: str, shared: int | None) -> list[dict]:
    """Every metric both runs measured, as `_pair_entries` for each: (label, load, means)."""
    out = []
    for m in METRICS:
        ma, mb = a[2].get(m), b[2].get(m)
        if ma is not None and mb is not None and np.isfinite(ma) and np.isfinite(mb):
            entry = _pair_entries(m, (a[0], a[1], float(ma)), (b[0], b[1], float(mb)), unit, shared)
            if entry:
                out.append(entry)
    return out


def _request_pairs(preds) -> tuple[list[dict], int]:
    """Contradicting pairs among per-request runs that share their first requests."""
    by_start: dict[tuple, list[_Run]] = defaultdict(list)
    for p in preds:
        if not p.error and (run := _per_request(p.run)) is not None:
            by_start[(run.unit, run.lengths[:MIN_SHARED].tobytes())].append(run)
    pairs, compared = [], 0
    for members in by_start.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                n = min(len(a.lengths), len(b.lengths))
                if not np.array_equal(a.lengths[:n], b.lengths[:n]):
                    continue
                compared += 1
                means = [{m: _mean(r.values[m], n) for m in METRICS} for r in (a, b)]
                pairs += _compare((a.label, a.load_over(n), means[0]), (b.label, b.load_over(n), means[1]),
                                  a.unit, n)
    return pairs, compared


def _row_means(p) -> tuple[str, float, dict]:
    """A sweep row as `_compare` takes it: the means over the requests the simulation served."""
    return p.run.label, float(p.run.concurrency), p.run.measured if p.measured is None else p.measured


def _sweep_pairs(preds) -> tuple[list[dict], int]:
    """Contradicting pairs among sweep rows of one configuration at different client counts."""
    groups: dict[str, list] = defaultdict(list)
    for p in preds:
        if not p.error and p.run.requests is None and p.run.group and p.run.kind == "closed_loop" \
                and p.run.concurrency:
            groups[p.run.group].append(p)
    pairs, compared = [], 0
    for members in groups.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                compared += 1
                pairs += _compare(_row_means(a), _row_means(b), "clients", None)
    return pairs, compared


def load_consistency(preds) -> dict | None:
    """The measured runs that contradict each other under load, and the error floor they set.

    `preds` are validation RunPredictions. None when no two runs measured the same workload.
    """
    request_pairs, n_requests = _request_pairs(preds)
    sweep_pairs, n_sweep = _sweep_pairs(preds)
    if not n_requests + n_sweep:
        return None
    pairs = sorted(request_pairs + sweep_pairs, key=lambda e: -e["floor_pct"])
    worst = {m: max((e["floor_pct"] for e in pairs if e["metric"] == m), default=0.0) for m in METRICS}
    return {"pairs_compared": n_requests + n_sweep, "contradictions": len(pairs),
            "floor_pct": worst, "pairs": pairs[:MAX_PAIRS]}


def consistency_hint(check: dict | None) -> str | None:
    """One line when the measurements' own spread bounds every model by more than a little."""
    if not check or not check["pairs"] or check["pairs"][0]["floor_pct"] < HINT_FLOOR_PCT:
        return None
    top = check["pairs"][0]
    what = top["metric"].removesuffix("_ms").upper()
    shared = f"on the {top['shared_requests']:,} requests they share, " if top["shared_requests"] else ""
    if top["kind"] == "repeat":
        how = "at the same load"
    else:
        how = f"under {top['faster_load'] / top['slower_load']:.2f}× its load"
    return (f"Measurement spread: {shared}{top['faster_run']} measured a {top['drop_pct']:.1f}% lower mean "
            f"{what} than {top['slower_run']} {how}, so no model that slows with load is within "
            f"{top['floor_pct']:.1f}% of both ({check['contradictions']} such pair(s) in validation.json, "
            "`consistency`).")

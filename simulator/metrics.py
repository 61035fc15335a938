"""Per-iteration records, and summaries with vLLM `bench serve` semantics (DESIGN.md §3).

TTFT, TPOT and E2E are per request; ITL pools every inter-token gap of every request.
Gaps are stored as (value, count) pairs, because within one iteration most sequences
share the same gap: a run of 10M tokens needs a few hundred thousand pairs, not 10M floats.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from simulator.request import Request
from simulator.scheduler.base import ItlSink

PERCENTILES = (50, 90, 95, 99)
ITERATION_COLUMNS = ("replica", "start_s", "duration_ms", "prefill_tokens", "decode_tokens",
                     "num_seqs", "kv_blocks_used", "kv_blocks_total", "queue_len")


class IterationLog:
    """Columnar, compact (array.array) log of every iteration of every engine."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.replica = array("i")
        # Runs with several engines per replica only (`record_ranks`): each row's attention-DP
        # rank, or its pipeline virtual engine; the engines of other runs log through
        # `add`/`add_stretch`, which leave it out of the per-iteration work.
        self.ranks: array | None = None
        self.rank_column = "dp_rank"
        self.start = array("d")
        self.duration = array("d")
        self.prefill = array("q")
        self.decode = array("q")
        self.seqs = array("i")
        self.kv_used = array("q")
        self.kv_total = array("q")
        self.queue = array("i")
        self.count = 0
        # Each replica's iteration count, kept with the log on or off (compare, plan and
        # validate keep no rows): the per-pool counts. (KV use × time would cost ~5% of a
        # log-less run, paid per step of every stretch: its KV mean is null instead.)
        self.iterations: dict[int, int] = {}

    def record_ranks(self, column: str = "dp_rank") -> None:
        """Log each row's engine within its replica, under `column`: `dp_rank`, or
        `virtual_engine` for a pipeline's micro-batch engines (DP and PP do not combine)."""
        self.ranks = array("i")
        self.rank_column = column

    def add(self, replica: int, start: float, duration: float, prefill: int, decode: int,
            seqs: int, kv_used: int, kv_total: int, queue: int) -> None:
        self.count += 1
        self.iterations[replica] = self.iterations.get(replica, 0) + 1
        if not self.enabled:
            return
        self.replica.append(replica)
        self.start.append(start)
        self.duration.append(duration)
        self.prefill.append(prefill)
        self.decode.append(decode)
        self.seqs.append(seqs)
        self.kv_used.append(kv_used)
        self.kv_total.append(kv_total)
        self.queue.append(queue)

    def add_stretch(self, replica: int, starts: list[float], durations: list[float], seqs: int,
                    kv_used: list[int], kv_total: int, queue: int) -> None:
        n = len(starts)
        self.count += n
        self.iterations[replica] = self.iterations.get(replica, 0) + n
        if not self.enabled:
            return
        self.replica.extend([replica] * n)
        self.start.extend(starts)
        self.duration.extend(durations)
        self.prefill.extend([0] * n)
        self.decode.extend([seqs] * n)
        self.seqs.extend([seqs] * n)
        self.kv_used.extend(kv_used)
        self.kv_total.extend([kv_total] * n)
        self.queue.extend([queue] * n)

    def iterations_of(self, replicas: Iterable[int]) -> int:
        """Iterations these replicas ran."""
        return sum(self.iterations.get(r, 0) for r in replicas)

    def add_rank(self, rank: int, n: int = 1) -> None:
        """The rank (or virtual engine) of the `n` rows just added."""
        if self.enabled:
            self.ranks.extend([rank] * n)

    def frame(self) -> pd.DataFrame:
        """With ranks recorded, a `dp_rank` (or `virtual_engine`) column follows `replica`."""
        frame = pd.DataFrame({
            "replica": np.frombuffer(self.replica, dtype=np.int32),
            "start_s": np.frombuffer(self.start, dtype=np.float64),
            "duration_ms": np.frombuffer(self.duration, dtype=np.float64) * 1e3,
            "prefill_tokens": np.frombuffer(self.prefill, dtype=np.int64),
            "decode_tokens": np.frombuffer(self.decode, dtype=np.int64),
            "num_seqs": np.frombuffer(self.seqs, dtype=np.int32),
            "kv_blocks_used": np.frombuffer(self.kv_used, dtype=np.int64),
            "kv_blocks_total": np.frombuffer(self.kv_total, dtype=np.int64),
            "queue_len": np.frombuffer(self.queue, dtype=np.int32),
        }, columns=list(ITERATION_COLUMNS))
        if self.ranks is not None:
            frame.insert(1, self.rank_column, np.frombuffer(self.ranks, dtype=np.int32))
        return frame


def requests_frame(requests: list[Request], *, disaggregated: bool = False,
                   rank_column: str | None = None) -> pd.DataFrame:
    """One row per request, latencies in ms (NaN where undefined, as vLLM leaves them out).

    Disaggregated runs add `prefill_replica` and `kv_transfer_ms`; `replica` is then the
    decode instance (or the prefill instance, for a request that never reached decode).
    """
    arrival = np.array([r.arrival for r in requests], dtype=np.float64)
    first = np.array([r.first_token_time for r in requests], dtype=np.float64)
    finish = np.array([r.finish_time for r in requests], dtype=np.float64)
    out = np.array([r.output_tokens for r in requests], dtype=np.int64)
    ttft = (first - arrival) * 1e3
    e2e = (finish - arrival) * 1e3
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2e - ttft) / (out - 1), np.nan)
    status = ["completed" if r.status == "finished" else "rejected" for r in requests]
    frame = pd.DataFrame({
        "request_id": np.array([r.id for r in requests], dtype=np.int64),
        "replica": np.array([r.replica for r in requests], dtype=np.int64),
        "arrival_s": arrival,
        "prompt_tokens": np.array([r.prompt_tokens for r in requests], dtype=np.int64),
        "cached_tokens": np.array([r.cached_tokens for r in requests], dtype=np.int64),
        "output_tokens": out,
        "first_token_s": first,
        "finish_s": finish,
        "ttft_ms": ttft,
        "tpot_ms": tpot,
        "e2e_ms": e2e,
        "preemptions": np.array([r.preemptions for r in requests], dtype=np.int64),
        "swaps": np.array([r.swaps for r in requests], dtype=np.int64),
        "status": status,
        "reject_reason": [r.reject_reason for r in requests],
    })
    if rank_column:  # which attention-DP rank (or virtual engine) of its replica served it
        frame.insert(2, rank_column, np.array([r.rank for r in requests], dtype=np.int64))
    if disaggregated:
        frame.insert(2, "prefill_replica", np.array([r.prefill_replica for r in requests], dtype=np.int64))
        frame.insert(8, "kv_transfer_ms", np.array([r.kv_transfer_s for r in requests], dtype=np.float64) * 1e3)
    return frame


def describe(values: np.ndarray) -> dict[str, float | None]:
    """Mean and percentiles (numpy linear), NaN left out as vLLM does; None when empty."""
    values = values[~np.isnan(values)]
    if values.size == 0:
        return _no_values()
    pct = np.percentile(values, PERCENTILES)
    return {"mean": float(values.mean()), "std": float(values.std()),
            **{f"p{p}": float(v) for p, v in zip(PERCENTILES, pct, strict=True)}}


def _no_values() -> dict[str, None]:
    return {"mean": None, "std": None, **{f"p{p}": None for p in PERCENTILES}}


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, percentiles) -> list[float]:
    """numpy's default (linear) percentile of the array where each value repeats `weight` times."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    cum = np.cumsum(weights[order])
    n = int(cum[-1])
    out = []
    for p in percentiles:
        h = (n - 1) * p / 100.0
        lo = math.floor(h)
        hi = min(lo + 1, n - 1)
        v_lo = v[np.searchsorted(cum, lo + 1)]
        v_hi = v[np.searchsorted(cum, hi + 1)]
        out.append(float(v_lo + (h - lo) * (v_hi - v_lo)))
    return out


def itl_stats(itl: ItlSink) -> dict[str, float | None]:
    if not itl.values:
        return _no_values()
    v = np.asarray(itl.values, dtype=np.float64) * 1e3
    w = np.asarray(itl.weights, dtype=np.int64)
    pct = weighted_percentiles(v, w, PERCENTILES)
    mean = float((v * w).sum() / w.sum())
    std = math.sqrt(float((w * (v - mean) ** 2).sum() / w.sum()))
    return {"mean": mean, "std": std, **{f"p{p}": x for p, x in zip(PERCENTILES, pct, strict=True)}}


# Numbers that differ from request to request ("prompt + output = 10384 tokens"); a
# setting's value ("max_model_len=8192") follows "=" directly and is kept.
_PER_REQUEST_NUMBER = re.compile(r"(?<![=\w.])\d+")


def slo_set(summary: Mapping) -> bool:
    """Whether a run's summary names any SLO target: without one every request 'meets' it,
    and goodput and an attainment of 100% say nothing."""
    slo = (summary.get("goodput") or {}).get("slo") if isinstance(summary, Mapping) else None
    return isinstance(slo, Mapping) and any(v is not None for v in slo.values())


def rejection_reasons(req: pd.DataFrame) -> list[dict]:
    """Rejections grouped by cause, most common first, each with its first request's own
    words: a run that turns requests away says why without opening requests.csv."""
    rejected = req.loc[req["status"] != "completed", "reject_reason"].fillna("").astype(str)
    groups: dict[str, list] = {}
    for reason in rejected:
        entry = groups.setdefault(_PER_REQUEST_NUMBER.sub("N", reason), [reason or "no reason recorded", 0])
        entry[1] += 1
    return [{"reason": example, "count": n} for example, n in sorted(groups.values(), key=lambda e: -e[1])]


def summarize(req: pd.DataFrame, itl: ItlSink, slo: dict[str, float | None]) -> dict:
    """The metric block of summary.json (the contract other tools read)."""
    done = req[req["status"] == "completed"]
    total = len(req)
    if len(done):
        start = float(req["arrival_s"].min())
        duration = float(done["finish_s"].max()) - start
    else:
        duration = 0.0
    rate = (lambda x: x / duration) if duration > 0 else (lambda x: 0.0)
    meets = np.ones(len(done), dtype=bool)
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        limit = slo.get(key)
        if limit is not None:
            vals = done[key].to_numpy()
            # A single-token request has no TPOT: vLLM counts it as meeting the TPOT SLO.
            meets &= np.where(np.isnan(vals), key == "tpot_ms", vals <= limit)
    good = int(meets.sum())
    given = any(v is not None for v in slo.values())
    return {
        "requests": {"total": total, "completed": len(done), "rejected": total - len(done),
                     "rejected_reasons": rejection_reasons(req)},
        "duration_s": duration,
        "throughput": {
            "requests_per_s": rate(len(done)),
            "input_tokens_per_s": rate(float(done["prompt_tokens"].sum())),
            "output_tokens_per_s": rate(float(done["output_tokens"].sum())),
            "total_tokens_per_s": rate(float(done["prompt_tokens"].sum() + done["output_tokens"].sum())),
        },
        "ttft_ms": describe(done["ttft_ms"].to_numpy()),
        "tpot_ms": describe(done["tpot_ms"].to_numpy()),
        "itl_ms": itl_stats(itl),
        "e2e_ms": describe(done["e2e_ms"].to_numpy()),
        # Without an SLO every request "meets" it: goodput and attainment say nothing, so they
        # are null, as `vllm bench serve` leaves goodput out without --goodput.
        "goodput": {
            "requests_per_s": rate(good) if given else None,
            "slo_attainment": (good / total if total else 0.0) if given else None,
            "slo": dict(slo),
        },
        "preemptions": int(req["preemptions"].sum()),
        "swaps": int(req["swaps"].sum()),
    }

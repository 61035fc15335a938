"""Reduce per-request and per-iteration frames to the few points and rows a report shows.

A long run logs millions of iterations; plotting them raw would take minutes and produce
unreadable figures, so everything here bins or groups first. Missing columns read as NaN
so a partial frame still renders instead of crashing the whole report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from simulator.report.html import get

MAX_TIME_BINS = 2000
MAX_THROUGHPUT_BINS = 200

BINNED_COLUMNS = [
    "replica",
    "dp_rank",
    "t_s",
    "iterations",
    "queue_mean",
    "queue_max",
    "kv_mean",
    "kv_max",
    "seqs_mean",
    "seqs_max",
    "prefill_mean",
    "decode_mean",
]


def column(df: pd.DataFrame, name: str) -> np.ndarray:
    """Column `name` as float64, or all-NaN when absent, so callers need no key checks."""
    if name not in df.columns:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def finite(values: np.ndarray) -> np.ndarray:
    """Drop NaN/inf: rejected requests and single-token outputs carry NaN latencies."""
    return values[np.isfinite(values)]


def _replicas(df: pd.DataFrame) -> pd.Series:
    """Replica ids, defaulting to 0 so single-replica logs without the column still group."""
    if "replica" in df.columns:
        return df["replica"].reset_index(drop=True)
    return pd.Series(np.zeros(len(df), dtype=np.int64))


#: The engines a replica's iterations log apart: attention-DP ranks, or pipeline virtual
#: engines (each schedules and caches on its own); the label each gets in the figures.
RANK_COLUMNS = {"dp_rank": "DP rank", "virtual_engine": "virtual engine"}


def _dp_ranks(df: pd.DataFrame) -> tuple[np.ndarray, str]:
    """Each row's engine within its replica (its attention-DP rank, or pipeline virtual
    engine) and what to call it; 0 for logs of runs with one engine a replica."""
    for name, label in RANK_COLUMNS.items():
        if name in df.columns:
            return df[name].to_numpy(), label
    return np.zeros(len(df), dtype=np.int64), "DP rank"


def rank_label(binned: pd.DataFrame) -> str:
    """What a binned log's `dp_rank` column counts (bin_iterations sets it)."""
    return binned.attrs.get("rank_label", "DP rank")


def ranked(binned: pd.DataFrame) -> bool:
    """True when the binned log holds more than one attention-DP rank (or virtual engine).

    Only then do the figures split a replica by rank: a run without DP, or one where a
    single rank ever ran, keeps one line per replica.
    """
    return "dp_rank" in binned.columns and binned["dp_rank"].nunique() > 1


def bin_iterations(iterations: pd.DataFrame, max_bins: int = MAX_TIME_BINS) -> pd.DataFrame:
    """Time-bin iterations per (replica, DP rank or PP virtual engine) on one shared grid of at
    most `max_bins` bins.

    Means are per iteration (not time-weighted): a bin's value is what a typical
    iteration in that window saw. The shared grid keeps replicas aligned on one x axis.
    Attention-DP ranks schedule and cache on their own, so each rank is binned apart:
    pooling them would average one rank's KV occupancy or queue with another's.
    """
    t = column(iterations, "start_s")
    keep = np.isfinite(t)
    if not keep.any():
        return pd.DataFrame(columns=BINNED_COLUMNS)
    t = t[keep]
    t0, t1 = float(t.min()), float(t.max())
    width = (t1 - t0) / max_bins if t1 > t0 else 1.0
    idx = np.minimum(((t - t0) / width).astype(np.int64), max_bins - 1)

    ranks, label = _dp_ranks(iterations)
    used = column(iterations, "kv_blocks_used")[keep]
    total = column(iterations, "kv_blocks_total")[keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        kv = np.where(total > 0, used / total, np.nan)
    frame = pd.DataFrame(
        {
            "replica": _replicas(iterations)[keep].to_numpy(),
            "dp_rank": ranks[keep],
            "bin": idx,
            "queue": column(iterations, "queue_len")[keep],
            "kv": kv,
            "seqs": column(iterations, "num_seqs")[keep],
            "prefill": column(iterations, "prefill_tokens")[keep],
            "decode": column(iterations, "decode_tokens")[keep],
        }
    )
    out = (
        frame.groupby(["replica", "dp_rank", "bin"], sort=True)
        .agg(
            iterations=("bin", "size"),
            queue_mean=("queue", "mean"),
            queue_max=("queue", "max"),
            kv_mean=("kv", "mean"),
            kv_max=("kv", "max"),
            seqs_mean=("seqs", "mean"),
            seqs_max=("seqs", "max"),
            prefill_mean=("prefill", "mean"),
            decode_mean=("decode", "mean"),
        )
        .reset_index()
    )
    out["t_s"] = t0 + (out["bin"] + 0.5) * width
    out = out[BINNED_COLUMNS]
    out.attrs["rank_label"] = label
    return out


def completed_mask(requests: pd.DataFrame) -> np.ndarray:
    """Rows that finished: status says so, or (without a status column) finish_s is set."""
    finish = column(requests, "finish_s")
    if "status" in requests.columns:
        return (requests["status"] == "completed").to_numpy() & np.isfinite(finish)
    return np.isfinite(finish)


def bin_completions(
    requests: pd.DataFrame, max_bins: int = MAX_THROUGHPUT_BINS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Completed requests/s and output tokens/s per finish-time bin: (edges, req/s, tok/s).

    Tokens are attributed to the bin where their request finished, which smooths out
    within-request timing but needs no per-token log. ~sqrt(n) bins keeps each bin
    populated enough that the rate is not dominated by noise.
    """
    done = completed_mask(requests)
    finish = column(requests, "finish_s")[done]
    tokens = np.nan_to_num(column(requests, "output_tokens")[done])
    if finish.size == 0:
        return np.empty(0), np.empty(0), np.empty(0)
    first = column(requests, "first_token_s")[done] if "first_token_s" in requests else finish
    first = np.where(np.isfinite(first), np.minimum(first, finish), finish)
    t0 = min(0.0, float(finish.min()))
    t1 = float(finish.max())
    if t1 <= t0:
        t1 = t0 + 1.0
    nbins = int(np.clip(round(math.sqrt(finish.size)), 1, max_bins))
    edges = np.linspace(t0, t1, nbins + 1)
    width = edges[1] - edges[0]
    count, _ = np.histogram(finish, bins=edges)
    return edges, count / width, np.diff(_tokens_made_by(edges, first, finish, tokens)) / width


def _tokens_made_by(times: np.ndarray, first: np.ndarray, finish: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Output tokens made by each of `times`: each request's first token at `first`, the rest
    spread evenly up to `finish`. Counting a request's tokens at its finish instead piles a
    closed loop's fixed-length requests into a few bins, as if nothing ran between them."""
    span = finish - first
    rest = np.maximum(tokens - 1, 0)
    out = np.empty(times.size)
    for i, t in enumerate(times[:-1]):  # one vectorised pass per bin edge (at most max_bins)
        # A token made exactly at an edge belongs to the bin that starts there.
        made = np.where(span > 0, np.clip((t - first) / np.where(span > 0, span, 1.0), 0.0, 1.0), t > finish)
        out[i] = float(((t > first) * np.minimum(tokens, 1) + made * rest).sum())
    out[-1] = float(tokens.sum())  # the last edge is the last finish: everything is made by then
    return out


PER_INSTANCE_COLUMNS = [
    "pool", "replica", "requests", "completed", "rejected", "ttft_mean", "tpot_mean", "preemptions",
]  # fmt: skip
POOLS = ("prefill", "decode")


def instance_pools(summary: Mapping, iterations: pd.DataFrame) -> dict[int, str]:
    """Pool role of every instance of a disaggregated run; {} for a colocated one.

    The summary's pool sizes name idle instances too (global numbers, prefill first, as
    the simulator assigns them); the iteration log's `pool` column is the fallback.
    """
    dis = get(summary, "disaggregation")
    sizes = [get(dis, role, "replicas") for role in POOLS]
    if all(isinstance(n, int) and n > 0 for n in sizes):
        roles = [role for role, n in zip(POOLS, sizes, strict=True) for _ in range(n)]
        return dict(enumerate(roles))
    if "pool" in iterations.columns and "replica" in iterations.columns:
        pairs = iterations[["replica", "pool"]].drop_duplicates("replica")
        return {int(r): str(p) for r, p in zip(pairs["replica"], pairs["pool"], strict=True)}
    return {}


def _instance_stats(frame: pd.DataFrame, ids: list[int] | None = None) -> pd.DataFrame:
    """Counts and means per `replica` of `frame`; with `ids`, exactly those rows, idle ones zero."""
    out = frame.groupby("replica", sort=True, dropna=False).agg(
        requests=("completed", "size"),
        completed=("completed", "sum"),
        ttft_mean=("ttft", "mean"),
        tpot_mean=("tpot", "mean"),
        preemptions=("preemptions", "sum"),
    )
    if ids is not None:
        out = out.reindex(ids)
        out[["requests", "completed", "preemptions"]] = out[
            ["requests", "completed", "preemptions"]
        ].fillna(0)
    out = out.rename_axis("replica").reset_index()
    for col in ("requests", "completed", "preemptions"):
        out[col] = out[col].astype(np.int64)
    out["rejected"] = out["requests"] - out["completed"]
    return out


def _stage_instances(requests: pd.DataFrame, pools: Mapping[int, str]) -> tuple[np.ndarray, ...]:
    """Each request's prefill and decode instance, -1 where it had none.

    `replica` is the decode instance, or the prefill instance for a request that never
    reached decode (one output token, or rejected there); `prefill_replica` is only set
    when the KV moved.
    """
    replica = column(requests, "replica")
    moved = column(requests, "prefill_replica")
    role = pd.Series(replica).map(pools).to_numpy()
    prefill = np.where(moved >= 0, moved, np.where(role == "prefill", replica, -1))
    decode = np.where(role == "decode", replica, -1)
    return prefill, decode


def per_instance(requests: pd.DataFrame, pools: Mapping[int, str] | None = None,
                 replicas: int | None = None, dp: int | None = None) -> pd.DataFrame:
    """Per-instance request counts, mean TTFT/TPOT and preemptions, to spot load imbalance.

    Colocated runs get one row per replica (`replicas` of them, idle ones at zero: an idle
    replica is the imbalance to spot; else those seen), and under attention DP one per rank
    of each (`dp` ranks each, idle ones at zero too). Disaggregated runs (`pools`) get a row
    for every instance of both pools: a prefill row covers the requests it prefilled and
    their TTFT, a decode row those it decoded and their TPOT; preemptions count where
    the request ended, since requests.csv does not say where each one happened.
    """
    if requests.empty and not pools:
        return pd.DataFrame(columns=PER_INSTANCE_COLUMNS)
    done = completed_mask(requests)
    ttft, tpot = column(requests, "ttft_ms"), column(requests, "tpot_ms")
    preempt = np.nan_to_num(column(requests, "preemptions"))
    if not pools:
        frame = pd.DataFrame({"replica": _replicas(requests).to_numpy(), "completed": done,
                              "ttft": ttft, "tpot": tpot, "preemptions": preempt})
        if "dp_rank" not in requests.columns:
            ids = list(range(replicas)) if replicas else None
            return _instance_stats(frame, ids).assign(pool="")[PER_INSTANCE_COLUMNS]
        # Attention DP: each rank of a replica schedules and caches on its own.
        ranks = column(requests, "dp_rank")
        ids = list(range(replicas)) if replicas else None
        every = range(dp) if dp else np.unique(ranks[np.isfinite(ranks)])
        parts = [_instance_stats(frame[ranks == k], ids).assign(pool=f"DP rank {int(k)}") for k in every]
        out = pd.concat(parts, ignore_index=True).sort_values(["replica", "pool"], kind="stable")
        return out.reset_index(drop=True)[PER_INSTANCE_COLUMNS]
    prefill, decode = _stage_instances(requests, pools)
    nan = np.full(len(requests), np.nan)
    stages = {
        "prefill": (prefill, ttft, nan, np.where(decode < 0, preempt, 0.0)),
        "decode": (decode, nan, tpot, preempt),
    }
    parts = []
    for role, (ids, role_ttft, role_tpot, role_preempt) in stages.items():
        frame = pd.DataFrame({"replica": ids, "completed": done, "ttft": role_ttft,
                              "tpot": role_tpot, "preemptions": role_preempt})
        members = sorted(i for i, r in pools.items() if r == role)
        parts.append(_instance_stats(frame, members).assign(pool=role))
    return pd.concat(parts, ignore_index=True)[PER_INSTANCE_COLUMNS]

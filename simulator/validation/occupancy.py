"""KV-cache occupancy read off per-request timestamps, and the capacity it implies.

A server's KV capacity (vLLM logs it as "# GPU blocks") decides where queueing starts,
so a wrong capacity breaks every prediction past the knee. Benchmarks rarely publish the
server log, but per-request timestamps show the occupancy: a request holds
ceil(context / block_size) blocks from its first token to its last, its context growing
by one token per output token. The same estimate is applied to the simulated requests,
so its biases (no prefill iteration, linear token growth) cancel in the ratio:

    implied capacity = simulated capacity × measured peak / simulated peak

It is only read from runs whose simulation filled the cache; elsewhere the peak is the
demand, not the capacity.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SAMPLES = 4000  # time points per run; the peak is stable to <0.5% beyond ~1000
SATURATED = 0.98  # simulated peak / capacity at and above which the cache counts as full
HINT_PCT = 5.0  # |implied − simulated| / simulated above which the CLI suggests a fix


def peak_blocks_in_use(requests: pd.DataFrame, block_size: int, samples: int = SAMPLES) -> float:
    """Largest number of KV blocks the requests hold at once, from their timestamps."""
    need = ("arrival_s", "prompt_tokens", "output_tokens", "ttft_ms", "e2e_ms")
    if not set(need) <= set(requests.columns):
        return float("nan")
    df = requests.dropna(subset=list(need))
    if df.empty:
        return float("nan")
    arrival = df["arrival_s"].to_numpy(dtype=float)
    start = arrival + df["ttft_ms"].to_numpy(dtype=float) / 1e3
    end = arrival + df["e2e_ms"].to_numpy(dtype=float) / 1e3
    prompt = df["prompt_tokens"].to_numpy(dtype=float)
    output = df["output_tokens"].to_numpy(dtype=float)
    span = np.maximum(end - start, 1e-9)
    best = 0.0
    for t in np.linspace(start.min(), end.max(), samples):
        live = (start <= t) & (end > t)
        if not live.any():
            continue
        done = np.clip((t - start[live]) / span[live], 0.0, 1.0)
        best = max(best, float(np.ceil((prompt[live] + done * output[live]) / block_size).sum()))
    return best


def occupancy_check(preds: list) -> dict | None:
    """Per-run measured vs simulated peak occupancy and the capacity the measurements imply.

    `preds` are validation RunPredictions; runs without per-request arrival timestamps
    (sweeps, bench JSON) are left out. None when no run has them.
    """
    rows = []
    disaggregated = False
    for p in preds:
        req = p.run.requests
        summary = p.summary or {}
        kv = summary.get("kv_cache") or {}
        if p.error or req is None or "arrival_s" not in req or not kv:
            continue
        if summary.get("disaggregation"):
            # Between its first token and decode admission a request holds prefill-side
            # blocks, so its timestamps cannot say which pool's cache it occupied.
            disaggregated = True
            continue
        block = int(kv["block_size"])
        capacity = int(kv["total_capacity_tokens"]) // block
        memory = summary.get("memory_gib") or {}
        # GiB of each GPU's memory per block of the run's total capacity, for the reserve hint:
        # a change of n blocks over all replicas is n / replicas blocks on each one's GPUs.
        gib_per_block = memory["kv_cache"] / capacity if memory.get("kv_cache") and capacity else None
        measured = peak_blocks_in_use(req, block)
        simulated = peak_blocks_in_use(p.requests, block)
        if not (np.isfinite(measured) and np.isfinite(simulated)) or simulated <= 0:
            continue
        full = simulated >= SATURATED * capacity
        rows.append({"run": p.run.label, "block_size": block, "sim_capacity_blocks": capacity,
                     "measured_peak_blocks": measured, "pred_peak_blocks": simulated,
                     "sim_cache_full": bool(full), "gib_per_block_per_gpu": gib_per_block,
                     "implied_capacity_blocks": capacity * measured / simulated if full else None})
    if not rows:
        if disaggregated:
            return {"runs": [], "sim_capacity_blocks": None, "implied_capacity_blocks": None, "diff_pct": None,
                    "note": "not checked: in a disaggregated deployment a request's timestamps do not say "
                            "which pool's KV cache held it"}
        return None
    cap, block = rows[0]["sim_capacity_blocks"], rows[0]["block_size"]
    implied = [r["implied_capacity_blocks"] for r in rows if r["implied_capacity_blocks"] is not None]
    if not implied:
        return {"runs": rows, "sim_capacity_blocks": cap, "implied_capacity_blocks": None, "diff_pct": None,
                "note": "no run filled the simulated KV cache, so its capacity cannot be checked"}
    value = float(np.median(implied))
    per_block = rows[0]["gib_per_block_per_gpu"]
    return {"runs": rows, "sim_capacity_blocks": cap, "implied_capacity_blocks": value,
            "implied_capacity_tokens": round(value) * block, "diff_pct": (value - cap) / cap * 100.0,
            # The same difference as memory kept outside the cache on each GPU.
            "implied_extra_reserve_gib": (cap - value) * per_block if per_block else None,
            "note": f"{len(implied)} run(s) filled the simulated cache; the measured occupancy "
                    f"implies {value:,.0f} blocks against the simulated {cap:,}"}


def occupancy_hint(check: dict | None) -> str | None:
    """A one-paragraph suggestion when the measured server's cache looks a different size."""
    if not check or check.get("diff_pct") is None or abs(check["diff_pct"]) <= HINT_PCT:
        return None
    word = "smaller" if check["diff_pct"] < 0 else "larger"
    return (f"KV capacity: the measured occupancy implies about {check['implied_capacity_blocks']:,.0f} "
            f"blocks, {abs(check['diff_pct']):.0f}% {word} than the simulated {check['sim_capacity_blocks']:,}. "
            "Check memory.gpu_memory_utilization and the scheduler limits against the server's launch "
            "flags, or set memory.kv_cache_tokens to the server's logged KV size "
            f"(≈ {check['implied_capacity_tokens']:,} tokens)" + _reserve_hint(check) + ".")


def _reserve_hint(check: dict) -> str:
    """The capacity difference as a change of memory.runtime_reserve_gib: unlike a token count,
    memory kept outside the cache still holds when the model or the parallelism changes."""
    extra = check.get("implied_extra_reserve_gib")
    if extra is None:
        return ""
    verb = "raise" if extra > 0 else "lower"
    return (f", or {verb} memory.runtime_reserve_gib by {abs(extra):.1f} GiB per GPU, which also "
            "holds when the model or parallelism is changed")

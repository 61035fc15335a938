"""Error metrics of predictions against measurements.

Signed % error = (predicted − measured) / measured. MAPE = mean of |signed %| over runs.
A KV-capacity cliff (closed-loop sweeps): TTFT ≥ 5× the TTFT of the same configuration
at its lowest measured concurrency. Rows below the cliff are scored separately, since a
cliff's TTFT is a queueing time that scales with the benchmark's length.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.formatting import natural_key
from simulator.validation.consistency import load_consistency
from simulator.validation.measurement import MeasuredSet
from simulator.validation.occupancy import occupancy_check
from simulator.validation.runner import METRICS, RunPrediction

CLIFF_FACTOR = 5.0


MISMATCH_MAPE = 50.0


def mismatch_hint(result: dict) -> str | None:
    """A pointer at the inputs when an error is too large to be the model's: a per-request
    CSV names no model or GPU, so a base scenario of another system runs without complaint."""
    worst = max((b["mape"] for blocks in result.get("metrics", {}).values() for b in blocks.values()
                 if b.get("mape") is not None), default=None)
    if worst is None or worst <= MISMATCH_MAPE:
        return None
    sweep = " and that --rounds matches the requests each client sent" if "cliffs" in result else ""
    # A replay from timestamps cannot tell a resent prompt from a new one of the same length.
    resent = (" If the benchmark's clients resent the same prompts (a fixed prompt set, multi-turn chat), "
              "the server answered them from its prefix cache: mark them with a per-request CSV's prefix_id "
              "and prefix_tokens columns." if "kv_occupancy" in result else "")
    return (f"An error of {worst:.0f}% usually means the inputs disagree, not the model: check that the "
            "base scenario's model, GPU, parallelism, precision and engine are the measured server's"
            f"{sweep}.{resent} Where they match, docs/fidelity.md's Known gaps lists the cases the model "
            "itself reads far off (pipeline parallelism under DistServe, speculative decoding).")


def pct(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100.0 if meas else float("nan")


def runs_frame(preds: list[RunPrediction]) -> pd.DataFrame:
    rows = []
    for p in preds:
        config = p.summary.get("config") or {}
        row = {"run": p.run.label, "source": p.run.source, "group": p.run.group, "family": p.run.family,
               "layout": p.run.layout, "lengths": p.run.lengths,
               "clients": str(p.run.concurrency) if p.run.concurrency else "",
               "concurrency": p.run.concurrency, "error": p.error, "note": p.note,
               "kernel_times": config.get("kernel_times"), "api_server": config.get("api_server")}
        means = p.run.measured if p.measured is None else p.measured
        for m in METRICS:
            meas = means.get(m)
            pred = p.predicted.get(m)
            row[f"measured_{m}"] = np.nan if meas is None else meas  # blank cells are not scored
            row[f"pred_{m}"] = np.nan if pred is None else pred
            row[f"err_pct_{m}"] = pct(pred, meas) if meas is not None and pred is not None else np.nan
        rows.append(row)
    df = pd.DataFrame(rows)
    df["measured_cliff"] = False
    df["pred_cliff"] = False
    if df["group"].astype(bool).any():
        for _, g in df[df["error"].isna()].groupby("group"):
            g = g.sort_values("concurrency")
            df.loc[g.index, "measured_cliff"] = g["measured_ttft_ms"] >= CLIFF_FACTOR * _lowest(g["measured_ttft_ms"])
            df.loc[g.index, "pred_cliff"] = g["pred_ttft_ms"] >= CLIFF_FACTOR * _lowest(g["pred_ttft_ms"])
    return df


def _lowest(ttfts: pd.Series) -> float:
    """A configuration's reference TTFT for its cliffs: at its lowest concurrency that has one
    (a blank or 0 cell is no reference; then nothing is a cliff)."""
    usable = ttfts[ttfts > 0]
    return float(usable.iloc[0]) if len(usable) else float("inf")


def _err_block(errs: np.ndarray) -> dict:
    errs = errs[~np.isnan(errs)]
    if errs.size == 0:
        return {"n": 0, "mape": None, "mean_signed_pct": None, "max_abs_pct": None}
    return {"n": int(errs.size), "mape": float(np.abs(errs).mean()),
            "mean_signed_pct": float(errs.mean()), "max_abs_pct": float(np.abs(errs).max())}


# A sweep's error breakdowns (validation.json's by_<column>), with their headings.
BREAKDOWNS = {"family": "system, model and precision", "layout": "layout (TP, DP, EP, PP)",
              "lengths": "ISL/OSL", "clients": "clients (concurrency)"}


def breakdown(runs: pd.DataFrame, column: str) -> list[dict]:
    """Errors per value of a sweep's `column` where it takes more than one: family (system,
    model and precision), layout (TP and the other layout columns), lengths (isl/osl) or
    clients. A sweep's overall MAPE can hide one model that is far off, or a bias that grows
    with TP, the prompt length or the load."""
    ok = runs[runs["error"].isna() & runs[column].astype(bool)]
    if ok[column].nunique() < 2:
        return []
    out = []
    for value in sorted(ok[column].unique(), key=natural_key):
        g = ok[ok[column] == value]
        below = g[~g["measured_cliff"]]
        out.append({column: value, "runs": len(g),
                    "ttft_ms_below_cliff": _err_block(below["err_pct_ttft_ms"].to_numpy(dtype=float)),
                    "tpot_ms": _err_block(g["err_pct_tpot_ms"].to_numpy(dtype=float)),
                    "cliffs_measured": int(g["measured_cliff"].sum()),
                    "cliffs_predicted": int(g["pred_cliff"].sum())})
    return out


def per_request_errors(preds: list[RunPrediction]) -> dict:
    """Distribution of per-request absolute % errors, where measurements are per request."""
    out = {}
    for m in METRICS:
        errs = []
        for p in preds:
            req = p.run.requests
            if p.error or req is None or m not in req or m not in p.requests:
                continue
            meas = req[m].to_numpy(dtype=float)
            pred = p.requests[m].to_numpy(dtype=float)
            if len(pred) != len(meas):
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                e = np.abs(pred - meas) / meas * 100.0
            errs.append(e[np.isfinite(e)])
        if errs:
            e = np.concatenate(errs)
            if e.size:
                out[m] = {"n": int(e.size), "median_abs_pct": float(np.median(e)),
                          "p90_abs_pct": float(np.percentile(e, 90))}
    return out


def slo_attainment(df: pd.DataFrame, slo: dict[str, float | None]) -> float | None:
    if not any(v is not None for v in slo.values()):
        return None
    ok = np.ones(len(df), dtype=bool)
    for m, limit in slo.items():
        if limit is None or m not in df:
            continue
        vals = df[m].to_numpy(dtype=float)
        ok &= np.where(np.isnan(vals), m == "tpot_ms", vals <= limit)
    return float(ok.mean()) if len(df) else None


def paired_slo_attainment(measured: pd.DataFrame, simulated: pd.DataFrame,
                          slo: dict[str, float | None]) -> tuple[float, float] | None:
    """Measured and predicted SLO attainment over the same requests and targets.

    A request without a measured first token failed in the measurement and counts on
    neither side; a target whose metric the file does not measure is left out of both; a
    request the simulated server refused misses. A metric a request has no value for (the
    TPOT of a one-token output) passes, on each side alike.
    """
    served = measured["ttft_ms"].notna().to_numpy() if "ttft_ms" in measured else np.ones(len(measured), bool)
    if not served.any():
        return None
    meas_ok = np.ones(len(measured), dtype=bool)
    pred_ok = (simulated["status"] == "completed").to_numpy().copy()
    for m, limit in slo.items():
        if limit is None or m not in measured or not measured[m].notna().any():
            continue
        meas = measured[m].to_numpy(dtype=float)
        pred = simulated[m].to_numpy(dtype=float)
        blank = np.isnan(meas)
        meas_ok &= blank | (meas <= limit)
        pred_ok &= blank | (np.isnan(pred) & (m == "tpot_ms")) | (pred <= limit)
    return float(meas_ok[served].mean()), float(pred_ok[served].mean())


def score(measured: MeasuredSet, preds: list[RunPrediction], slo: dict[str, float | None]) -> dict:
    runs = runs_frame(preds)
    below = runs[~runs["measured_cliff"]]
    result: dict = {"kind": measured.kind, "runs": len(preds), "metrics": {}}
    for m in METRICS:
        if runs[f"measured_{m}"].notna().any():
            result["metrics"][m] = {"all": _err_block(runs[f"err_pct_{m}"].to_numpy(dtype=float)),
                                    "below_cliff": _err_block(below[f"err_pct_{m}"].to_numpy(dtype=float))}
    if measured.kind == "sweep":
        mc, pc = runs["measured_cliff"], runs["pred_cliff"]
        result["cliffs"] = {"measured": int(mc.sum()), "predicted": int(pc.sum()),
                            "both": int((mc & pc).sum()), "missed": int((mc & ~pc).sum()),
                            "false_alarms": int((~mc & pc).sum())}
        for column in BREAKDOWNS:
            parts = breakdown(runs, column)
            if parts:
                result[f"by_{column}"] = parts
    result["per_request"] = per_request_errors(preds)
    result["skipped"] = [{"run": p.run.label, "error": p.error} for p in preds if p.error]
    result["notes"] = [{"run": p.run.label, "note": p.note} for p in preds if p.note]
    flags = pd.Series([p.run.launch_flags for p in preds if p.run.launch_flags], dtype=object)
    if len(flags):  # one entry per distinct set of harness flags, with its row count
        result["launch_flags"] = [{"flags": f, "runs": int(n)} for f, n in flags.value_counts(sort=False).items()]
    # Where the runs' kernel times came from (one entry per source), for the CLI and report.
    result["kernel_times"] = sorted({k for k in runs["kernel_times"] if isinstance(k, str) and k})
    result["api_server"] = sorted({k for k in runs["api_server"] if isinstance(k, str) and k})
    if any(v is not None for v in slo.values()):
        slo_rows = []
        for p in preds:
            if p.error or p.run.requests is None:
                continue
            if len(p.run.requests) == len(p.requests):
                pair = paired_slo_attainment(p.run.requests, p.requests, slo)
            else:
                pair = (slo_attainment(p.run.requests, slo),
                        slo_attainment(p.requests[p.requests["status"] == "completed"], slo))
            meas, pred = pair if pair is not None else (None, None)
            if meas is not None and pred is not None:
                slo_rows.append({"run": p.run.label, "measured": meas, "predicted": pred,
                                 "diff_points": (pred - meas) * 100.0})
        result["slo"] = {"targets": slo, "runs": slo_rows,
                         "max_abs_diff_points": max((abs(r["diff_points"]) for r in slo_rows), default=None)}
    kv = occupancy_check(preds)
    if kv is not None:
        result["kv_occupancy"] = kv
    spread = load_consistency(preds)
    if spread is not None:
        result["consistency"] = spread
    result["per_run"] = runs.replace({np.nan: None}).to_dict(orient="records")
    return result


def prediction_table(measured: MeasuredSet, preds: list[RunPrediction]) -> pd.DataFrame:
    """The input rows unchanged, plus pred_ttft_ms, pred_tpot_ms (and pred_e2e_ms).

    A run measured per request gets each request's prediction on its row; a run known
    only by its summary (a sweep row, a bench JSON without details) gets the run's mean.
    """
    table = measured.table.copy()
    has_e2e = "e2e_ms" in table.columns or any("e2e_ms" in p.run.measured for p in preds)
    for m in METRICS:
        if m == "e2e_ms" and not has_e2e:
            continue
        vals = np.full(len(table), np.nan)
        for i, p in enumerate(preds):
            rows = np.flatnonzero(measured.row_run == i)
            if p.error or not len(rows):
                continue
            req = p.run.requests
            if req is not None and len(req) == len(rows) and m in p.requests:
                vals[rows] = p.requests[m].to_numpy(dtype=float)
            else:
                vals[rows] = p.predicted.get(m, np.nan)
        table[f"pred_{m}"] = vals
    return table

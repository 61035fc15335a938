"""The per-request CSV (arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms[,e2e_ms]): one
open-loop run per file, replayed with its exact arrivals and lengths."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.validation.measurement import (
    FIX_ROW,
    MeasuredRun,
    MeasuredSet,
    MeasurementError,
    mean_latencies,
    read_as_written,
    shown_cell,
)

PER_REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms")

# Per-request columns that must hold a value in every row: column -> (whole number?, minimum).
# An output of 0 tokens is a failed request; it is replayed as one token, as before.
_PER_REQUEST_REQUIRED = {"arrival_s": (False, -math.inf), "prompt_tokens": (True, 1),
                         "output_tokens": (True, 0)}


_LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "e2e_ms")

# Cells pandas would read as missing (NaN, NA, null, ...): a blank latency, as in vLLM's
# NaN TPOT for one-token outputs.
_MISSING_TEXT = frozenset({"nan", "-nan", "na", "n/a", "#n/a", "<na>", "null", "none"})


def _checked_columns(text: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The per-request cells (as written) made numeric, or a MeasurementError naming the first
    bad cell's line (line 1 is the header). Latencies may be blank (not scored there)."""
    out = text.copy()
    for column in (*_PER_REQUEST_REQUIRED, *(c for c in _LATENCY_COLUMNS if c in text.columns)):
        cells = text[column].str.strip()
        values = pd.to_numeric(cells, errors="coerce")
        whole, minimum = _PER_REQUEST_REQUIRED.get(column, (False, 0))
        blank = cells.eq("") | cells.str.lower().isin(_MISSING_TEXT)
        bad = (values.isna() & ~blank) | (values < minimum) | np.isinf(values)
        if column in _PER_REQUEST_REQUIRED:
            bad |= blank
        if whole:
            bad |= values.notna() & (values != values.round())
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            what = f"a whole number >= {minimum}" if whole else \
                ("a number of seconds" if column == "arrival_s" else "a number of ms >= 0, or blank")
            raise MeasurementError(f"{column} is {shown_cell(cells.iloc[i])}, expected {what}",
                                   where=f"{path}:{i + 2}", fix=FIX_ROW)
        out[column] = values.astype(np.int64) if whole else values.astype(float)
    return out


def read_per_request_csv(path: Path) -> MeasuredSet:
    df = read_as_written(path)
    missing = [c for c in PER_REQUEST_COLUMNS if c not in df.columns]
    if missing:
        raise MeasurementError(f"missing column(s) {', '.join(missing)}", where=str(path),
                               fix=f"a per-request CSV needs: {', '.join(PER_REQUEST_COLUMNS)}[,e2e_ms]")
    if df.empty:
        raise MeasurementError("the file has no rows", where=str(path),
                               fix="point to a CSV with one row per measured request")
    req = _checked_columns(df, path)
    # vLLM leaves TPOT undefined for single-token outputs.
    req.loc[req["output_tokens"] <= 1, "tpot_ms"] = np.nan
    run = MeasuredRun(label=path.stem, source=path.name, kind="trace", measured=mean_latencies(req),
                      requests=req)
    return MeasuredSet("per_request", [run], df, np.zeros(len(df), dtype=int))

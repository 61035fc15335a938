"""The per-request CSV (arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms[,e2e_ms]): one
open-loop run per file, replayed with its exact arrivals and lengths.

Optional `prefix_id` and `prefix_tokens` columns mark shared prompt text as a csv trace does
(the request's first `prefix_tokens` tokens are the text named `prefix_id`; blank or -1: none),
so a run whose clients resent the same prompts replays with the prefix cache's hits: a
benchmark that cycles through a fixed set of prompts is served mostly from cache, and
replayed without that it reads as a far heavier load (docs/fidelity.md, BLIS's runs)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.validation.measurement import (
    FIX_ROW,
    CsvCells,
    MeasuredRun,
    MeasuredSet,
    MeasurementError,
    csv_cells,
    mean_latencies,
    missing_cells,
    read_as_written,
    shown_cell,
)
from simulator.workload.traces import id_labels

PER_REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms")

# Per-request columns that must hold a value in every row: column -> (whole number?, minimum).
# An output of 0 tokens is a failed request; it is replayed as one token, as before.
_PER_REQUEST_REQUIRED = {"arrival_s": (False, -math.inf), "prompt_tokens": (True, 1),
                         "output_tokens": (True, 0)}


_LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "e2e_ms")


def _checked_columns(text: pd.DataFrame, path: Path, lines: list[int]) -> pd.DataFrame:
    """The per-request cells (as written) made numeric, or a MeasurementError naming the first
    bad cell's line (`lines`: each row's). Latencies may be blank (not scored there)."""
    out = text.copy()
    for column in (*_PER_REQUEST_REQUIRED, *(c for c in _LATENCY_COLUMNS if c in text.columns)):
        cells = text[column].str.strip()
        values = pd.to_numeric(cells, errors="coerce")
        whole, minimum = _PER_REQUEST_REQUIRED.get(column, (False, 0))
        blank = missing_cells(cells)
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
                                   where=f"{path}:{lines[i]}", fix=FIX_ROW)
        out[column] = values.astype(np.int64) if whole else values.astype(float)
    return out


def read_per_request_csv(path: Path, cells: CsvCells | None = None) -> MeasuredSet:
    """`cells`: the file's `csv_cells`, where the caller has read them."""
    cells = csv_cells(path) if cells is None else cells
    df = read_as_written(path, cells)
    missing = [c for c in PER_REQUEST_COLUMNS if c not in df.columns]
    if missing:
        raise MeasurementError(f"missing column(s) {', '.join(missing)}", where=str(path),
                               fix=f"a per-request CSV needs: {', '.join(PER_REQUEST_COLUMNS)}[,e2e_ms]")
    if df.empty:
        raise MeasurementError("the file has no rows", where=str(path),
                               fix="point to a CSV with one row per measured request")
    req = _checked_columns(df, path, cells.lines)
    req = _checked_prefix_columns(df, req, path, cells.lines)
    # vLLM leaves TPOT undefined for single-token outputs.
    req.loc[req["output_tokens"] <= 1, "tpot_ms"] = np.nan
    note = _failed_requests(req, path)  # before the means: a failed request's latencies are left out
    model_id, config_note = _server_columns(df)
    note = "; ".join(filter(None, [note, _arrival_unit_note(req), config_note])) or None
    run = MeasuredRun(label=path.stem, source=path.name, kind="trace", measured=mean_latencies(req),
                      requests=req, note=note, model_id=model_id)
    return MeasuredSet("per_request", [run], df, np.zeros(len(df), dtype=int))


# Columns that describe the server rather than the request, as a sweep CSV's do: column ->
# the scenario field a user sets instead. `model` is followed as a vLLM JSON's model_id is.
_SERVER_COLUMNS = {"system": "hardware.gpu", "gpu": "hardware.gpu", "tp_size": "parallelism.tp",
                   "precision": "model.weight_dtype"}


def _server_columns(df: pd.DataFrame) -> tuple[str | None, str | None]:
    """The model a per-request CSV's `model` column names (one value in every row), and a
    note for the server columns it carries that the replay does not follow: the base
    scenario describes the server, so the note names the field to --set instead."""
    model_id, ignored = None, []
    if "model" in df.columns:
        names = df["model"].str.strip().replace("", np.nan).dropna().unique()
        if len(names) == 1:
            model_id = str(names[0])
        elif len(names) > 1:
            ignored.append("model (model.name; it names several models)")
    ignored += [f"{c} ({field})" for c, field in _SERVER_COLUMNS.items() if c in df.columns]
    if not ignored:
        return model_id, None
    return model_id, (f"column(s) {', '.join(ignored)} not followed: the base scenario describes the server; "
                      "--set the field in brackets to match the measured one")


# Arrival gaps this many times the requests' own mean E2E (or TTFT), over at least an hour,
# are more likely milliseconds read as seconds than a benchmark that idled between requests.
_IDLE_GAP_FACTOR = 100
_IDLE_SPAN_S = 3600.0


def _arrival_unit_note(req: pd.DataFrame) -> str | None:
    """A note when `arrival_s` looks like milliseconds: the replay would spread the requests
    1,000 times apart and read an idle server."""
    if len(req) < 10:
        return None
    span = float(req["arrival_s"].max() - req["arrival_s"].min())
    latency = req["e2e_ms"] if "e2e_ms" in req.columns and req["e2e_ms"].notna().any() else req["ttft_ms"]
    typical_s = float(np.nanmean(latency.to_numpy(dtype=float))) / 1e3
    gap = span / (len(req) - 1)
    if span < _IDLE_SPAN_S or not typical_s > 0 or gap < _IDLE_GAP_FACTOR * typical_s:
        return None
    return (f"arrival_s spans {span:,.0f} s for {len(req):,} requests, a mean gap of {gap:,.0f} s against "
            f"{typical_s:,.2f} s of latency: if the column is in milliseconds, divide it by 1,000")


def _failed_requests(req: pd.DataFrame, path: Path) -> str | None:
    """Blank the latencies of requests with a TTFT of 0, and say how many there were.

    A TTFT of 0 is no first token: a failed request, as the vLLM JSON reader takes it
    (`ttfts` 0). It is still replayed, as it loaded the server as a request (an output of
    0 tokens is replayed as one), but none of its latencies is scored; a file of failed
    requests only has nothing to score."""
    failed = req["ttft_ms"].eq(0).to_numpy()
    if not failed.any():
        return None
    if failed.all():
        raise MeasurementError("every request has ttft_ms 0: no first token, all failed", where=str(path),
                               fix="check the benchmark's errors; pass a run whose requests completed")
    req.loc[failed, [c for c in _LATENCY_COLUMNS if c in req.columns]] = np.nan
    return (f"{int(failed.sum())} request(s) with ttft_ms 0 (no first token: failed) replayed for "
            "their load, their latencies not scored")


def _checked_prefix_columns(text: pd.DataFrame, req: pd.DataFrame, path: Path, lines: list[int]) -> pd.DataFrame:
    """The optional shared-prefix columns made numeric (prefix_id's labels numbered, -1 and
    prefix_tokens 0 where blank), or a MeasurementError naming the first bad cell's line."""
    if "prefix_tokens" in text.columns and "prefix_id" not in text.columns:
        raise MeasurementError("column prefix_tokens needs a prefix_id column: it says how long the shared "
                               "prefix named by prefix_id is", where=str(path),
                               fix="add a prefix_id column (equal ids mean equal prefix text), or drop prefix_tokens")
    if "prefix_id" in text.columns:  # labels, as a csv trace's: blank or -1 is none
        cells = text["prefix_id"].str.strip()
        req["prefix_id"] = np.asarray(id_labels(cells.where(~missing_cells(cells), "").tolist()), dtype=np.int64)
    if "prefix_tokens" in text.columns:
        cells = text["prefix_tokens"].str.strip()
        blank = missing_cells(cells)
        values = pd.to_numeric(cells, errors="coerce")
        bad = ~blank & (values.isna() | np.isinf(values) | (values != values.round()) | (values < 0)
                        | (values > req["prompt_tokens"]))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise MeasurementError(f"prefix_tokens is {shown_cell(cells.iloc[i])}, expected a whole number from 0 "
                                   f"to the row's prompt_tokens ({int(req['prompt_tokens'].iloc[i])}), or blank",
                                   where=f"{path}:{lines[i]}", fix=FIX_ROW)
        req["prefix_tokens"] = values.where(~blank, 0).astype(np.int64)
    return req

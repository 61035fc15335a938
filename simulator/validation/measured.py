"""Reading measured benchmark results, in the three formats users bring.

- A per-request CSV: arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,e2e_ms (one
  open-loop run per file; replayed with its exact arrivals and lengths).
- A closed-loop sweep CSV: system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms
  (one run per row: N clients with fixed lengths).
- A `vllm bench serve --save-result` JSON: per-request details when saved
  (`--save-detailed`), else the run summary (mean latencies, token totals, traffic).
- InferenceX's published aggregate (`agg_bmk.json`): read as the sweep CSV it amounts to.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.validation.inferencex_json import (
    check_near_aggregate,
    is_inferencex_aggregate,
    read_inferencex_json,
)
from simulator.validation.measurement import MeasuredSet, MeasurementError, csv_header
from simulator.validation.per_request_csv import PER_REQUEST_COLUMNS, read_per_request_csv
from simulator.validation.sweep_csv import SWEEP_COLUMNS, read_sweep_csv
from simulator.validation.vllm_json import read_vllm_json, vllm_json_documents


def parse_length_ratio(text: str | float | None) -> float | None:
    """The --length-ratio value: None for `auto`, else a ratio in (0, 1]."""
    if text is None or str(text).strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value <= 1.0:
        raise MeasurementError(f"length ratio {text} is not `auto` or a number in (0, 1]", where="--length-ratio",
                               fix="use auto (the default), 0.8 for InferenceMAX/InferenceX-style sweeps, "
                                   "or 1 for fixed lengths")
    return value


def read_measured(paths: list[Path], rounds: int = 10, length_ratio: float | str | None = None,
                  recipes: bool = True, engine_version: str | None = None) -> MeasuredSet:
    """Read one or more files (a folder means every CSV/JSON in it) into one set;
    `engine_version` is the vLLM release of sweep rows that name none (their recipe's
    script version)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(q for q in p.iterdir() if q.suffix in (".csv", ".json", ".jsonl")))
        elif p.is_file():
            files.append(p)
        else:
            raise MeasurementError("file not found", where=str(p), fix="check the path")
    if not files:
        raise MeasurementError("no measurement files found", where=", ".join(map(str, paths)),
                               fix="pass CSV or JSON files, or a folder that holds them")
    length_ratio = parse_length_ratio(length_ratio)
    sets = [s for f in files for s in _read_one(f, rounds, length_ratio, recipes, engine_version)]
    kinds = {s.kind for s in sets}
    if len(kinds) > 1:
        raise MeasurementError(f"mixed formats: {', '.join(sorted(kinds))}", where=", ".join(map(str, paths)),
                               fix="validate one kind of measurement at a time")
    runs, tables, row_run = [], [], []
    for s in sets:
        offset = len(runs)
        runs.extend(s.runs)
        t = s.table.copy()
        if s.kind != "sweep":
            t["source"] = s.runs[0].source
        tables.append(t)
        row_run.append(s.row_run + offset)
    return MeasuredSet(sets[0].kind, runs, pd.concat(tables, ignore_index=True), np.concatenate(row_run))


def _read_one(path: Path, rounds: int, length_ratio: float | None, recipes: bool,
              engine_version: str | None) -> list[MeasuredSet]:
    if path.suffix in (".json", ".jsonl"):
        docs = vllm_json_documents(path)
        if len(docs) == 1 and is_inferencex_aggregate(docs[0]):
            return [read_inferencex_json(path, docs[0], rounds, length_ratio, recipes, engine_version)]
        if len(docs) == 1:
            check_near_aggregate(docs[0], str(path))
        return read_vllm_json(path, docs)
    if path.suffix in (".yaml", ".yml"):
        raise MeasurementError("this is a YAML file, not a measurement (a per-request or sweep CSV, or a "
                               "benchmark's JSON)", where=str(path),
                               fix="pass the measured file first and a scenario as --scenario, e.g. "
                                   f"`simulate validate results.json --scenario {path}`")
    if not path.stat().st_size:
        raise MeasurementError("the file is empty", where=str(path),
                               fix=f"a per-request CSV starts with the header {','.join(PER_REQUEST_COLUMNS)}"
                               f"[,e2e_ms]; a sweep CSV with {','.join(SWEEP_COLUMNS)}")
    cols = set(csv_header(path))
    if set(SWEEP_COLUMNS) <= cols:
        return [read_sweep_csv(path, rounds, length_ratio, recipes, engine_version)]
    if set(PER_REQUEST_COLUMNS) <= cols:
        return [read_per_request_csv(path)]
    # Name what the nearer format lacks: a sweep missing tpot_ms is not a per-request file.
    sweep_missing = [c for c in SWEEP_COLUMNS if c not in cols]
    request_missing = [c for c in PER_REQUEST_COLUMNS if c not in cols]
    if cols & (set(SWEEP_COLUMNS) - set(PER_REQUEST_COLUMNS)):
        raise MeasurementError(f"a sweep CSV without column(s) {', '.join(sweep_missing)}", where=f"{path}:1",
                               fix=f"a sweep CSV needs: {','.join(SWEEP_COLUMNS)}")
    if cols & (set(PER_REQUEST_COLUMNS) - set(SWEEP_COLUMNS)):
        raise MeasurementError(f"a per-request CSV without column(s) {', '.join(request_missing)}",
                               where=f"{path}:1", fix=f"a per-request CSV needs: {','.join(PER_REQUEST_COLUMNS)}[,e2e_ms]")
    raise MeasurementError("unrecognised CSV header", where=f"{path}:1",
                           fix=f"per-request: {','.join(PER_REQUEST_COLUMNS)}[,e2e_ms]; "
                           f"sweep: {','.join(SWEEP_COLUMNS)}")

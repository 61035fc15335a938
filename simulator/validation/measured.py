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
from simulator.validation.measurement import (
    MeasuredRun,
    MeasuredSet,
    MeasurementError,
    csv_cells,
    near_misses,
)
from simulator.validation.per_request_csv import PER_REQUEST_COLUMNS, read_per_request_csv
from simulator.validation.sweep_csv import (
    SWEEP_COLUMNS,
    SWEEP_LATENCY_COLUMNS,
    missing_sweep_columns,
    read_sweep_csv,
)
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


MEASUREMENT_SUFFIXES = (".csv", ".json", ".jsonl")  # compared in lower case: RUN1.CSV is a CSV

# vLLM's SAVE_TO_PYTORCH_BENCHMARK_FORMAT writes `<name>.pytorch.json` beside each result: the
# same run as records for PyTorch's dashboard, not a result to validate.
PYTORCH_SIDE_FILE = ".pytorch.json"

# The column validation.csv names each row's file (or appended run) in, when there are several.
SOURCE_COLUMNS = ("source", "source_file", "servesim_source")


def read_measured(paths: list[Path], rounds: int = 10, length_ratio: float | str | None = None,
                  recipes: bool = True, engine_version: str | None = None) -> MeasuredSet:
    """Read one or more files (a folder means every CSV/JSON in it) into one set;
    `engine_version` is the vLLM release of sweep rows that name none (their recipe's
    script version)."""
    files: list[Path] = []
    side_files: dict[Path, list[str]] = {}  # a folder's first file -> the side files skipped there
    for p in paths:
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.is_file() and q.suffix.lower() in MEASUREMENT_SUFFIXES)
            kept = [q for q in found if not _pytorch_side_file(q)]
            if kept and len(kept) < len(found):
                side_files[kept[0]] = [q.name for q in found if _pytorch_side_file(q)]
            files.extend(kept)
        elif p.is_file():
            files.append(p)
        else:
            raise MeasurementError("file not found", where=str(p), fix="check the path")
    if not files:
        raise MeasurementError("no measurement files found", where=", ".join(map(str, paths)),
                               fix="pass CSV or JSON files, or a folder that holds them (vLLM's *.pytorch.json "
                                   "side files are not results)")
    length_ratio = parse_length_ratio(length_ratio)
    sets = []
    for f in files:
        read = _read_one(f, rounds, length_ratio, recipes, engine_version)
        if f in side_files:
            _note_side_files(read[0].runs[0], side_files[f])
        sets.extend(read)
    kinds = {s.kind for s in sets}
    if len(kinds) > 1:
        raise MeasurementError(f"mixed formats: {', '.join(sorted(kinds))}", where=", ".join(map(str, paths)),
                               fix="validate one kind of measurement at a time")
    return _joined(sets)


def _joined(sets: list[MeasuredSet]) -> MeasuredSet:
    """The sets as one, their input rows stacked. Where the rows come from several files or
    appended runs, a column names each row's: `source`, or the first of SOURCE_COLUMNS the
    rows lack, so a user's own `source` column is kept as written."""
    runs, tables, row_run = [], [], []
    for s in sets:
        row_run.append(np.where(s.row_run < 0, -1, s.row_run + len(runs)))  # -1: a row without a run
        runs.extend(s.runs)
        tables.append(s.table)
    table = pd.concat(tables, ignore_index=True)
    if len({r.source for r in runs}) > 1:
        column = next((c for c in SOURCE_COLUMNS if c not in table.columns), None)
        if column is not None:
            table[column] = [s.runs[0].source for s in sets for _ in range(len(s.table))]
    return MeasuredSet(sets[0].kind, runs, table, np.concatenate(row_run))


def _pytorch_side_file(path: Path) -> bool:
    """A `<name>.pytorch.json` that vLLM writes beside a result (any case)."""
    return path.name.lower().endswith(PYTORCH_SIDE_FILE)


def _note_side_files(run: MeasuredRun, names: list[str]) -> None:
    """Say, with the folder's first run, which side files were left out (not results)."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    note = f"skipped vLLM's PyTorch-benchmark side file(s) in its folder, not results: {shown}"
    run.note = f"{run.note}; {note}" if run.note else note


def _read_one(path: Path, rounds: int, length_ratio: float | None, recipes: bool,
              engine_version: str | None) -> list[MeasuredSet]:
    suffix = path.suffix.lower()
    if _pytorch_side_file(path):
        raise MeasurementError("this is vLLM's PyTorch-benchmark side file (SAVE_TO_PYTORCH_BENCHMARK_FORMAT), "
                               "not a benchmark result", where=str(path),
                               fix=f"pass the result beside it, {path.name[:-len(PYTORCH_SIDE_FILE)]}.json")
    if suffix in (".json", ".jsonl"):
        docs = vllm_json_documents(path)
        if len(docs) == 1 and is_inferencex_aggregate(docs[0]):
            return [read_inferencex_json(path, docs[0], rounds, length_ratio, recipes, engine_version)]
        if len(docs) == 1:
            check_near_aggregate(docs[0], str(path))
        return read_vllm_json(path, docs)
    if suffix in (".yaml", ".yml"):
        raise MeasurementError("this is a YAML file, not a measurement (a per-request or sweep CSV, or a "
                               "benchmark's JSON)", where=str(path),
                               fix="pass the measured file first and a scenario as --scenario, e.g. "
                                   f"`simulate validate results.json --scenario {path}`")
    if not path.stat().st_size:
        raise MeasurementError("the file is empty", where=str(path),
                               fix=f"a per-request CSV starts with the header {','.join(PER_REQUEST_COLUMNS)}"
                               f"[,e2e_ms]; a sweep CSV with {','.join(SWEEP_COLUMNS)}")
    cells = csv_cells(path)  # read once: the header says which reader, which takes the rows
    cols = set(cells.header)
    header = f"{path}:{cells.header_line or 1}"
    sweep_missing = missing_sweep_columns(cols)
    if not sweep_missing:
        return [read_sweep_csv(path, rounds, length_ratio, recipes, engine_version, cells)]
    if set(PER_REQUEST_COLUMNS) <= cols:
        return [read_per_request_csv(path, cells)]
    # Name what the nearer format lacks: a sweep missing its layout is not a per-request file.
    request_missing = [c for c in PER_REQUEST_COLUMNS if c not in cols]
    if cols & (set(SWEEP_COLUMNS) - set(PER_REQUEST_COLUMNS)):
        raise MeasurementError(f"a sweep CSV without column(s) {', '.join(sweep_missing)}"
                               f"{near_misses(sweep_missing, cells.header, SWEEP_COLUMNS)}", where=header,
                               fix=f"a sweep CSV needs: {','.join(SWEEP_COLUMNS)} (one of "
                                   f"{' and '.join(SWEEP_LATENCY_COLUMNS)} may be left out)")
    if cols & (set(PER_REQUEST_COLUMNS) - set(SWEEP_COLUMNS)):
        raise MeasurementError(f"a per-request CSV without column(s) {', '.join(request_missing)}"
                               f"{near_misses(request_missing, cells.header, PER_REQUEST_COLUMNS)}",
                               where=header, fix=f"a per-request CSV needs: {','.join(PER_REQUEST_COLUMNS)}[,e2e_ms]")
    raise MeasurementError("unrecognised CSV header", where=header,
                           fix=f"per-request: {','.join(PER_REQUEST_COLUMNS)}[,e2e_ms]; "
                           f"sweep: {','.join(SWEEP_COLUMNS)}")

"""What a reader of measured results returns: the runs to re-simulate, the input rows for
validation.csv, and the error a malformed file raises; cell helpers the CSV readers share."""

from __future__ import annotations

import csv
import io
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.errors import ServesimError, not_utf8
from simulator.workload.arrivals import RampArrival


class MeasurementError(ServesimError):
    """A measured-results file is missing, of an unknown format, or malformed."""


@dataclass
class MeasuredRun:
    """One measured run to re-simulate.

    kind: "trace" (exact arrivals), "closed_loop" (N clients) or "rate" (open loop at a rate).
    requests: per-request measurements (prompt_tokens, output_tokens, ttft_ms, tpot_ms,
    e2e_ms, and arrival_s for traces); None for aggregate-only rows.
    overrides: `--set` style assignments this run adds to the base scenario.
    """

    label: str
    source: str
    kind: str
    measured: dict[str, float]
    requests: pd.DataFrame | None = None
    overrides: list[str] = field(default_factory=list)
    concurrency: int | None = None
    rate: float | None = None
    burstiness: float = 1.0
    ramp: RampArrival | None = None  # vLLM --ramp-up-strategy: the rate ramp the requests were sent at
    isl: int | None = None
    osl: int | None = None
    group: str = ""  # runs that differ only in load (for cliff detection and curves)
    family: str = ""  # sweep rows: system, model and precision (errors are also broken down by it)
    model_id: str | None = None  # the model the result file names (vLLM JSON), if any
    error: str | None = None  # why this run cannot be simulated, known before simulating
    # The row proves its server held the model: if tp alone cannot, it ran attention-DP.
    infer_dp: bool = False
    note: str | None = None  # how the row's own settings were approximated, said with its result
    launch_flags: str | None = None  # the harness's server flags applied to the row (recipes.py)
    engine_version: str | None = None  # the vLLM release measured, where the file says (versions.py)
    recipe_version: str | None = None  # the release the row's harness ran, where recipes.py knows it


@dataclass
class MeasuredSet:
    kind: str  # "per_request" | "sweep" | "vllm_json"
    runs: list[MeasuredRun]
    table: pd.DataFrame  # the input rows, unchanged, for validation.csv
    row_run: np.ndarray  # for each table row, the index of its run


def mean_latencies(df: pd.DataFrame) -> dict[str, float]:
    """Each latency column's mean over the requests that measured it (blank cells left out)."""
    out = {}
    for col in ("ttft_ms", "tpot_ms", "e2e_ms"):
        if col in df:
            vals = df[col].to_numpy(dtype=float)
            vals = vals[~np.isnan(vals)]
            if vals.size:
                out[col] = float(vals.mean())
    return out


def read_text(path: Path) -> str:
    """A measurement file's text. One that is not UTF-8 (a spreadsheet's UTF-16 export, a
    binary file) is named as such rather than ending in a decoding traceback."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MeasurementError(not_utf8(exc),
                               where=str(path),
                               fix="save it as UTF-8 text (a spreadsheet's \"CSV UTF-8\" for a CSV), or pass the "
                                   "file the benchmark wrote") from None


def read_csv(path: Path, **options) -> pd.DataFrame:
    """A measurement CSV through pandas, column names as `column_name` reads them.

    A row with more filled cells than the header is refused first: pandas would take the
    extra leading cells as an index and shift every other cell of the file into the wrong
    column. Empty extra cells (a trailing comma, as some exporters write) are dropped."""
    rows = csv.reader(io.StringIO(read_text(path)))
    width = len(next(rows, []))
    for row in rows:
        if any(cell.strip() for cell in row[width:]):
            raise MeasurementError(f"{len(row)} cells under a header of {width} columns",
                                   where=f"{path}:{rows.line_num}",
                                   fix="remove the extra cells (a stray comma?), or fix the header")
    try:  # index_col=False: trailing empty cells (checked above) are not an index
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pd.errors.ParserWarning)
            df = pd.read_csv(path, encoding="utf-8-sig", index_col=False, **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise MeasurementError(f"not a readable CSV: {str(exc).strip()}", where=str(path),
                               fix="check the file's quoting and delimiters (comma-separated)") from None
    return df.rename(columns=column_name)


def read_as_written(path: Path) -> pd.DataFrame:
    """A CSV's cells as text, so validation.csv gives the input rows back unchanged (pandas
    would write 1 as 1.0 in a column with a blank cell)."""
    return read_csv(path, dtype=str, keep_default_na=False)


def column_name(header: str) -> str:
    """A header cell as the readers match it: spreadsheet exports add a byte-order mark,
    quotes, padding or capitals (`"TTFT_ms "`) that name the same column."""
    return str(header).strip().strip('"').strip().lower()


def csv_header(path: Path) -> list[str]:
    """The first line's column names, as `column_name` reads them."""
    first = next(csv.reader(io.StringIO(read_text(path))), [])
    return [column_name(c) for c in first]


FIX_ROW = "fix or drop that row"  # the fix a malformed CSV row's error names


def blank_cell(cell: object) -> bool:
    """An optional column's empty cell (pandas reads it as NaN)."""
    return cell is None or (isinstance(cell, float) and math.isnan(cell)) or not str(cell).strip()


def shown_cell(cell: object) -> str:
    """A cell as an error message quotes it."""
    return "blank" if blank_cell(cell) else repr(str(cell).strip())

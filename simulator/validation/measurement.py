"""What a reader of measured results returns: the runs to re-simulate, the input rows for
validation.csv, and the error a malformed file raises; cell helpers the CSV readers share."""

from __future__ import annotations

import csv
import difflib
import io
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

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
    layout: str = ""  # sweep rows: tensor parallelism and any other layout columns ("tp8", "tp4 dp2")
    lengths: str = ""  # sweep rows: "isl/osl"
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
    row_run: np.ndarray  # for each table row, the index of its run (-1: none, a failed request)


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


class CsvCells(NamedTuple):
    """A measurement CSV's cells: the header (as `column_name` reads it) and the data rows,
    with the file line each stands on (blank lines and all-blank rows skipped)."""

    header: list[str]
    header_line: int
    rows: list[list[str]]
    lines: list[int]


def csv_cells(path: Path) -> CsvCells:
    """A measurement CSV read as the readers see it, or a MeasurementError naming the line.

    Spreadsheet exports add blank lines and rows of empty cells (`,,,,`), and scripts a
    `# comment` line (no model, GPU or number starts with `#`): those are skipped, before
    the header too. A header of one cell holding tabs or semicolons is a file in
    another delimiter. Two header cells that name one column, and `pred_*` columns (the
    names validation.csv adds), are refused. A row with more filled cells than the header
    is refused: pandas would take the extra leading cells as an index and shift every
    other cell into the wrong column; empty extra cells (a trailing comma) are dropped."""
    reader = csv.reader(io.StringIO(read_text(path)), strict=True)
    try:
        kept = [(reader.line_num, row) for row in reader
                if any(cell.strip() for cell in row) and not row[0].lstrip().startswith("#")]
    except csv.Error as exc:  # an unclosed quote, a character after a closing one
        raise MeasurementError(f"not a readable CSV: {exc}", where=f"{path}:{reader.line_num}",
                               fix="check the file's quoting and delimiters (comma-separated)") from None
    if not kept:
        return CsvCells([], 0, [], [])
    (header_line, raw), body = kept[0], kept[1:]
    _check_delimiter(raw, path, header_line)
    header = [column_name(c) for c in raw]
    _check_header(raw, header, path, header_line)
    width = len(header)
    for line, row in body:
        if any(cell.strip() for cell in row[width:]):
            raise MeasurementError(f"{len(row)} cells under a header of {width} columns", where=f"{path}:{line}",
                                   fix="remove the extra cells (a stray comma?), or fix the header")
    return CsvCells(header, header_line, [row[:width] for _, row in body], [line for line, _ in body])


def _check_delimiter(raw: list[str], path: Path, line: int) -> None:
    """A header that is one cell holding tabs or semicolons: the file is not comma-separated
    (a spreadsheet's tab-delimited export, or a locale whose list separator is `;`)."""
    if len(raw) == 1 and (sep := next((s for s in ("\t", ";") if s in raw[0]), None)):
        name = "tabs" if sep == "\t" else "semicolons"
        raise MeasurementError(f"the header is one cell separated by {name}: the file is not comma-separated",
                               where=f"{path}:{line}",
                               fix="save it as comma-separated CSV (a spreadsheet's \"CSV UTF-8 (comma "
                                   "delimited)\"), with `.` as the decimal point")


def _check_header(raw: list[str], header: list[str], path: Path, line: int) -> None:
    """Refuse header cells that read as one column (`ttft_ms` and `TTFT_ms`: which one holds
    the measurement?) and input columns named `pred_*`, which validation.csv adds itself."""
    seen: dict[str, str] = {}
    for cell, name in zip(raw, header, strict=True):
        if name.startswith("pred_"):
            raise MeasurementError(f"column {cell.strip()!r}: pred_* columns are the predictions "
                                   "validation.csv adds", where=f"{path}:{line}",
                                   fix="drop or rename the pred_* columns (a validation.csv: validate the "
                                       "measured file it was written from)")
        if name and name in seen:
            raise MeasurementError(f"header cells {seen[name]!r} and {cell!r} both name column {name}",
                                   where=f"{path}:{line}", fix="rename or drop one of them")
        seen[name] = cell


# Header words that other tools use for a measurement column.
_COLUMN_SYNONYMS = {"system": ("gpu", "hardware", "hw", "device"), "concurrency": ("conc", "clients", "batch"),
                    "isl": ("input", "prompt"), "osl": ("output", "generation"), "tp_size": ("tp",),
                    "arrival_s": ("arrival", "timestamp"), "prompt_tokens": ("input", "prompt"),
                    "output_tokens": ("output", "generated")}


def near_misses(missing: list[str], columns, known: tuple[str, ...]) -> str:
    """` (is mean_ttft_ms for ttft_ms? ...)` for missing columns the header spells another
    way (`mean_ttft_ms`, `tp`, `gpu`, `input_len`), else nothing."""
    present = [str(c) for c in columns if c not in known]
    guesses = []
    for column in missing:
        words = {column.removesuffix("_ms").removesuffix("_size").removesuffix("_s"), column,
                 *_COLUMN_SYNONYMS.get(column, ())}
        close = [c for c in present if words & set(c.split("_"))] or \
            difflib.get_close_matches(column, present, n=1, cutoff=0.6)
        guesses += [f"{close[0]} for {column}"] if close else []
    return f" (is {', '.join(guesses)}? rename the header cell)" if guesses else ""


def read_csv(path: Path, cells: CsvCells | None = None, **options) -> pd.DataFrame:
    """A measurement CSV's rows (`csv_cells`: `cells`, where the caller has read them)
    through pandas, column names as `column_name` reads them; row i stands on line
    `cells.lines[i]`."""
    cells = csv_cells(path) if cells is None else cells
    text = io.StringIO()
    csv.writer(text).writerows([cells.header, *cells.rows])
    text.seek(0)
    try:  # index_col=False: rows shorter than the header are filled, not shifted
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pd.errors.ParserWarning)
            df = pd.read_csv(text, index_col=False, **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise MeasurementError(f"not a readable CSV: {str(exc).strip()}", where=str(path),
                               fix="check the file's quoting and delimiters (comma-separated)") from None
    return df.rename(columns=column_name)


def read_as_written(path: Path, cells: CsvCells | None = None) -> pd.DataFrame:
    """A CSV's cells as text, so validation.csv gives the input rows back unchanged (pandas
    would write 1 as 1.0 in a column with a blank cell), and identifiers (a release `0.10`)
    are read as written."""
    return read_csv(path, cells, dtype=str, keep_default_na=False)


def column_name(header: str) -> str:
    """A header cell as the readers match it: spreadsheet exports add a byte-order mark,
    quotes, padding or capitals (`"TTFT_ms "`) that name the same column."""
    return str(header).strip().strip('"').strip().lower()


FIX_ROW = "fix or drop that row"  # the fix a malformed CSV row's error names

# Cells pandas would read as missing (NaN, NA, null, ...): a blank latency, as in vLLM's
# NaN TPOT for one-token outputs, or an unnamed release.
MISSING_TEXT = frozenset({"nan", "-nan", "na", "n/a", "#n/a", "<na>", "null", "none"})


def blank_cell(cell: object) -> bool:
    """An optional column's empty cell (pandas reads it as NaN)."""
    return cell is None or (isinstance(cell, float) and math.isnan(cell)) or not str(cell).strip()


def missing_cell(cell: object) -> bool:
    """A cell as written that says nothing: blank, or a missing-value word (`N/A`, `NaN`)."""
    return blank_cell(cell) or str(cell).strip().lower() in MISSING_TEXT


def missing_cells(cells: pd.Series) -> pd.Series:
    """`missing_cell` over a column of stripped text cells."""
    return cells.eq("") | cells.str.lower().isin(MISSING_TEXT)


def shown_cell(cell: object) -> str:
    """A cell as an error message quotes it."""
    return "blank" if blank_cell(cell) else repr(str(cell).strip())

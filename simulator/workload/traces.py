"""Trace files: plain CSV, Azure LLM inference, BurstGPT and Mooncake formats, read into
arrival times and lengths with file:line errors."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import IO, Any

import numpy as np

from simulator.errors import TraceError


@dataclass(frozen=True, eq=False)
class Trace:
    """A parsed trace file: sorted by arrival (stable), first arrival rebased to t = 0."""

    path: Path
    format: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    session_id: np.ndarray | None = None
    prefix_id: np.ndarray | None = None
    hash_ids: tuple[tuple[int, ...], ...] | None = None
    skipped_rows: int = 0
    prefix_tokens: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.arrival_s.size)


@dataclass
class _Rows:
    """Columns accumulated row by row while parsing (plain lists: appending is cheap)."""

    arrival: list[float]
    prompt: list[int]
    output: list[int]
    session: list[int] | None = None
    prefix: list[int] | None = None
    hashes: list[tuple[int, ...]] | None = None
    skipped: int = 0
    prefix_tokens: list[int] | None = None

    def failed(self, prompt: int, output: int) -> bool:
        """Whether a public trace's row is a failed request (0 prompt or output tokens, as
        Azure, BurstGPT and Mooncake log one): counted and left out, not a stop for the file."""
        if prompt and output:
            return False
        self.skipped += 1
        return True


TraceParse = Callable[[Path, str], _Rows]


@dataclass(frozen=True)
class TraceParser:
    """One trace format: its parser and, for CSV formats, the header columns it needs
    (also how ``format: auto`` recognises it)."""

    parse: TraceParse
    columns: tuple[str, ...] = ()


def resolve_path(path: str, base_dir: Path | None, field: str) -> Path:
    """Resolve a user path against the scenario's folder and check that it is a file."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    if not p.is_file():
        where_from = (
            f"the scenario's folder {base_dir}" if base_dir is not None else "the working directory"
        )
        raise TraceError(
            f"file not found: {p}" if not p.exists() else f"not a file: {p}",
            where=field,
            fix=f"check the path; a relative path is resolved against {where_from}",
        )
    return p


#: Where a trace row is: (file label, 1-based line). The "file:line" text is only built
#: when an error is raised, which keeps the per-row cost of large traces low.
Loc = tuple[str, int]

_FIX_ROW = "fix or remove this row"


def _where(loc: Loc) -> str:
    return f"{loc[0]}:{loc[1]}"


def _number(text: str, column: str, loc: Loc) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise TraceError(
            f"column {column!r} has {text.strip()!r}, expected a number",
            where=_where(loc),
            fix=_FIX_ROW,
        )
    return value


# The largest token count a trace cell may hold: 2**53, where floats stop being exact.
MAX_TOKENS = 2**53


def _tokens(text: str | float, column: str, loc: Loc, minimum: int = 1) -> int:
    """A whole token count >= ``minimum`` ("12" and "12.0" are accepted)."""
    try:
        value = int(text)  # str or an already-checked whole float
    except ValueError:
        f = _number(str(text), column, loc)
        if not f.is_integer():
            raise TraceError(
                f"column {column!r} has {str(text).strip()!r}, expected a whole number of tokens",
                where=_where(loc),
                fix=_FIX_ROW,
            ) from None
        value = int(f)
    if value < minimum:
        raise TraceError(
            f"column {column!r} is {value}; token counts must be >= {minimum}",
            where=_where(loc),
            fix=f"{_FIX_ROW} (every request needs at least one prompt and one output token)",
        )
    if value > MAX_TOKENS:  # past any context window, and past what int64 arrays hold
        raise TraceError(
            f"column {column!r} is {value}, more tokens than any model takes (at most {MAX_TOKENS:,})",
            where=_where(loc),
            fix=_FIX_ROW,
        )
    return value


def id_labels(cells: list[str]) -> list[int]:
    """An optional id column as integers, blank or -1 meaning "none" (-1). Ids are labels,
    compared for equality only: a column of whole numbers in 0 .. 2**63 - 1 keeps their values;
    any other column (a conversation's UUID, `conv-a1b2`, a signed or 64-bit unsigned hash)
    numbers its distinct labels in order of appearance."""
    texts = [c.strip() for c in cells]
    none = ("", "-1")
    try:
        values = [int(t) if t not in none else -1 for t in texts]
        if all(-1 <= v < 2**63 for v in values):
            return values
    except ValueError:
        pass
    numbered: dict[str, int] = {}
    return [numbered.setdefault(t, len(numbered)) if t not in none else -1 for t in texts]


def _csv_header(reader: Any, label: str, fmt: str, required: tuple[str, ...],
                fix: str = "fix the header row, or set workload.arrival.format to the file's format") -> dict[str, int]:
    """Read the header row; return column name -> index, or explain what is missing."""
    header = next(reader, None)
    while header is not None and not any(c.strip() for c in header):
        header = next(reader, None)
    if header is None:
        raise TraceError("the file is empty", where=label, fix="point to a non-empty trace")
    names = [name.strip() for name in header]
    repeated = sorted({n for n in names if n and names.count(n) > 1})
    if repeated:  # which copy is meant? reading either would be a guess
        raise TraceError(
            f"column(s) {', '.join(repeated)} appear more than once in the header",
            where=_where((label, reader.line_num)),
            fix="keep one column of each name",
        )
    cols = {name: i for i, name in enumerate(names)}
    missing = [c for c in required if c not in cols]
    if missing:
        raise TraceError(
            f"missing column(s) {', '.join(missing)} for format {fmt!r}; expected columns "
            f"{', '.join(required)}; found {', '.join(cols) or 'none'}",
            where=_where((label, reader.line_num)),
            fix=fix,
        )
    return cols


def _csv_rows(reader: Any, label: str, width: int) -> Iterator[tuple[Loc, list[str]]]:
    """Yield (location, fields) per non-empty data row, checking it is wide enough."""
    for row in reader:
        if not any(row) or (len(row) == 1 and not row[0].strip()):  # a blank line
            continue
        if len(row) < width:
            raise TraceError(
                f"row has {len(row)} fields, the header needs at least {width}",
                where=_where((label, reader.line_num)),
                fix=_FIX_ROW,
            )
        yield (label, reader.line_num), row


def _open_text(path: Path) -> IO[str]:
    # utf-8-sig drops a byte-order mark that spreadsheet exports put before the header.
    return path.open(newline="", encoding="utf-8-sig")


def _parse_plain_csv(path: Path, label: str) -> _Rows:
    required = ("arrival_s", "prompt_tokens", "output_tokens")
    with _open_text(path) as f:
        reader = csv.reader(f)
        cols = _csv_header(reader, label, "csv", required)
        ia, ip, io = (cols[c] for c in required)
        isess, ipre = cols.get("session_id"), cols.get("prefix_id")
        iptok = cols.get("prefix_tokens")
        if iptok is not None and ipre is None:
            raise TraceError(
                "column 'prefix_tokens' needs a 'prefix_id' column: it says how long the shared "
                "prefix named by prefix_id is",
                where=_where((label, reader.line_num)),
                fix="add a prefix_id column (equal ids mean equal prefix text), or drop prefix_tokens",
            )
        out = _Rows(
            [],
            [],
            [],
            session=[] if isess is not None else None,
            prefix=[] if ipre is not None else None,
            prefix_tokens=[] if iptok is not None else None,
        )
        used = [i for i in (ia, ip, io, isess, ipre, iptok) if i is not None]
        for loc, row in _csv_rows(reader, label, max(used) + 1):
            out.arrival.append(_number(row[ia], "arrival_s", loc))
            out.prompt.append(_tokens(row[ip], "prompt_tokens", loc))
            out.output.append(_tokens(row[io], "output_tokens", loc))
            if out.session is not None:
                out.session.append(row[isess])
            if out.prefix is not None:
                out.prefix.append(row[ipre])
            if out.prefix_tokens is not None:
                text = row[iptok].strip()
                shared = _tokens(text, "prefix_tokens", loc, minimum=0) if text else 0  # 0: none shared
                if shared > out.prompt[-1]:  # the prefix is the prompt's first prefix_tokens tokens
                    raise TraceError(f"prefix_tokens {shared} is longer than the row's prompt ({out.prompt[-1]} "
                                     "tokens)", where=_where(loc),
                                     fix="give prefix_tokens as the shared start of the prompt, at most prompt_tokens")
                out.prefix_tokens.append(shared)
    if out.session is not None:
        out.session = id_labels(out.session)
    if out.prefix is not None:
        out.prefix = id_labels(out.prefix)
    return out


_AZURE_TIME = re.compile(
    r"\s*(\d{4}-\d{2}-\d{2})[ T](\d{1,2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"\s*(?:Z|([+-])(\d{2}):?(\d{2}))?\s*$"
)


def _azure_seconds(text: str, days: dict[str, int], loc: Loc) -> tuple[int, float]:
    """Parse ``2023-11-16 18:15:46.6805900`` (7 fractional digits, which datetime cannot
    read on Python 3.10) into (whole seconds since 0001-01-01 UTC, fraction); exact to
    the last digit. An optional ``Z`` or ``+hh:mm`` suffix is honoured."""
    m = _AZURE_TIME.match(text)
    day = None
    if m is not None:
        ymd, hh, mm, ss, digits, sign, oh, om = m.groups()
        day = days.get(ymd)
        if day is None:
            try:
                day = days[ymd] = date.fromisoformat(ymd).toordinal()
            except ValueError:
                day = None
    if m is not None and not (int(hh) < 24 and int(mm) < 60 and int(ss) <= 60):  # 60: a leap second
        day = None
    if m is None or day is None:
        raise TraceError(
            f"column 'TIMESTAMP' has {text.strip()!r}, expected a time like "
            "'2023-11-16 18:15:46.6805900'",
            where=_where(loc),
            fix=_FIX_ROW,
        )
    whole = day * 86400 + int(hh) * 3600 + int(mm) * 60 + int(ss)
    if sign:  # local time with a UTC offset: convert to UTC
        offset = int(oh) * 3600 + int(om) * 60
        whole -= offset if sign == "+" else -offset
    return whole, int(digits) / 10 ** len(digits) if digits else 0.0


def _parse_azure(path: Path, label: str) -> _Rows:
    required = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
    whole: list[int] = []
    out = _Rows([], [], [])
    days: dict[str, int] = {}
    with _open_text(path) as f:
        reader = csv.reader(f)
        cols = _csv_header(reader, label, "azure", required)
        it, ip, io = (cols[c] for c in required)
        for loc, row in _csv_rows(reader, label, max(it, ip, io) + 1):
            sec, frac = _azure_seconds(row[it], days, loc)
            prompt = _tokens(row[ip], "ContextTokens", loc, minimum=0)
            output = _tokens(row[io], "GeneratedTokens", loc, minimum=0)
            if out.failed(prompt, output):
                continue
            whole.append(sec)
            out.arrival.append(frac)
            out.prompt.append(prompt)
            out.output.append(output)
    if whole:
        # Subtract whole seconds as integers first: absolute epoch floats would lose the
        # sub-microsecond digits.
        rel = np.asarray(whole, dtype=np.int64) - whole[0]
        out.arrival = (rel + np.asarray(out.arrival, dtype=np.float64)).tolist()
    return out


def _parse_burstgpt(path: Path, label: str) -> _Rows:
    required = ("Timestamp", "Request tokens", "Response tokens")
    out = _Rows([], [], [])
    with _open_text(path) as f:
        reader = csv.reader(f)
        cols = _csv_header(reader, label, "burstgpt", required)
        it, ip, io = (cols[c] for c in required)
        for loc, row in _csv_rows(reader, label, max(it, ip, io) + 1):
            ts = _number(row[it], "Timestamp", loc)
            request = _tokens(row[ip], "Request tokens", loc, minimum=0)
            response = _tokens(row[io], "Response tokens", loc, minimum=0)
            if out.failed(request, response):
                continue
            out.arrival.append(ts)
            out.prompt.append(request)
            out.output.append(response)
    return out


def _json_number(obj: dict, key: str, loc: Loc) -> float:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TraceError(
            f"{key!r} is {json.dumps(value)}, expected a number",
            where=_where(loc),
            fix="fix or remove this line",
        )
    return float(value)


def _parse_mooncake(path: Path, label: str) -> _Rows:
    required = ("timestamp", "input_length", "output_length")
    out = _Rows([], [], [], prefix=[], hashes=[])
    any_hashes = False
    json_fix = "each line must be one JSON object"
    with path.open(encoding="utf-8-sig") as f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            loc = (label, line_no)
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as e:
                raise TraceError(
                    f"invalid JSON ({e.msg}, column {e.colno})", where=_where(loc), fix=json_fix
                ) from None
            if not isinstance(obj, dict):
                raise TraceError("line is not a JSON object", where=_where(loc), fix=json_fix)
            missing = [k for k in required if k not in obj]
            if missing:
                raise TraceError(
                    f"missing key(s) {', '.join(missing)}; expected keys "
                    f"{', '.join(required)}[, hash_ids]",
                    where=_where(loc),
                    fix="fix this line, or set workload.arrival.format to the file's format",
                )
            arrival = _json_number(obj, "timestamp", loc) / 1000.0  # ms -> s
            lengths = []
            for key in ("input_length", "output_length"):
                value = _json_number(obj, key, loc)
                if not value.is_integer():
                    raise TraceError(
                        f"{key!r} is {value}, expected a whole number of tokens",
                        where=_where(loc),
                        fix="fix or remove this line",
                    )
                lengths.append(_tokens(value, key, loc, minimum=0))
            if out.failed(*lengths):
                continue
            out.arrival.append(arrival)
            out.prompt.append(lengths[0])
            out.output.append(lengths[1])
            hashes = obj.get("hash_ids", [])
            if not isinstance(hashes, list) or not all(
                isinstance(h, int) and not isinstance(h, bool) and -(2**63) <= h < 2**63 for h in hashes
            ):
                raise TraceError(
                    "'hash_ids' must be a list of 64-bit integers",
                    where=_where(loc),
                    fix="fix or remove this line",
                )
            any_hashes = any_hashes or "hash_ids" in obj
            out.hashes.append(tuple(hashes))
            out.prefix.append(hashes[0] if hashes else -1)
    if not any_hashes:
        out.hashes = out.prefix = None
    return out


#: Trace format name (as in ``workload.arrival.format``) -> parser. Register new formats
#: here; ``format: auto`` tries the CSV ones in this order by their header columns.
TRACE_PARSERS: dict[str, TraceParser] = {
    "csv": TraceParser(_parse_plain_csv, ("arrival_s", "prompt_tokens", "output_tokens")),
    "azure": TraceParser(_parse_azure, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")),
    "burstgpt": TraceParser(_parse_burstgpt, ("Timestamp", "Request tokens", "Response tokens")),
    "mooncake": TraceParser(_parse_mooncake),
}


def sniff_trace_format(path: Path, label: str | None = None) -> str:
    """Guess a trace's format: JSON lines are Mooncake; CSVs are told apart by header."""
    label = label or str(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "mooncake"
    with _open_text(path) as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            if line.lstrip().startswith("{"):
                return "mooncake"
            if line.lstrip().startswith("["):
                raise TraceError("a JSON array: a JSON trace is one object per line (JSON Lines, as "
                                 "Mooncake's traces are written)", where=_where((label, line_no)),
                                 fix="write one {\"timestamp\": ..., \"input_length\": ..., \"output_length\": ...} "
                                     "object per line (e.g. jq -c '.[]' FILE > FILE.jsonl)")
            header = {c.strip() for c in next(csv.reader([line]))}
            csv_formats = {n: p.columns for n, p in TRACE_PARSERS.items() if p.columns}
            for name, columns in csv_formats.items():
                if set(columns) <= header:
                    return name
            # A partial match is most likely that format with a column misspelt or missing.
            best = max(csv_formats, key=lambda n: len(header & set(csv_formats[n])))
            missing = [c for c in csv_formats[best] if c not in header]
            if len(missing) < len(csv_formats[best]):
                raise TraceError(
                    f"missing column(s) {', '.join(missing)} for format {best!r}; expected "
                    f"columns {', '.join(csv_formats[best])}",
                    where=_where((label, line_no)),
                    fix="fix the header row, or set workload.arrival.format to the file's format",
                )
            known = "; ".join(f"{n}: {','.join(c)}" for n, c in csv_formats.items())
            raise TraceError(
                f"cannot tell the trace format from the header {line.strip()!r}",
                where=_where((label, line_no)),
                fix=f"set workload.arrival.format, or use one of these headers: {known}; "
                "or JSON lines (mooncake)",
            )
    raise TraceError("the file is empty", where=label, fix="point to a non-empty trace")


def read_trace(path: Path | str, fmt: str = "auto", *, label: str | None = None) -> Trace:
    """Parse a trace file into arrays: sorted by time (stable), first arrival at t = 0.

    Out-of-order timestamps are sorted, not rejected (real logs are often written by
    several workers). ``label`` names the file in error messages (default: the path).
    """
    path = Path(path)
    label = label or str(path)
    if not path.is_file():
        raise TraceError(
            f"file not found: {path}",
            where=label,
            fix="check the path; a relative path is resolved against the scenario file's folder",
        )
    try:
        if fmt == "auto":
            fmt = sniff_trace_format(path, label)
        if fmt not in TRACE_PARSERS:
            raise TraceError(
                f"unknown trace format {fmt!r}",
                where=label,
                fix=f"use one of: auto, {', '.join(TRACE_PARSERS)}",
            )
        rows = TRACE_PARSERS[fmt].parse(path, label)
    except UnicodeDecodeError as e:
        raise TraceError(
            f"not a UTF-8 text file ({e.reason} at byte {e.start})",
            where=label,
            fix="point to the CSV/JSONL trace itself (decompress it first if needed)",
        ) from None
    if not rows.arrival:
        extra = f" ({rows.skipped} failed requests skipped)" if rows.skipped else ""
        raise TraceError(
            f"the trace has no requests{extra}", where=label, fix="point to a non-empty trace"
        )

    arrival = np.asarray(rows.arrival, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    arrival = arrival[order]
    arrival -= arrival[0]

    def column(values: list[int] | None) -> np.ndarray | None:
        return None if values is None else np.asarray(values, dtype=np.int64)[order]

    hashes = None
    if rows.hashes is not None:
        hashes = tuple(rows.hashes[i] for i in order.tolist())
    return Trace(
        path=path,
        format=fmt,
        arrival_s=arrival,
        prompt_tokens=column(rows.prompt),
        output_tokens=column(rows.output),
        session_id=column(rows.session),
        prefix_id=column(rows.prefix),
        hash_ids=hashes,
        skipped_rows=rows.skipped,
        prefix_tokens=column(rows.prefix_tokens),
    )


def read_length_column(path: Path | str, column: str, *, label: str | None = None) -> np.ndarray:
    """Read one column of whole token counts (each >= 1) from a CSV with a header row."""
    path = Path(path)
    label = label or str(path)
    try:
        with _open_text(path) as f:
            reader = csv.reader(f)
            cols = _csv_header(reader, label, "csv", (column,),
                               fix="set the length distribution's `column` to one of the columns found")
            ic = cols[column]
            values = [
                _tokens(row[ic], column, loc) for loc, row in _csv_rows(reader, label, ic + 1)
            ]
    except UnicodeDecodeError as e:
        raise TraceError(
            f"not a UTF-8 text file ({e.reason} at byte {e.start})",
            where=label,
            fix="point to a CSV file",
        ) from None
    if not values:
        raise TraceError(
            f"column {column!r} has no values", where=label, fix="point to a non-empty CSV"
        )
    return np.asarray(values, dtype=np.int64)

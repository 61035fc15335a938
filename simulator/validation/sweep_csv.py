"""The closed-loop sweep CSV (system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,
tpot_ms, plus optional layout, engine and version columns): one run per row."""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from simulator.errors import CatalogError
from simulator.hardware import get_gpu
from simulator.models import get_model
from simulator.validation.lengths import harness_length_ratio, length_overrides
from simulator.validation.measurement import (
    FIX_ROW,
    CsvCells,
    MeasuredRun,
    MeasuredSet,
    MeasurementError,
    blank_cell,
    csv_cells,
    missing_cell,
    near_misses,
    read_as_written,
    read_csv,
    shown_cell,
)
from simulator.validation.precision import (
    PRECISIONS,
    UNSTATED_PRECISIONS,
    accepted_precisions,
    canonical_precision,
    checkpoint_precision,
    checkpoint_token_precision,
    precision_overrides,
)
from simulator.validation.recipes import launch_recipe
from simulator.validation.versions import VERSION_COLUMNS

SWEEP_COLUMNS = ("system", "model", "precision", "tp_size", "isl", "osl", "concurrency",
                 "ttft_ms", "tpot_ms")
SWEEP_LATENCY_COLUMNS = ("ttft_ms", "tpot_ms")


# Optional sweep columns for layouts beyond tp_size (aiconfigurator's names and short ones):
# column -> (scenario field, group label prefix). `concurrency` stays the total client count.
SWEEP_LAYOUT_COLUMNS = {"pp_size": ("parallelism.pp", "pp"), "dp_size": ("parallelism.dp", "dp"),
                        "attention_dp_size": ("parallelism.dp", "dp")}


# Expert-parallel sizes: above 1, the row runs with vLLM's --enable-expert-parallel.
SWEEP_EP_COLUMNS = ("moe_ep_size", "ep_size")


def read_sweep_csv(path: Path, rounds: int, length_ratio: float | None = None,
                   recipes: bool = True, default_version: str | None = None,
                   cells: CsvCells | None = None) -> MeasuredSet:
    """One closed-loop run per row; `length_ratio` None picks it per row (harness_length_ratio).
    With `recipes`, a row of a known harness (its length grid, model, GPU and precision) also
    gets that harness's server flags, release and length spread (recipes.py), as its script
    stood at the row's release (`default_version` for rows that name none)."""
    check_rounds(rounds)
    cells = csv_cells(path) if cells is None else cells  # `cells`: where the caller has read them
    df = read_csv(path, cells)
    missing = missing_sweep_columns(df.columns)
    if missing:
        raise MeasurementError(f"missing column(s) {', '.join(missing)}{near_misses(missing, df.columns, SWEEP_COLUMNS)}",
                               where=str(path), fix=f"a sweep CSV needs: {', '.join(SWEEP_COLUMNS)} (one of "
                                                    f"{' and '.join(SWEEP_LATENCY_COLUMNS)} may be left out)")
    for column in SWEEP_LATENCY_COLUMNS:  # a latency not measured is not scored, as a blank cell
        if column not in df.columns:
            df[column] = np.nan
    if df.empty:
        raise MeasurementError("the file has no rows", where=str(path),
                               fix="point to a CSV with one row per measured configuration and concurrency")
    return sweep_set(df, path.name, [f"{path}:{line}" for line in cells.lines], rounds, length_ratio,
                     recipes, read_as_written(path, cells), default_version=default_version,
                     row_numbers=cells.lines)


def missing_sweep_columns(columns) -> list[str]:
    """The sweep columns a header lacks; one of the two latencies may be left out (that
    metric is not scored), not both."""
    present = set(columns)
    latency_given = bool(present & set(SWEEP_LATENCY_COLUMNS))
    return [c for c in SWEEP_COLUMNS if c not in present and not (latency_given and c in SWEEP_LATENCY_COLUMNS)]


def check_rounds(rounds: int) -> None:
    """Refuse a --rounds below 1, else every row fails later, blaming the scenario's workload."""
    if rounds < 1:
        raise MeasurementError(f"rounds {rounds} is not a whole number >= 1", where="--rounds",
                               fix="give each client at least one request (the default is 10)")


def sweep_set(df: pd.DataFrame, source: str, wheres: list[str], rounds: int, length_ratio: float | None,
              recipes: bool, table: pd.DataFrame, skipped: dict[int, MeasurementError] | None = None,
              first_row: int = 2, default_version: str | None = None,
              row_numbers: list[int] | None = None) -> MeasuredSet:
    """The runs of a sweep's rows (`wheres`: each row's place, for its errors; `skipped`: rows
    known not to be simulatable, by index, with the reason; `table`: the rows as written,
    whose names and releases are read as text (a release `0.10` is not the number 0.1);
    `row_numbers`: the number each row is labelled with, its line in a CSV, else counted
    from `first_row`; `default_version`: the vLLM release of rows that name none,
    --engine-version).

    A row's family (system, model, precision) and configuration group are keyed on the
    catalog's GPU and model, so `h200_sxm` and `H200` rows are one family, shown as the
    file first spells it; a row's release, where the file names one, is part of its group:
    runs of another release are another configuration."""
    skipped = skipped or {}
    row_numbers = row_numbers or list(range(first_row, first_row + len(df)))
    runs = []
    unreadable: list[MeasurementError] = []
    spellings: dict[tuple[str, str, str | None], tuple[str, str]] = {}
    for i, (row, text) in enumerate(zip(df.itertuples(index=False), table.itertuples(index=False), strict=True)):
        where = wheres[i]
        if i in skipped:
            runs.append(_unread_row(f"row {row_numbers[i]}", source, skipped[i]))
            continue
        try:
            _check_colocated(text, df.columns, where)
            system, model = (_name_cell(getattr(text, c), c, where) for c in ("system", "model"))
            conc, isl, osl, tp = (_whole_cell(getattr(row, c), c, where)
                                  for c in ("concurrency", "isl", "osl", "tp_size"))
            latencies = {c: _latency_cell(getattr(row, c), c, where) for c in ("ttft_ms", "tpot_ms")}
            layout = _row_layout(row, df.columns, where)
        except MeasurementError as exc:
            # One unreadable row among readable ones is reported and skipped, as an unknown
            # model is; a file with no readable row is an error (below).
            unreadable.append(exc)
            runs.append(_unread_row(f"row {row_numbers[i]}", source, exc))
            continue
        prec, precision_note = _row_precision(text.precision, model)
        other_engine = _other_engine(text, df.columns)
        # One spelling per GPU, model and precision: checkpoints of one model in two formats
        # (`...-BF16`, `...-FP8`) keep their own names.
        shown_system, shown_model = spellings.setdefault((*_catalog_key(system, model), prec), (system, model))
        family = (f"{shown_system} {shown_model} {prec or str(text.precision).strip()}"
                  f"{f' {other_engine}' if other_engine else ''}")
        measured = {c: ms for c, ms in latencies.items() if ms}
        zeros = [c for c, ms in latencies.items() if ms == 0]
        release = _row_version(text, df.columns)
        parallel = f"tp{tp}{''.join(f' {label}' for label in layout.labels)}"
        group = f"{family} {parallel} isl{isl} osl{osl}{_release_label(release)}"
        zero_note = (f"{' and '.join(zeros)} 0, which no server measures (a failed run?): not scored"
                     if zeros else None)
        note = "; ".join(filter(None, [_expert_parallel_note(layout, tp, model), precision_note, zero_note])) or None
        if other_engine:  # its version is not a vLLM release, and vLLM's recipes are not its flags
            note = "; ".join(filter(None, [note, f"measured on {other_engine}, simulated with the base "
                                                 "scenario's scheduler, without vLLM's release rules or recipes"]))
        overrides, error, recipe = [], None, None
        version = None if other_engine else (release or default_version)
        if prec is None:  # one row we cannot map is reported and skipped, like an unknown model
            error = MeasurementError(f"unknown precision {str(text.precision).strip()!r}", where=where,
                                     fix=f"use one of: {', '.join(accepted_precisions())}, "
                                         "or leave it blank for the checkpoint's own").render()
        else:
            overrides = [
                f"model.name={model}", "model.config_json=null",
                *precision_overrides(prec, model, system),
                f"hardware.gpu={system}", f"parallelism.tp={tp}",
                *layout.assignments,
                f"workload.arrival={{type: closed_loop, concurrency: {conc}}}",
            ]
            recipe = launch_recipe(model, system, prec, isl, osl, version) \
                if recipes and not other_engine else None
            ratio = harness_length_ratio(isl, osl, recipe and recipe.length_ratio) \
                if length_ratio is None else length_ratio
            overrides += [*length_overrides(isl, osl, ratio),
                          f"workload.num_requests={conc * rounds}", "workload.duration_s=null"]
            if recipe is not None:
                overrides += recipe.overrides(isl, version)
        runs.append(MeasuredRun(label=f"{group} c{conc}", source=source, kind="closed_loop",
                                measured=measured,
                                overrides=overrides, concurrency=conc, isl=isl, osl=osl, group=group,
                                family=family, layout=parallel, lengths=f"{isl}/{osl}",
                                error=error, infer_dp=not layout.states_dp, note=note,
                                launch_flags=recipe and recipe.describe(isl, version),
                                engine_version=version,
                                recipe_version=recipe and recipe.engine_version))
    if unreadable and len(unreadable) + len(skipped) == len(runs):
        raise unreadable[0]
    return MeasuredSet("sweep", runs, table, np.arange(len(df)))


def _unread_row(label: str, source: str, error: MeasurementError) -> MeasuredRun:
    """A row reported as skipped, with the reason, and not simulated."""
    return MeasuredRun(label=label, source=source, kind="closed_loop", measured={}, group=label, family=label,
                       error=error.render())


def _row_precision(cell: object, model: str) -> tuple[str | None, str | None]:
    """A sweep row's precision, read from the checkpoint when the row leaves it unstated, and
    a note where the cell and the checkpoint's name disagree.

    A cell of `fp8` beside a checkpoint whose name says it has no KV-cache scales
    (`-FP8-dynamic`, Red Hat's `-FP8`) is that checkpoint's FP8, with its 16-bit cache, as
    the same name in a vLLM JSON reads; a cell naming another weight format than the name
    is taken as the row states it, and said."""
    text = "" if missing_cell(cell) else str(cell)
    if text.strip().lower() in UNSTATED_PRECISIONS:
        try:
            return checkpoint_precision(model), None
        except CatalogError:  # an unknown model is reported later, with the catalog's reason
            return "bf16", None
    prec, named = canonical_precision(text), checkpoint_token_precision(model)
    if prec is None or named is None or named == prec:
        return prec, None
    if prec == "fp8" and named == "fp8_kv16":
        return named, None
    if PRECISIONS[named][0] != PRECISIONS[prec][0]:
        return prec, (f"precision {text.strip()!r} is not the {PRECISIONS[named][0]} weights the checkpoint's "
                      f"name {model!r} states: simulated as the row's precision says")
    return prec, None


def _name_cell(cell: object, column: str, where: str) -> str:
    """A sweep row's GPU or model name; a blank one would be simulated as the GPU or model `nan`."""
    if missing_cell(cell):
        raise MeasurementError(f"{column} is {shown_cell(cell)}, expected a {'GPU' if column == 'system' else 'model'} "
                               "name", where=where, fix=FIX_ROW)
    return str(cell).strip()


def _catalog_key(system: str, model: str) -> tuple[str, str]:
    """The catalog's names of a row's GPU and model (spellings of one GPU, `h200_sxm` and
    `H200`, are one); a name outside the catalog stands for itself."""
    def name(lookup, cell: str) -> str:
        try:
            return lookup(cell).name
        except CatalogError:  # reported later as unsimulatable, with the catalog's reason
            return cell.lower()
    return name(get_gpu, system), name(get_model, model)


def _release_label(release: str | None) -> str:
    """The release as a configuration label shows it (` v0.11.0`), or nothing."""
    if release is None:
        return ""
    number = release[1:] if release[:1] in "vV" else release
    return f" v{number}" if number[:1].isdigit() else f" {release}"


def _cell_number(cell: object) -> float:
    try:
        return float(cell)
    except (TypeError, ValueError):
        return math.nan


def _whole_cell(cell: object, column: str, where: str) -> int:
    """A sweep row's count (clients, tokens, GPUs): a whole number >= 1."""
    value = _cell_number(cell)
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise MeasurementError(f"{column} is {shown_cell(cell)}, expected a whole number >= 1", where=where,
                               fix=FIX_ROW)
    return int(value)


def _latency_cell(cell: object, column: str, where: str) -> float | None:
    """A sweep row's measured latency in ms, or None when blank (that metric is not scored;
    nor is a 0, which the row's note reports)."""
    if blank_cell(cell):
        return None
    value = _cell_number(cell)
    if not (math.isfinite(value) and value >= 0):
        raise MeasurementError(f"{column} is {shown_cell(cell)}, expected a number of ms >= 0, or blank",
                               where=where, fix=FIX_ROW)
    return value


def _check_colocated(row, columns, where: str) -> None:
    """aiconfigurator's sample marks disaggregated runs `mode: disagg` (their layout is in
    prefill_* and decode_* columns, tp_size blank); a sweep row is one colocated server."""
    if "mode" in columns and not missing_cell(cell := row.mode) and str(cell).strip().lower().startswith("disagg"):
        raise MeasurementError("a disaggregated run (mode disagg): a sweep row is simulated as one colocated "
                               "server", where=where,
                               fix="validate a disaggregated run from its per-request results (vLLM's result "
                                   "JSON or a per-request CSV) with a disaggregated base scenario, or drop the row")


def _other_engine(row, columns) -> str | None:
    """The serving engine a `backend` cell names when it is not vLLM (aiconfigurator's sample
    also holds TensorRT-LLM and SGLang rows), else None."""
    if "backend" not in columns or missing_cell(cell := row.backend):
        return None
    name = str(cell).strip()
    return None if name.lower().startswith("vllm") else name


def _row_version(row, columns) -> str | None:
    """The row's release from the first version column it fills, as written (`row`: the
    text row), or None."""
    for column in VERSION_COLUMNS:
        if column in columns and not missing_cell(cell := getattr(row, column)):
            return str(cell).strip()
    return None


def _layout_size(cell: object, column: str, where: str) -> int | None:
    """An optional layout cell: a whole number >= 1, or None when blank or 0 (aiconfigurator's
    sample writes moe_ep_size 0 for dense models)."""
    if blank_cell(cell):
        return None
    try:
        value = float(cell)
    except (TypeError, ValueError):
        value = math.nan
    if value == 0:
        return None
    if not (value >= 1 and value == int(value)):
        raise MeasurementError(f"{column} is {cell!r}, not a whole number >= 1", where=where,
                               fix=f"give {column} as 1, 2, 4, ... or leave the cell blank (or 0)")
    return int(value)


def _expert_parallel_note(layout: RowLayout, tp: int, model: str) -> str | None:
    """What the run says when the row's EP size is not the one vLLM's flag gives, or
    names expert parallelism for a model without experts."""
    gpus = tp * layout.dp
    if layout.ep <= 1:
        return None
    try:
        dense = not get_model(model).is_moe
    except CatalogError:  # the row is skipped with the catalog's reason
        dense = False
    if dense:
        return f"moe_ep_size {layout.ep} ignored: the model has no experts"
    if layout.ep == gpus:
        return None
    return (f"moe_ep_size {layout.ep} is not tp x dp = {gpus}; vLLM's --enable-expert-parallel splits "
            f"the experts over all {gpus} GPUs, and so does the simulation")


class RowLayout(NamedTuple):
    """What a sweep row's optional layout columns say."""

    assignments: list[str]  # scenario overrides for the sizes above 1
    labels: list[str]  # the same, for the row's configuration label
    states_dp: bool  # the row names its DP size (then none is inferred for it, see runner)
    ep: int  # expert-parallel size (1: none stated)
    dp: int  # attention data-parallel size (1: none stated)


def _row_layout(row: tuple, columns: pd.Index, where: str) -> RowLayout:
    sizes: dict[str, tuple[int, str]] = {}  # target field -> (size, label prefix)
    states_dp = False
    for column, (target, prefix) in SWEEP_LAYOUT_COLUMNS.items():
        size = _layout_size(getattr(row, column), column, where) if column in columns else None
        if size is not None:
            states_dp |= target == "parallelism.dp"
            if size > 1:
                sizes[target] = (size, prefix)
    ep = max((_layout_size(getattr(row, c), c, where) or 1 for c in SWEEP_EP_COLUMNS if c in columns), default=1)
    assignments = [f"{t}={n}" for t, (n, _) in sizes.items()]
    labels = [f"{pre}{n}" for n, pre in sizes.values()]
    if ep > 1:  # vLLM's expert parallelism is one flag: the experts over all tp x dp GPUs
        assignments.append("parallelism.expert_parallel=true")
        labels.append(f"ep{ep}")
    return RowLayout(assignments, labels, states_dp, ep, sizes.get("parallelism.dp", (1, ""))[0])

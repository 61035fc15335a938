"""Readers for measured benchmark results, in the three formats users bring.

- A per-request CSV: arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,e2e_ms (one
  open-loop run per file; replayed with its exact arrivals and lengths).
- A closed-loop sweep CSV: system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms
  (one run per row: N clients with fixed lengths).
- A `vllm bench serve --save-result` JSON: per-request details when saved
  (`--save-detailed`), else the run summary (mean latencies, token totals, traffic).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from simulator.errors import CatalogError, ServesimError
from simulator.hardware import get_gpu
from simulator.models import get_model
from simulator.validation.lengths import harness_length_ratio, length_overrides
from simulator.validation.recipes import launch_recipe
from simulator.validation.versions import VERSION_COLUMNS

PER_REQUEST_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms")
SWEEP_COLUMNS = ("system", "model", "precision", "tp_size", "isl", "osl", "concurrency",
                 "ttft_ms", "tpot_ms")
# Optional sweep columns for layouts beyond tp_size (aiconfigurator's names and short ones):
# column -> (scenario field, group label prefix). `concurrency` stays the total client count.
SWEEP_LAYOUT_COLUMNS = {"pp_size": ("parallelism.pp", "pp"), "dp_size": ("parallelism.dp", "dp"),
                        "attention_dp_size": ("parallelism.dp", "dp")}
# Expert-parallel sizes: above 1, the row runs with vLLM's --enable-expert-parallel.
SWEEP_EP_COLUMNS = ("moe_ep_size", "ep_size")


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


def _means(df: pd.DataFrame) -> dict[str, float]:
    out = {}
    for col in ("ttft_ms", "tpot_ms", "e2e_ms"):
        if col in df:
            vals = df[col].to_numpy(dtype=float)
            vals = vals[~np.isnan(vals)]
            if vals.size:
                out[col] = float(vals.mean())
    return out


def _as_written(path: Path) -> pd.DataFrame:
    """A CSV's cells as text, so validation.csv gives the input rows back unchanged (pandas
    would write 1 as 1.0 in a column with a blank cell)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


# Per-request columns that must hold a value in every row: column -> (whole number?, minimum).
# An output of 0 tokens is a failed request; it is replayed as one token, as before.
_PER_REQUEST_REQUIRED = {"arrival_s": (False, -math.inf), "prompt_tokens": (True, 1),
                         "output_tokens": (True, 0)}
_LATENCY_COLUMNS = ("ttft_ms", "tpot_ms", "e2e_ms")
_FIX_ROW = "fix or drop that row"
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
            raise MeasurementError(f"{column} is {_shown(cells.iloc[i])}, expected {what}",
                                   where=f"{path}:{i + 2}", fix=_FIX_ROW)
        out[column] = values.astype(np.int64) if whole else values.astype(float)
    return out


def read_per_request_csv(path: Path) -> MeasuredSet:
    df = _as_written(path)
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
    run = MeasuredRun(label=path.stem, source=path.name, kind="trace", measured=_means(req),
                      requests=req)
    return MeasuredSet("per_request", [run], df, np.zeros(len(df), dtype=int))


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

PRECISIONS = {
    # precision column -> (weight, activation, kv) dtypes. FP8 serving on Hopper (vLLM
    # --quantization fp8 --kv-cache-dtype fp8) quantises the KV cache too; see docs/fidelity.md.
    "fp8": ("fp8", "fp8", "fp8"),
    "fp16": ("fp16", "fp16", "fp16"),
    "bf16": ("bf16", "bf16", "bf16"),
    "fp4": ("fp4", "fp4", "fp8"),  # NVFP4 W4A4 on Blackwell tensor cores, FP8 KV
    "int4": ("int4", "bf16", "bf16"),  # weight-only (W4A16)
    "int8": ("int8", "int8", "bf16"),  # W8A8 INT8 (e.g. compressed-tensors w8a8): KV stays 16-bit
}
# Other spellings of the same formats in benchmark tables and checkpoint names.
PRECISION_ALIASES = {
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "nvfp4": "fp4", "mxfp4": "fp4",
    "w4a4": "fp4", "fp8_block": "fp8", "fp8-block": "fp8", "w8a8_fp8": "fp8", "float8": "fp8",
    "w4a16": "int4", "awq": "int4", "gptq": "int4", "w8a8": "int8", "w8a8_int8": "int8",
}


def canonical_precision(text: str) -> str | None:
    """A precision column value in PRECISIONS' terms, or None if it is not one we know."""
    key = text.strip().lower()
    key = PRECISION_ALIASES.get(key, key)
    return key if key in PRECISIONS else None


# A blank precision cell (pandas reads it as NaN) or one of these words means "what the
# checkpoint is": the model name's quantisation token, else the model's native format.
UNSTATED_PRECISIONS = ("", "nan", "none", "auto", "default", "native")


def _row_precision(cell: object, model: str) -> str | None:
    """A sweep row's precision, read from the checkpoint when the row leaves it unstated."""
    text = "" if cell is None or (isinstance(cell, float) and math.isnan(cell)) else str(cell)
    if text.strip().lower() not in UNSTATED_PRECISIONS:
        return canonical_precision(text)
    try:
        return checkpoint_precision(model)
    except CatalogError:  # an unknown model is reported later, with the catalog's reason
        return "bf16"


def precision_overrides(prec: str, model_name: str, gpu_name: str) -> list[str]:
    """Scenario overrides for a row's precision column, given what the model and GPU support.

    - Checkpoints that quantise only their routed experts (gpt-oss MXFP4, Kimi-K2.5 INT4)
      keep attention, shared experts and the KV cache in bf16 when the row names that
      native format; another format (Kimi fp4 = NVIDIA's NVFP4 checkpoint) maps as below.
    - NVIDIA's NVFP4 checkpoints of some MoE models quantise the experts only
      (`nvfp4_experts_only`: MiniMax-M2.5, Kimi-K2.5): attention stays bf16, the experts run
      W4A4, and the KV cache is FP8 as in every ModelOpt NVFP4 checkpoint.
    - FP4 on a GPU without FP4 tensor cores (Hopper), and FP8 on one without FP8 tensor
      cores (Ampere), run weight-only: vLLM dequantises in the GEMM (Marlin) and computes
      in bf16.
    - FP8 of a model whose publisher ships a block-scaled FP8 checkpoint (`native_fp8`)
      keeps a bf16 KV cache: that checkpoint has no KV scales and vLLM's default KV dtype
      follows the model. ModelOpt FP8 checkpoints (the others) quantise the KV cache too.
    """
    w, a, kv = PRECISIONS[prec]
    try:
        model = get_model(model_name)
    except CatalogError:  # reported later as unsimulatable, with the catalog's reason
        model = None
    try:
        peaks = get_gpu(gpu_name).peak_tflops
    except CatalogError:
        peaks = {"fp4": 1.0, "fp8": 1.0}
    expert = None
    if model is not None and model.native_expert_dtype == w:
        w, a, kv, expert = "bf16", "bf16", "bf16", w
    elif prec == "fp4" and model is not None and model.nvfp4_experts_only:
        w, expert = "bf16", "fp4"
    if a in ("fp4", "fp8") and not peaks.get(a):
        a = "bf16"
    if prec == "fp8" and model is not None and model.native_fp8:
        kv = "bf16"
    out = [f"model.weight_dtype={w}", f"model.activation_dtype={a}", f"model.kv_dtype={kv}"]
    return [*out, f"model.expert_weight_dtype={expert or 'null'}"]


def read_sweep_csv(path: Path, rounds: int, length_ratio: float | None = None,
                   recipes: bool = True) -> MeasuredSet:
    """One closed-loop run per row; `length_ratio` None picks it per row (harness_length_ratio).
    With `recipes`, a row of a known harness (its length grid, model, GPU and precision) also
    gets that harness's server flags, release and length spread (recipes.py)."""
    df = pd.read_csv(path)
    missing = [c for c in SWEEP_COLUMNS if c not in df.columns]
    if missing:
        raise MeasurementError(f"missing column(s) {', '.join(missing)}", where=str(path),
                               fix=f"a sweep CSV needs: {', '.join(SWEEP_COLUMNS)}")
    runs = []
    for i, row in enumerate(df.itertuples(index=False)):
        where = f"{path}:{i + 2}"
        prec = _row_precision(row.precision, str(row.model))
        conc, isl, osl, tp = (_whole_cell(getattr(row, c), c, where)
                              for c in ("concurrency", "isl", "osl", "tp_size"))
        measured = {c: ms for c in ("ttft_ms", "tpot_ms")
                    if (ms := _latency_cell(getattr(row, c), c, where)) is not None}
        other_engine = _other_engine(row, df.columns)
        family = f"{row.system} {row.model} {prec or row.precision}{f' {other_engine}' if other_engine else ''}"
        layout = _row_layout(row, df.columns, where)
        group = f"{family} tp{tp}{''.join(f' {label}' for label in layout.labels)} isl{isl} osl{osl}"
        note = _expert_parallel_note(layout, tp)
        if other_engine:  # its version is not a vLLM release, and vLLM's recipes are not its flags
            note = "; ".join(filter(None, [note, f"measured on {other_engine}, simulated with the base "
                                                 "scenario's scheduler, without vLLM's release rules or recipes"]))
        overrides, error, recipe = [], None, None
        if prec is None:  # one row we cannot map is reported and skipped, like an unknown model
            error = MeasurementError(f"unknown precision {row.precision!r}", where=where,
                                     fix=f"use one of: {', '.join([*PRECISIONS, *PRECISION_ALIASES])}, "
                                         "or leave it blank for the checkpoint's own").render()
        else:
            overrides = [
                f"model.name={row.model}", "model.config_json=null",
                *precision_overrides(prec, str(row.model), str(row.system)),
                f"hardware.gpu={row.system}", f"parallelism.tp={tp}",
                *layout.assignments,
                f"workload.arrival={{type: closed_loop, concurrency: {conc}}}",
            ]
            recipe = launch_recipe(str(row.model), str(row.system), prec, isl, osl) \
                if recipes and not other_engine else None
            ratio = harness_length_ratio(isl, osl, recipe and recipe.length_ratio) \
                if length_ratio is None else length_ratio
            overrides += [*length_overrides(isl, osl, ratio),
                          f"workload.num_requests={conc * rounds}", "workload.duration_s=null"]
            if recipe is not None:
                overrides += recipe.overrides(isl)
        runs.append(MeasuredRun(label=f"{group} c{conc}", source=path.name, kind="closed_loop",
                                measured=measured,
                                overrides=overrides, concurrency=conc, isl=isl, osl=osl, group=group,
                                family=family, error=error, infer_dp=not layout.states_dp, note=note,
                                launch_flags=recipe and recipe.describe(isl),
                                engine_version=None if other_engine else _row_version(row, df.columns),
                                recipe_version=recipe and recipe.engine_version))
    return MeasuredSet("sweep", runs, _as_written(path), np.arange(len(df)))


def _blank(cell: object) -> bool:
    """An optional column's empty cell (pandas reads it as NaN)."""
    return cell is None or (isinstance(cell, float) and math.isnan(cell)) or not str(cell).strip()


def _shown(cell: object) -> str:
    """A cell as an error message quotes it."""
    return "blank" if _blank(cell) else repr(str(cell).strip())


def _cell_number(cell: object) -> float:
    try:
        return float(cell)
    except (TypeError, ValueError):
        return math.nan


def _whole_cell(cell: object, column: str, where: str) -> int:
    """A sweep row's count (clients, tokens, GPUs): a whole number >= 1."""
    value = _cell_number(cell)
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise MeasurementError(f"{column} is {_shown(cell)}, expected a whole number >= 1", where=where,
                               fix=_FIX_ROW)
    return int(value)


def _latency_cell(cell: object, column: str, where: str) -> float | None:
    """A sweep row's measured latency in ms, or None when blank (that metric is not scored)."""
    if _blank(cell):
        return None
    value = _cell_number(cell)
    if not (math.isfinite(value) and value >= 0):
        raise MeasurementError(f"{column} is {_shown(cell)}, expected a number of ms >= 0, or blank",
                               where=where, fix=_FIX_ROW)
    return value


def _other_engine(row, columns) -> str | None:
    """The serving engine a `backend` cell names when it is not vLLM (aiconfigurator's sample
    also holds TensorRT-LLM and SGLang rows), else None."""
    if "backend" not in columns or _blank(cell := row.backend):
        return None
    name = str(cell).strip()
    return None if name.lower().startswith("vllm") else name


def _row_version(row, columns) -> str | None:
    """The row's vLLM release from the first version column it fills, or None."""
    for column in VERSION_COLUMNS:
        if column in columns and not _blank(cell := getattr(row, column)):
            return str(cell).strip()
    return None


def _layout_size(cell: object, column: str, where: str) -> int | None:
    """An optional layout cell: a whole number >= 1, or None when blank or 0 (aiconfigurator's
    sample writes moe_ep_size 0 for dense models)."""
    if _blank(cell):
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


def _expert_parallel_note(layout: RowLayout, tp: int) -> str | None:
    """What the run says when the row's EP size is not the one vLLM's flag gives."""
    gpus = tp * layout.dp
    if layout.ep <= 1 or layout.ep == gpus:
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


def vllm_json_documents(path: Path) -> list[dict]:
    """The result objects in a vLLM (or SGLang) benchmark file: one JSON object, or one per
    line as `vllm bench serve --append-result` and `sglang.bench_serving` write them."""
    text = path.read_text()
    try:
        return [json.loads(text)]
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise MeasurementError(f"not valid JSON: {exc.msg} (line {exc.lineno})", where=str(path),
                                   fix="pass the file written by `vllm bench serve --save-result`") from None
    docs = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise MeasurementError(f"not valid JSON lines: {exc.msg}", where=f"{path}:{lineno}",
                                       fix="one result object per line, as --append-result writes them") from None
    return docs


_FIX_JSON = "pass the JSON exactly as `vllm bench serve` saved it"


def _json_numbers(values: list, key: str, where: str, *, whole: bool = False,
                  lowest: float = 0.0) -> np.ndarray:
    """A per-request list as numbers; a failed request's null reads as 0 (it is dropped)."""
    out = np.zeros(len(values), dtype=float)
    for i, value in enumerate(values):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                or value < lowest or (whole and not float(value).is_integer()):
            kind = "a whole number >= 0" if whole else ("a number" if lowest == -math.inf else "a number >= 0")
            raise MeasurementError(f"`{key}`[{i}] is {json.dumps(value)}, expected {kind}", where=where,
                                   fix=_FIX_JSON)
        out[i] = value
    return out.astype(np.int64) if whole else out


def read_vllm_json(path: Path) -> list[MeasuredSet]:
    """The runs of a `vllm bench serve --save-result --save-detailed` file (one per result
    object; a file appended to by several runs holds several, labelled `name#k`)."""
    docs = vllm_json_documents(path)
    if len(docs) == 1:
        return [_vllm_run(docs[0], path, path.stem, path.name)]
    return [_vllm_run(d, path, f"{path.stem}#{k}", f"{path.name}#{k}") for k, d in enumerate(docs, start=1)]


def _vllm_run(data: object, path: Path, label: str, source: str) -> MeasuredSet:
    """One run from one result object.

    Newer vLLM versions also save each request's `start_times` and `latencies`: an
    open-loop run is then replayed with its exact send times (as a per-request CSV is),
    and E2E is the measured latency rather than TTFT + sum(ITLs). Failed requests (an
    entry in `errors`, or no first token) are dropped. `model_id` is kept so the run can
    follow the model it measured (see `model_id_overrides`).
    """
    where = str(path) if label == path.stem else f"{path} ({label})"
    if not isinstance(data, dict):
        raise MeasurementError("not a benchmark result object", where=where,
                               fix="pass the JSON exactly as `vllm bench serve --save-result` saved it")
    if any(k not in data for k in ("input_lens", "output_lens", "ttfts")):
        return _vllm_summary_run(data, where, label, source)
    n = len(data["ttfts"])

    def per_request(key: str) -> list | None:
        values = data.get(key)
        if values is None:
            return None
        if not isinstance(values, list) or len(values) != n:
            raise MeasurementError(f"`{key}` has {len(values) if isinstance(values, list) else 'no'} entries "
                                   f"for {n} requests", where=where,
                                   fix=_FIX_JSON)
        return values

    def numbers(key: str, *, whole: bool = False, lowest: float = 0.0) -> np.ndarray | None:
        values = per_request(key)
        return None if values is None else _json_numbers(values, key, where, whole=whole, lowest=lowest)

    prompts, out = numbers("input_lens", whole=True), numbers("output_lens", whole=True)
    ttfts = numbers("ttfts") * 1e3
    latencies = numbers("latencies")
    itls = per_request("itls")
    if latencies is not None:
        e2e = latencies * 1e3
    elif itls is not None:
        if (i := next((i for i, x in enumerate(itls) if not isinstance(x, list | None)), None)) is not None:
            raise MeasurementError(f"`itls`[{i}] is {json.dumps(itls[i])}, expected a list of gaps in seconds",
                                   where=where, fix=_FIX_JSON)
        e2e = ttfts + np.array([_json_numbers(x or [], f"itls[{i}]", where).sum()
                                for i, x in enumerate(itls)], dtype=float) * 1e3
    else:  # neither latencies nor ITLs saved: E2E and TPOT were not measured
        e2e = np.full(n, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2e - ttfts) / (out - 1), np.nan)
    errors = per_request("errors") or [""] * n
    ok = (ttfts > 0) & np.array([not e for e in errors])  # failed requests: no first token
    if (empty := ok & (prompts < 1)).any():
        raise MeasurementError(f"`input_lens`[{int(np.flatnonzero(empty)[0])}] is 0 for a request that "
                               "got a first token", where=where, fix=_FIX_JSON)
    req = pd.DataFrame({"prompt_tokens": prompts, "output_tokens": out,
                        "ttft_ms": ttfts, "tpot_ms": tpot, "e2e_ms": e2e})
    conc, rate, burst = _traffic(data, where)
    starts = numbers("start_times", lowest=-math.inf)
    kind = "closed_loop" if conc else "rate"
    if starts is not None and not conc:
        kind = "trace"  # exact send times
        req.insert(0, "arrival_s", starts)
    req = req[ok].reset_index(drop=True)
    if kind == "trace" and len(req):
        req["arrival_s"] -= req["arrival_s"].min()
    model_id = data.get("model_id")
    run = MeasuredRun(label=label, source=source, kind=kind, measured=_means(req), requests=req,
                      concurrency=conc, rate=rate, burstiness=burst,
                      model_id=str(model_id) if model_id else None)
    return MeasuredSet("vllm_json", [run], req, np.zeros(len(req), dtype=int))


# Summary keys of the mean latencies, as vLLM (`*_e2el_ms`) and SGLang (`*_e2e_latency_ms`) name them.
SUMMARY_MEANS = {"ttft_ms": ("mean_ttft_ms",), "tpot_ms": ("mean_tpot_ms",),
                 "e2e_ms": ("mean_e2el_ms", "mean_e2e_latency_ms")}


def _summary_number(data: dict, key: str, where: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise MeasurementError(f"`{key}` is {value!r}, not a non-negative number", where=where,
                               fix="pass the JSON exactly as the benchmark saved it")
    return number


def _traffic(data: dict, where: str) -> tuple[int | None, float, float]:
    """(max_concurrency or None, request_rate with inf for "inf", burstiness) of a result."""
    conc = data.get("max_concurrency")
    rate = data.get("request_rate", "inf")
    rate = math.inf if rate in (None, "inf", float("inf")) else _summary_number(data, "request_rate", where)
    burst = _summary_number(data, "burstiness", where) or 1.0
    return (int(conc) if conc else None), rate, burst


def _vllm_summary_run(data: dict, where: str, label: str, source: str) -> MeasuredSet:
    """A result saved without per-request details (`vllm bench serve --save-result` without
    `--save-detailed`, the default): only run-level figures are known.

    The run is re-simulated with its own count, traffic (clients, rate, burstiness) and
    mean prompt and output lengths (totals / completed requests), every request at those
    means; its mean TTFT, TPOT and E2E are compared. Length spread is not in the file.
    """
    completed = _summary_number(data, "completed", where) or _summary_number(data, "num_prompts", where)
    tokens_in = _summary_number(data, "total_input_tokens", where)
    tokens_out = _summary_number(data, "total_output_tokens", where)
    measured = {}
    for metric, keys in SUMMARY_MEANS.items():
        value = next((v for v in (_summary_number(data, k, where) for k in keys) if v is not None), None)
        if value is not None:
            measured[metric] = value
    if not completed or tokens_in is None or tokens_out is None or "ttft_ms" not in measured:
        raise MeasurementError(
            "neither per-request details (input_lens, output_lens, ttfts) nor the run summary "
            "(completed, total_input_tokens, total_output_tokens, mean_ttft_ms)", where=where,
            fix="pass the file `vllm bench serve --save-result` wrote (add --save-detailed for "
                "per-request errors)")
    n = int(completed)
    isl = max(1, round(tokens_in / n))
    osl = max(1, round(tokens_out / n))
    conc, rate, burst = _traffic(data, where)
    if conc:
        arrival = f"{{type: closed_loop, concurrency: {int(conc)}"
        arrival += "}" if math.isinf(rate) else f", rate: {rate}, burstiness: {burst}}}"
    elif math.isinf(rate):
        arrival = f"{{type: closed_loop, concurrency: {n}}}"  # every request sent at t = 0
    elif burst == 1.0:
        arrival = f"{{type: poisson, rate: {rate}}}"
    else:
        arrival = f"{{type: gamma, rate: {rate}, burstiness: {burst}}}"
    overrides = [f"workload.arrival={arrival}", *length_overrides(isl, osl, 1.0),
                 f"workload.num_requests={n}", "workload.duration_s=null"]
    scalars = {k: v for k, v in data.items() if not isinstance(v, (list, dict))}
    model_id = data.get("model_id")
    run = MeasuredRun(label=label, source=source, kind="closed_loop" if conc or math.isinf(rate) else "rate",
                      measured=measured, overrides=overrides, concurrency=conc,
                      rate=rate, burstiness=burst, isl=isl, osl=osl,
                      model_id=str(model_id) if model_id else None)
    return MeasuredSet("vllm_json", [run], pd.DataFrame([scalars]), np.zeros(1, dtype=int))


# Quantisation tokens in checkpoint names, for runs that name their model (vLLM's model_id).
_ID_PRECISION_TOKENS = (("nvfp4", "fp4"), ("mxfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"),
                        ("awq", "int4"), ("gptq", "int4"), ("int4", "int4"), ("w4a16", "int4"),
                        ("w8a8", "int8"), ("int8", "int8"))


def checkpoint_precision(model_id: str) -> str:
    """The precision a checkpoint name implies: its quantisation token, else the model's native format."""
    tokens = re.split(r"[-_./\s]+", model_id.lower())
    for token, prec in _ID_PRECISION_TOKENS:
        if token in tokens:
            return prec
    model = get_model(model_id)
    if model.native_expert_dtype:
        return model.native_expert_dtype
    return "fp8" if model.released_in_fp8 else "bf16"


def model_id_overrides(model_id: str | None, base_model: str, gpu_name: str) -> list[str]:
    """Overrides that make a run follow the model its result file names.

    Empty when the file names no model, a model outside the catalog (a local path), the
    model the base scenario already serves (whose dtypes the scenario then decides), or
    when the scenario's own model is not a catalog entry (a config.json it loads).
    Otherwise the catalog entry and the precision its checkpoint name implies.
    """
    if not model_id:
        return []
    try:
        model = get_model(model_id)
        same = get_model(base_model).name == model.name
    except CatalogError:
        return []
    if same:
        return []
    prec = checkpoint_precision(model_id)
    return [f"model.name={model.name}", "model.config_json=null", *precision_overrides(prec, model.name, gpu_name)]


def read_measured(paths: list[Path], rounds: int = 10, length_ratio: float | str | None = None,
                  recipes: bool = True) -> MeasuredSet:
    """Read one or more files (a folder means every CSV/JSON in it) into one set."""
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
    sets = [s for f in files for s in _read_one(f, rounds, length_ratio, recipes)]
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


def _read_one(path: Path, rounds: int, length_ratio: float | None, recipes: bool) -> list[MeasuredSet]:
    if path.suffix in (".json", ".jsonl"):
        return read_vllm_json(path)
    header = path.read_text().splitlines()[0] if path.stat().st_size else ""
    cols = {c.strip() for c in header.split(",")}
    if set(SWEEP_COLUMNS) <= cols:
        return [read_sweep_csv(path, rounds, length_ratio, recipes)]
    if set(PER_REQUEST_COLUMNS) <= cols:
        return [read_per_request_csv(path)]
    raise MeasurementError("unrecognised CSV header", where=f"{path}:1",
                           fix=f"per-request: {','.join(PER_REQUEST_COLUMNS)}[,e2e_ms]; "
                           f"sweep: {','.join(SWEEP_COLUMNS)}")

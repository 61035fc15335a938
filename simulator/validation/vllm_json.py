"""`vllm bench serve --save-result` JSON (and SGLang's bench_serving lines): per-request
details when saved, else the run summary."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.cost.releases import parse_version
from simulator.validation.lengths import length_overrides
from simulator.validation.measurement import (
    MeasuredRun,
    MeasuredSet,
    MeasurementError,
    mean_latencies,
    read_text,
)
from simulator.workload.arrivals import RampArrival
from simulator.workload.defaults import MAX_IMPLIED_REQUESTS


def vllm_json_documents(path: Path) -> list[dict]:
    """The result objects in a vLLM (or SGLang) benchmark file: one JSON object, or one per
    line as `vllm bench serve --append-result` and `sglang.bench_serving` write them."""
    text = read_text(path)
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


# What each per-request key holds, for the error that says it is not a list.
_REQUEST_LISTS = {"itls": "a list of per-request lists of gaps in seconds",
                  "errors": "a list of error texts (\"\" for a success), one per request"}


def _shown(value: object, limit: int = 40) -> str:
    """A JSON value as an error message quotes it, cut short."""
    text = json.dumps(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


def _request_list(data: dict, key: str, where: str, n: int | None = None) -> list | None:
    """A per-request key's list, or None when the file leaves it out (`ttfts`, which counts
    the requests, must be there). A scalar or a list of another length would pair the
    wrong measurements with each request."""
    values = data.get(key)
    if values is None and key != "ttfts":
        return None
    if not isinstance(values, list):
        what = _REQUEST_LISTS.get(key, "a list of numbers, one per request")
        raise MeasurementError(f"`{key}` is {_shown(values)}, must be {what}", where=where, fix=_FIX_JSON)
    if n is not None and len(values) != n:
        raise MeasurementError(f"`{key}` has {len(values)} entries for {n} requests (one per entry of `ttfts`)",
                               where=where, fix=_FIX_JSON)
    return values


# Per-request keys a successful request must fill: a null there would read as 0.
_FILLED_WHEN_OK = ("input_lens", "output_lens", "latencies", "start_times", "itls")


def _require_successes(data: dict, ok: np.ndarray, where: str) -> None:
    """Refuse a run with no successful request (nothing to compare) and a successful request
    with a null measurement, before anything is simulated."""
    if not ok.any():
        what = "`ttfts` is empty" if not len(ok) else \
            f"all {len(ok)} requests failed (an entry in `errors`, or a `ttfts` of 0 or null)"
        raise MeasurementError(f"no successful request to compare against: {what}", where=where,
                               fix="pass a run in which requests completed (the benchmark's `errors` say why "
                                   "these did not)")
    for key in _FILLED_WHEN_OK:
        values = _request_list(data, key, where, len(ok)) or []
        i = next((int(i) for i in np.flatnonzero(ok) if values and values[i] is None), None)
        if i is not None:
            raise MeasurementError(f"`{key}`[{i}] is null for a request that got a first token", where=where,
                                   fix=_FIX_JSON)


def read_vllm_json(path: Path, docs: list | None = None) -> list[MeasuredSet]:
    """The runs of a `vllm bench serve --save-result --save-detailed` file (one per result
    object; a file appended to by several runs holds several, labelled `name#k`); `docs`:
    its objects, where the caller has parsed them already."""
    docs = vllm_json_documents(path) if docs is None else docs
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
    n = len(_request_list(data, "ttfts", where))

    def per_request(key: str) -> list | None:
        return _request_list(data, key, where, n)

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
    ok = (ttfts > 0) & np.array([not e for e in errors], dtype=bool)  # failed requests: no first token
    _require_successes(data, ok, where)
    if (empty := ok & (prompts < 1)).any():
        raise MeasurementError(f"`input_lens`[{int(np.flatnonzero(empty)[0])}] is 0 for a request that "
                               "got a first token", where=where, fix=_FIX_JSON)
    req = pd.DataFrame({"prompt_tokens": prompts, "output_tokens": out,
                        "ttft_ms": ttfts, "tpot_ms": tpot, "e2e_ms": e2e})
    conc, rate, burst, ramp = _traffic(data, where)
    starts = numbers("start_times", lowest=-math.inf)
    kind = "closed_loop" if conc else "rate"
    if starts is not None and not conc:
        kind = "trace"  # exact send times
        req.insert(0, "arrival_s", starts)
    table = req  # every request as the file gives it, failed ones included (validation.csv's rows)
    req = req[ok].reset_index(drop=True)
    if kind == "trace" and len(req):
        req["arrival_s"] -= req["arrival_s"].min()
    model_id = data.get("model_id")
    failed = int((~ok).sum())
    note = (f"{failed} failed request(s) (an entry in `errors`, or no first token) left out: neither "
            "replayed nor scored") if failed else None
    run = MeasuredRun(label=label, source=source, kind=kind, measured=mean_latencies(req), requests=req,
                      concurrency=conc, rate=rate, burstiness=burst, ramp=ramp,
                      model_id=str(model_id) if model_id else None, engine_version=_release(data), note=note)
    # A failed request keeps its row, with no run (-1): no prediction, and the rows after it
    # stay in the file's order, the only key a JSON's requests have.
    return MeasuredSet("vllm_json", [run], table, np.where(ok, 0, -1))


def _release(data: dict) -> str | None:
    """The vLLM release a result names: `--metadata version=0.6.3` saves it as `version`
    (older scripts wrote "N/A" there, which names none)."""
    version = data.get("version")
    return str(version) if parse_version(version) is not None else None


# Summary keys of the mean latencies, as vLLM (`*_e2el_ms`) and SGLang (`*_e2e_latency_ms`) name them.
SUMMARY_MEANS = {"ttft_ms": ("mean_ttft_ms",), "tpot_ms": ("mean_tpot_ms",),
                 "e2e_ms": ("mean_e2el_ms", "mean_e2e_latency_ms")}


def _yaml(number: float) -> str:
    """A number as a YAML scalar: an infinite burstiness is `.inf`."""
    return ".inf" if math.isinf(number) else repr(number)


def _as_number(value) -> float:
    """A JSON cell as a float; NaN for anything that is not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _summary_number(data: dict, key: str, where: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    number = _as_number(value)
    if not math.isfinite(number) or number < 0:
        raise MeasurementError(f"`{key}` is {value!r}, not a non-negative number", where=where,
                               fix="pass the JSON exactly as the benchmark saved it")
    return number


def _traffic(data: dict, where: str) -> tuple[int | None, float, float, RampArrival | None]:
    """(max_concurrency or None, request_rate with inf for "inf", burstiness, the rate ramp
    or None) of a result."""
    rate = data.get("request_rate", "inf")
    rate = math.inf if rate is None or _infinite(rate) else _positive_number(data, "request_rate", where)
    burst = data.get("burstiness")
    # vLLM's --burstiness inf (evenly spaced requests) is saved as JSON's Infinity.
    burst = 1.0 if burst is None else math.inf if _infinite(burst) else _positive_number(data, "burstiness", where)
    return _max_concurrency(data, where), rate, burst, _ramp(data, burst, where)


def _infinite(value: object) -> bool:
    """A traffic setting that says "no limit": JSON's Infinity, or the text a writer saved
    for it (vLLM writes "inf"; other scripts str(float("inf")) or "Infinity")."""
    if isinstance(value, str):
        return value.strip().lower() in ("inf", "+inf", "infinity", "+infinity")
    return value == math.inf


RAMP_STRATEGIES = ("linear", "exponential")


def _ramp(data: dict, burstiness: float, where: str) -> RampArrival | None:
    """The rate ramp of a run sent with `--ramp-up-strategy` (vLLM then ignores
    --request-rate), or None."""
    strategy = data.get("ramp_up_strategy")
    if strategy is None:
        return None
    if strategy not in RAMP_STRATEGIES:
        raise MeasurementError(f"`ramp_up_strategy` is {_shown(strategy)}, not one of {', '.join(RAMP_STRATEGIES)}",
                               where=where, fix=_FIX_JSON)
    start, end = (_positive_number(data, key, where) if data.get(key) is not None else None
                  for key in ("ramp_up_start_rps", "ramp_up_end_rps"))
    if start is None or end is None:
        raise MeasurementError("`ramp_up_strategy` is set without `ramp_up_start_rps` and `ramp_up_end_rps`",
                               where=where, fix=_FIX_JSON)
    return RampArrival(start_rate=start, end_rate=end, strategy=strategy, burstiness=burstiness)


def _positive_number(data: dict, key: str, where: str) -> float:
    """A traffic setting above 0, as vLLM requires it: a rate or burstiness of 0 has no gaps to draw."""
    number = _summary_number(data, key, where)
    if not number:
        raise MeasurementError(f"`{key}` is {_shown(data[key])}, must be a number > 0", where=where, fix=_FIX_JSON)
    return number


def _max_concurrency(data: dict, where: str) -> int | None:
    """vLLM's --max-concurrency: None (no limit) or a whole number of clients >= 1."""
    value = data.get("max_concurrency")
    if value is None:
        return None
    number = _as_number(value)
    if isinstance(value, bool) or not (math.isfinite(number) and number >= 1 and number.is_integer()):
        raise MeasurementError(f"`max_concurrency` is {_shown(value)}, must be a positive whole number (or null)",
                               where=where, fix=_FIX_JSON)
    return int(number)


def _completed(data: dict, where: str) -> int | None:
    """The requests a summary averages over: `completed`, else (a file without it) `num_prompts`.
    A run that sent requests and completed none has nothing to compare."""
    completed = _summary_number(data, "completed", where)
    prompts = _summary_number(data, "num_prompts", where)
    if completed == 0:
        of = f" of {prompts:g} `num_prompts`" if prompts else ""
        raise MeasurementError(f"no successful request to compare against: `completed` is 0{of}", where=where,
                               fix="pass a run in which requests completed")
    count = completed or prompts
    key = "completed" if completed else "num_prompts"
    if count and not count.is_integer():
        raise MeasurementError(f"`{key}` is {_shown(data[key])}, must be a whole number of requests",
                               where=where, fix=_FIX_JSON)
    if count and count > MAX_IMPLIED_REQUESTS:
        raise MeasurementError(f"`{key}` is {_shown(data[key])}, more requests than servesim simulates "
                               f"({MAX_IMPLIED_REQUESTS:.0e})", where=where, fix=_FIX_JSON)
    return int(count) if count else None


def _failed_note(data: dict, completed: int | None, where: str) -> str | None:
    """What a summary says of requests that failed: they are not simulated (the file gives
    neither their lengths nor when they failed), though they loaded the measured server."""
    failed = _summary_number(data, "failed", where) if not isinstance(data.get("failed"), list) else None
    prompts = _summary_number(data, "num_prompts", where)
    if not failed and completed and prompts and prompts > completed:
        failed = prompts - completed
    if not failed:
        return None
    return (f"{failed:g} failed request(s) not simulated: the summary averages the {completed} completed ones, "
            "and gives neither the failed ones' lengths nor when they failed")


def _vllm_summary_run(data: dict, where: str, label: str, source: str) -> MeasuredSet:
    """A result saved without per-request details (`vllm bench serve --save-result` without
    `--save-detailed`, the default): only run-level figures are known.

    The run is re-simulated with its own count, traffic (clients, rate, burstiness) and
    mean prompt and output lengths (totals / completed requests), every request at those
    means; its mean TTFT, TPOT and E2E are compared. Length spread is not in the file.
    """
    completed = _completed(data, where)
    tokens_in = _summary_number(data, "total_input_tokens", where)
    tokens_out = _summary_number(data, "total_output_tokens", where)
    measured, undefined = {}, []
    for metric, keys in SUMMARY_MEANS.items():
        # vLLM saves a mean over no sample as NaN (TPOT where every output was one token).
        undefined += [k for k in keys if str(data.get(k)).strip().lower() == "nan"]
        value = next((v for v in (_summary_number(data, k, where) for k in keys if k not in undefined)
                      if v is not None), None)
        if value is not None:
            measured[metric] = value
    latencies = data.get("latencies")
    if "e2e_ms" not in measured and isinstance(latencies, list) and latencies:
        # Newer vLLM keeps the per-request latencies even without --save-detailed; a failed
        # request's is 0 (its output's default), which is not a latency.
        done = _json_numbers(latencies, "latencies", where)
        if (done := done[done > 0]).size:
            measured["e2e_ms"] = float(done.mean()) * 1e3
    note = None
    if "request_inthroughput" in data:
        # vLLM 0.3.3-0.4.x's benchmark_serving.py (the key's typo dates it) averaged
        # latency / output tokens: the first token's wait included, n not n - 1.
        measured.pop("tpot_ms", None)
        note = ("written by vLLM 0.3.3-0.4.x's benchmark (its `request_inthroughput` key), whose mean_tpot_ms "
                "is latency / output tokens (first token included), so TPOT is not scored; that vLLM ran the V0 "
                "engine: a scenario with scheduler.policy vllm-v0 and --engine-version describe it")
    notes = [note,
             f"{', '.join(undefined)} NaN (a mean over no request): not scored" if undefined else None,
             _failed_note(data, completed, where)]
    note = "; ".join(filter(None, notes)) or None
    if not completed or tokens_in is None or tokens_out is None or not {"ttft_ms", "e2e_ms"} & set(measured):
        raise MeasurementError(
            "neither per-request details (input_lens, output_lens, ttfts) nor the run summary "
            "(completed, total_input_tokens, total_output_tokens, and mean_ttft_ms or a mean E2E)", where=where,
            fix="pass the file `vllm bench serve --save-result` wrote (add --save-detailed for "
                "per-request errors)")
    n = completed
    if tokens_in <= 0:  # every request has a prompt: a zero total is a broken summary, not a workload
        raise MeasurementError(f"`total_input_tokens` is {_shown(data['total_input_tokens'])} over {n} completed "
                               "requests", where=where, fix=_FIX_JSON)
    isl = max(1, round(tokens_in / n))
    osl = max(1, round(tokens_out / n))
    conc, rate, burst, ramp = _traffic(data, where)
    if ramp is not None:
        if conc:
            raise MeasurementError("a rate ramp under --max-concurrency, saved without per-request details, is "
                                   "not modelled (the clients' cap and the ramp interact request by request)",
                                   where=where, fix="re-run the benchmark with --save-detailed")
        arrival = (f"{{type: ramp, start_rate: {ramp.start_rate}, end_rate: {ramp.end_rate}, "
                   f"strategy: {ramp.strategy}, burstiness: {_yaml(burst)}}}")
    elif conc:
        arrival = f"{{type: closed_loop, concurrency: {conc}"
        arrival += "}" if math.isinf(rate) else f", rate: {rate}, burstiness: {_yaml(burst)}}}"
    elif math.isinf(rate):
        arrival = f"{{type: closed_loop, concurrency: {n}}}"  # every request sent at t = 0
    elif burst == 1.0:
        arrival = f"{{type: poisson, rate: {rate}}}"
    else:
        arrival = f"{{type: gamma, rate: {rate}, burstiness: {_yaml(burst)}}}"
    overrides = [f"workload.arrival={arrival}", *length_overrides(isl, osl, 1.0),
                 f"workload.num_requests={n}", "workload.duration_s=null"]
    scalars = {k: v for k, v in data.items() if not isinstance(v, (list, dict))}
    model_id = data.get("model_id")
    kind = "rate" if ramp is not None else "closed_loop" if conc or math.isinf(rate) else "rate"
    run = MeasuredRun(label=label, source=source, kind=kind,
                      measured=measured, overrides=overrides, concurrency=conc,
                      rate=rate, burstiness=burst, ramp=ramp, isl=isl, osl=osl,
                      model_id=str(model_id) if model_id else None, note=note, engine_version=_release(data))
    return MeasuredSet("vllm_json", [run], pd.DataFrame([scalars]), np.zeros(1, dtype=int))

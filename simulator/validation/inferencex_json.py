"""InferenceX (formerly InferenceMAX) results: the `agg_bmk.json` its sweep workflow
publishes, or the benchmark rows its dashboard's API serves (`hardware`, a model key such
as `dsr1`, `prefill_tp`/`decode_tp`, the latencies under `metrics`); either a JSON list
with one object per configuration and client count.

Each object is a closed-loop sweep row in other words: `hw`, `model`, `precision`, `tp`,
`isl`, `osl`, `conc`, and the client's mean TTFT and TPOT in seconds. The image names the
engine and its release (`vllm/vllm-openai:v0.13.0`), which the sweep rules use as a sweep
CSV's `engine_version` column; another framework's rows are simulated as a sweep CSV's
`backend` column has them (the base scenario's scheduler, no vLLM recipes). The runner
label after the GPU (`b200-trt`, `mi355x-amd_0`) is dropped. What a single aggregated
server does not describe is skipped with the reason: disaggregated or multi-node rows,
speculative decoding, and attention data parallelism (whose sizes the file does not split).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from simulator.errors import CatalogError
from simulator.hardware import get_gpu
from simulator.validation.measurement import MeasuredSet, MeasurementError
from simulator.validation.sweep_csv import check_rounds, sweep_set

# The keys that identify an InferenceX aggregate entry (the sweep's columns, in its names),
# and a row of its dashboard's API.
INFERENCEX_KEYS = ("hw", "model", "precision", "isl", "osl", "conc", "mean_ttft", "mean_tpot")
INFERENCEX_API_KEYS = ("hardware", "model", "precision", "isl", "osl", "conc", "metrics")

# InferenceX's database keys for its models (InferenceX-app's compare-model registry), as
# the checkpoint names the catalog knows; the row's precision picks the weight format. A key
# not listed (a model the catalog lacks) is kept, and its rows are skipped with the reason.
INFERENCEX_MODELS = {
    "dsr1": "deepseek-ai/DeepSeek-R1-0528", "kimik2.5": "moonshotai/Kimi-K2.5",
    "kimik2.6": "moonshotai/Kimi-K2.6", "kimik2.7-code": "moonshotai/Kimi-K2.7-Code",
    "glm5": "zai-org/GLM-5", "glm5.1": "zai-org/GLM-5.1", "minimaxm2.5": "MiniMaxAI/MiniMax-M2.5",
    "minimaxm2.7": "MiniMaxAI/MiniMax-M2.7", "qwen3.5": "Qwen/Qwen3.5-397B-A17B",
    "gptoss": "openai/gpt-oss-120b", "gptoss120b": "openai/gpt-oss-120b",
    "llama70b": "meta-llama/Llama-3.3-70B-Instruct",
}

_RELEASE = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)")


def is_inferencex_aggregate(data: object) -> bool:
    """Whether a parsed JSON document is an InferenceX aggregate: a list of objects, one of
    them at least a complete entry (the others are then read as entries, and a bad one
    reported as such)."""
    return (isinstance(data, list) and bool(data) and all(isinstance(e, dict) for e in data)
            and any(all(k in e for k in INFERENCEX_KEYS) or all(k in e for k in INFERENCEX_API_KEYS)
                    for e in data))


def check_near_aggregate(data: object, where: str) -> None:
    """A list of objects keyed as InferenceX entries, none of them complete: name the keys
    the first one lacks rather than calling the file no benchmark result at all."""
    if not (isinstance(data, list) and data and isinstance(data[0], dict)):
        return
    first = data[0]
    if "hardware" in first:
        keys = INFERENCEX_API_KEYS
    elif "hw" in first or "conc" in first:
        keys = INFERENCEX_KEYS
    else:
        return
    missing = [k for k in keys if k not in first]
    raise MeasurementError(f"an InferenceX aggregate whose entries lack {', '.join(missing)} (entry 1)", where=where,
                           fix=f"each entry needs {', '.join(keys)}, as InferenceX publishes them")


def read_inferencex_json(path: Path, data: list, rounds: int, length_ratio: float | None,
                         recipes: bool, default_version: str | None = None) -> MeasuredSet:
    """One closed-loop run per entry, as a sweep CSV row would give it."""
    check_rounds(rounds)
    rows, wheres, skipped = [], [], {}
    for k, entry in enumerate(data, start=1):
        where = f"{path} (entry {k})"
        if "hw" not in entry and "hardware" in entry:
            entry = _from_api_row(entry)
        reason = _not_simulated(entry)
        if reason:
            skipped[len(rows)] = MeasurementError(reason, where=where, fix="validate the aggregated single-node "
                                                  "rows; describe other layouts as a sweep CSV or a scenario")
        rows.append(_sweep_row(entry))
        wheres.append(where)
    if len(skipped) == len(rows):
        raise MeasurementError(f"none of the {len(rows)} entries is a single aggregated server "
                               f"({next(iter(skipped.values())).message})", where=str(path),
                               fix="pass an aggregate with single-node, non-disaggregated rows")
    df = pd.DataFrame(rows)
    return sweep_set(df, path.name, wheres, rounds, length_ratio, recipes, df.copy(), skipped, first_row=1,
                     default_version=default_version)


def _from_api_row(row: dict) -> dict:
    """A dashboard API row as the aggregate entry it carries: one server's TP, EP and DP
    attention are its prefill and decode ones, which differ only when disaggregated."""
    metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
    split = any(row.get(f"prefill_{k}") != row.get(f"decode_{k}") for k in ("tp", "ep", "dp_attention"))
    return {"hw": row.get("hardware"), "model": row.get("model"), "precision": row.get("precision"),
            "framework": row.get("framework"), "image": row.get("image"),
            "tp": row.get("decode_tp"), "ep": row.get("decode_ep"), "dp_attention": row.get("decode_dp_attention"),
            "spec_decoding": row.get("spec_method"), "disagg": row.get("disagg") or split,
            "is_multinode": row.get("is_multinode"), "isl": row.get("isl"), "osl": row.get("osl"),
            "conc": row.get("conc"), "mean_ttft": metrics.get("mean_ttft"), "mean_tpot": metrics.get("mean_tpot")}


def _not_simulated(entry: dict) -> str | None:
    """Why an entry is not one aggregated server that servesim can replay, or None."""
    if _truthy(entry.get("disagg")) or _truthy(entry.get("is_multinode")):
        return "a disaggregated or multi-node deployment (InferenceX `disagg`/`is_multinode`)"
    if str(entry.get("spec_decoding") or "none").strip().lower() != "none":
        return f"speculative decoding ({entry['spec_decoding']}), which servesim does not model"
    if _truthy(entry.get("dp_attention")):
        return "attention data parallelism (`dp_attention`), whose DP and TP sizes the entry does not separate"
    return None


def _truthy(value: object) -> bool:
    """InferenceX writes its flags as JSON booleans or as the strings "true"/"false"."""
    return value is True or str(value).strip().lower() == "true"


def _sweep_row(entry: dict) -> dict:
    """The sweep CSV row an entry stands for (latencies in ms; unreadable cells stay as
    written, for the sweep reader to report)."""
    framework = str(entry.get("framework") or "").strip()
    image = str(entry.get("image") or "")
    release = _RELEASE.search(image) if framework.lower().startswith("vllm") else None
    row = {
        "system": _gpu_of_runner(str(entry.get("hw") or "")),
        "model": INFERENCEX_MODELS.get(str(entry.get("model")), entry.get("model")),
        "precision": entry.get("precision"),
        "tp_size": entry.get("tp"),
        "isl": entry.get("isl"),
        "osl": entry.get("osl"),
        "concurrency": entry.get("conc"),
        "ttft_ms": _ms(entry.get("mean_ttft")),
        "tpot_ms": _ms(entry.get("mean_tpot")),
        "backend": framework,
        "engine_version": release.group(1) if release else None,
        "image": image,
    }
    ep = entry.get("ep")
    if isinstance(ep, int | float) and not isinstance(ep, bool) and ep > 1:
        row["moe_ep_size"] = ep
    return row


def _gpu_of_runner(hw: str) -> str:
    """The GPU an InferenceX `hw` names: its runner label (`b200-trt`, `h100-cr`) dropped,
    but a GPU whose own name has dashes kept whole (`rtx-pro-6000`): the longest leading
    part the catalog knows, else the first (which the sweep reader reports as unknown)."""
    parts = hw.strip().split("-")
    for end in range(len(parts), 1, -1):
        try:
            get_gpu("-".join(parts[:end]))
        except CatalogError:
            continue
        return "-".join(parts[:end])
    return parts[0]


def _ms(seconds: object) -> object:
    """Seconds as ms; anything else is kept for the sweep reader's error."""
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and math.isfinite(seconds):
        return seconds * 1e3
    return seconds


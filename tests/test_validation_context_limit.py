"""validate and max_model_len: a measured run proves its server accepted the run's longest
request and held max_model_len tokens of KV, so a base scenario's limit adapts to the run
(and says so) unless the user sets it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from simulator.api import load
from simulator.errors import KVBelowMaxModelLenError
from simulator.simulation import Simulation
from simulator.validation import run_validation

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
HEADER = "system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"


def _validate(tmp_path, rows: str, scenario: Path = BENCH, overrides: list[str] | None = None):
    src = tmp_path / "sweep.csv"
    src.write_text(HEADER + rows)
    result, _ = run_validation([src], scenario, overrides or [], tmp_path / "out", rounds=2)
    return result


def test_a_row_longer_than_the_base_limit_raises_it_and_says_so(tmp_path):
    # The base scenario allows 16384 tokens; this row sends 20000 + 64.
    result = _validate(tmp_path, "h200_sxm,meta-llama/Llama-3.1-8B,fp8,1,20000,64,2,100.0,10.0\n")
    assert result["skipped"] == []
    (run,) = result["per_run"]
    assert math.isfinite(run["pred_ttft_ms"]) and math.isfinite(run["pred_tpot_ms"])
    assert "max_model_len raised from 16384 to 20064" in run["note"]


def test_a_user_set_limit_is_kept(tmp_path):
    result = _validate(tmp_path, "h200_sxm,meta-llama/Llama-3.1-8B,fp8,1,1024,64,2,100.0,10.0\n"
                                 "h200_sxm,meta-llama/Llama-3.1-8B,fp8,1,20000,64,2,100.0,10.0\n",
                       overrides=["model.max_model_len=16384"])
    ok, refused = result["per_run"]
    assert math.isfinite(ok["pred_tpot_ms"]) and not ok.get("note")
    assert refused["pred_tpot_ms"] is None and not refused.get("note")
    # vLLM would refuse every request; the run is skipped with that reason, not scored.
    (skipped,) = result["skipped"]
    assert "every simulated request was rejected" in skipped["error"]
    assert "max_model_len=16384" in skipped["error"]


def test_a_default_context_the_kv_cache_cannot_hold_is_lowered_to_what_it_holds(tmp_path):
    # Llama 4 Scout publishes a 10M-token context; a base scenario without max_model_len
    # would refuse to start, yet the measured server ran.
    text = BENCH.read_text().replace("  max_model_len: 16384\n", "")
    assert "max_model_len" not in text
    base = tmp_path / "base.yaml"
    base.write_text(text)
    with pytest.raises(KVBelowMaxModelLenError) as info:
        Simulation(load(base, ["model.name=llama-4-scout", "parallelism.tp=4", "model.weight_dtype=bf16",
                               "model.activation_dtype=bf16", "hardware.gpu=h100-sxm"]))
    capacity = info.value.capacity_tokens
    assert 0 < capacity < 10485760
    result = _validate(tmp_path, "h100_sxm,meta-llama/Llama-4-Scout-17B-16E-Instruct,bf16,4,1024,128,4,100.0,10.0\n",
                       scenario=base)
    assert result["skipped"] == []
    (run,) = result["per_run"]
    assert math.isfinite(run["pred_tpot_ms"])
    chosen = int(re.search(r"model\.max_model_len=(\d+)", run["note"]).group(1))
    assert 1024 + 128 < chosen < 10485760  # what the row's KV cache holds (its own dtypes)

"""The "does not fit" error's fix lists only changes that work: each suggestion, applied
on its own, lets the scenario start; impossible ones (a weight dtype the model already
has, a utilization past what helps) are left out."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import scenario

from simulator import api
from simulator.errors import DoesNotFitError, KVBelowMaxModelLenError
from simulator.simulation import Simulation


def fp8(d: dict) -> dict:
    d["model"].update(weight_dtype="fp8", activation_dtype="fp8")
    return d


def fix_of(d: dict, error=DoesNotFitError) -> str:
    with pytest.raises(error) as exc:
        Simulation(api.load(data=d))
    return exc.value.fix


def suggestions(fix: str) -> dict[str, str]:
    """'set one of: parallelism.tp: 4; hardware.gpu: b200' -> {field: value}."""
    return dict(re.findall(r"([a-z_]+\.[a-z_]+): ([\w.-]+)", fix))


def starts(d: dict, field: str, value: str) -> bool:
    """Whether the scenario builds with `field` set to `value` (raises if it does not fit)."""
    section, key = field.split(".")
    Simulation(api.load(data={**d, section: {**d[section], key: yaml.safe_load(value)}}))
    return True


def test_405b_fp8_on_one_h200_suggests_a_tp_that_fits_not_fp8():
    d = fp8(scenario(model="llama-3.1-405b", gpu="h200"))
    fix = fix_of(d)
    assert suggestions(fix) == {"parallelism.tp": "4"}  # weights 381.9 GiB: only more GPUs help
    assert "fp8" not in fix and "gpu_memory_utilization" not in fix
    assert starts(d, "parallelism.tp", "4")
    with pytest.raises(DoesNotFitError):
        starts(d, "parallelism.tp", "2")  # the smallest: half the GPUs do not fit


def test_slightly_over_budget_suggests_gpu_memory_utilization():
    d = scenario(gpu="l4", max_model_len=2048)
    d["memory"]["gpu_memory_utilization"] = 0.7  # 15 GiB of weights in a 15.4 GiB budget
    found = suggestions(fix_of(d))
    assert 0.7 < float(found["memory.gpu_memory_utilization"]) <= 0.95
    assert found["model.weight_dtype"] == "fp8"  # L4 has FP8 tensor cores
    for field, value in found.items():
        assert starts(d, field, value), field


def test_far_over_budget_does_not_suggest_gpu_memory_utilization():
    fix = fix_of(scenario(model="llama-3.1-70b", gpu="l4"))
    assert "gpu_memory_utilization" not in fix and "parallelism.tp: 8" in fix


def test_every_suggestion_fits_on_its_own():
    """70B bf16 on one A100: two GPUs, a GPU with more memory, or 8-bit weights in the form
    it has tensor cores for (int8: no FP8 on Ampere)."""
    d = scenario(model="llama-3.1-70b", gpu="a100-80gb-sxm")
    fix = fix_of(d)
    found = suggestions(fix)
    assert found == {**found, "parallelism.tp": "2", "model.weight_dtype": "int8"} and "fp8" not in fix
    assert found["hardware.gpu"] == "b200"  # the least memory above 80 GB that holds it (same vendor)
    for field, value in found.items():
        assert starts(d, field, value), field


def test_a_forced_kv_cache_below_max_model_len_suggests_a_larger_one():
    fix = fix_of(scenario(kv_tokens=1024, max_model_len=4096), KVBelowMaxModelLenError)
    assert suggestions(fix) == {"model.max_model_len": "1024", "memory.kv_cache_tokens": "4096"}


@pytest.mark.parametrize(("model", "tp"), [("qwen3-next-80b-a3b", 2), ("gemma-3-27b", 1)])
def test_a_forced_kv_cache_suggests_room_for_what_a_sequence_holds_beside_its_tokens(model, tp):
    """A recurrent state (Qwen3-Next: 1,616 tokens' worth of blocks at TP2) or sliding
    windows take blocks of the same cache: the fix asks for them too, never for a negative
    max_model_len or for the size already set, and the size it asks for starts."""
    d = scenario(model=model, kv_tokens=1024, max_model_len=1024, tp=tp)
    with pytest.raises(KVBelowMaxModelLenError) as exc:
        Simulation(api.load(data=d))
    found = suggestions(exc.value.fix)
    assert not re.search(r"holds -\d", exc.value.message)  # it read "the KV cache holds -592 tokens"
    assert int(found["memory.kv_cache_tokens"]) > 1024
    assert starts(d, "memory.kv_cache_tokens", found["memory.kv_cache_tokens"])
    if "model.max_model_len" in found:
        assert int(found["model.max_model_len"]) > 0

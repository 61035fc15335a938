"""Defaults a hand-written scenario most likely did not mean are said, with the fix; a
model too big in its default format is offered the one it was released in."""

from __future__ import annotations

import pytest
from conftest import scenario

from simulator.config import load_scenario
from simulator.errors import ServesimError


def _warnings(d: dict, *sets: str) -> tuple[str, ...]:
    return load_scenario(data=d, overrides=list(sets)).warnings


def test_fp8_weights_alone_are_weight_only_and_said():
    d = scenario(model="llama-3.1-8b", gpu="h100-sxm")
    d["model"]["weight_dtype"] = "fp8"
    assert any("runs weight-only FP8 (W8A16)" in w for w in _warnings(d))
    assert not any("W8A16" in w for w in _warnings(d, "model.activation_dtype=bf16"))  # said: meant
    assert not any("W8A16" in w for w in _warnings(d, "hardware.gpu=a100-80gb-sxm"))  # no FP8 tensor cores


def test_the_roofline_default_is_said_where_kernel_tables_ship():
    d = scenario(gpu="h100-sxm")
    assert any("cost_model.backend: auto" in w for w in _warnings(d))
    assert not any("backend" in w for w in _warnings(d, "cost_model.backend=roofline"))  # chosen
    assert not any("backend" in w for w in _warnings(scenario(gpu="h20")))  # no tables to read


def test_a_set_that_creates_a_left_out_section_edits_its_default_variant():
    d = scenario()
    del d["scheduler"]
    loaded = load_scenario(data=d, overrides=["scheduler.enable_prefix_caching=false"])
    assert loaded.scenario.scheduler.policy == "vllm-v1" and loaded.scenario.scheduler.enable_prefix_caching is False


@pytest.mark.parametrize("model, gpu, tp, fix", [
    ("gpt-oss-120b", "b200", 1, "model.expert_weight_dtype: fp4 (the format it was released in)"),
    ("deepseek-v3", "h200", 8, "model.weight_dtype: fp8 with model.activation_dtype: fp8 (the format it was released in)"),
])
def test_a_model_too_big_in_bf16_is_offered_its_release_format_first(model, gpu, tp, fix):
    from simulator.simulation import Simulation

    d = scenario(model=model, gpu=gpu, tp=tp, max_model_len=4096)
    with pytest.raises(ServesimError) as exc:
        Simulation(load_scenario(data=d))
    assert exc.value.fix.startswith(f"set one of: {fix}")
    assert exc.value.fix.count("model.weight_dtype: fp8") <= 1  # said once

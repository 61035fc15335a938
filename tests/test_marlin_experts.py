"""vLLM's Marlin MoE chosen over the default kernel (`model.expert_kernel: marlin`).

InferenceX's gpt-oss scripts for H100/H200 export VLLM_MXFP4_USE_MARLIN=1 from vLLM 0.13.0
on; before that, and by vLLM's default, Hopper runs OpenAI's Triton MoE. The shipped
profiles carry Marlin's own rows (label w4a16m) for other models' expert shapes, which run
at about half the tensor rate of gpt-oss's Triton rows at prefill sizes. InferenceMAX ran
gpt-oss-120b's grid on Hopper with both kernels and measured the same steps, so on Hopper
Marlin at gpt-oss's shape reads the Triton rows of that shape; Marlin still pads the experts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.profile import load_profile
from simulator.api import load
from simulator.cost.calibrated.families import FAMILY_ADAPTERS
from simulator.cost.ops import IterationShape, moe_table_dtype, token_ops
from simulator.errors import ConfigError
from simulator.simulation import Simulation
from simulator.validation.measured import read_measured

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
GPT_OSS = ["model.name=gpt-oss-120b", "model.weight_dtype=bf16", "model.activation_dtype=bf16",
           "model.expert_weight_dtype=fp4", "hardware.gpu=h200", "cost_model.frontend_latency_ms=0"]


def test_marlin_has_its_own_label_only_for_four_bit_weights_under_16_bit_inputs():
    assert moe_table_dtype("fp4", "bf16", "marlin") == "w4a16m"
    assert moe_table_dtype("fp4", "bf16") == "w4a16"
    assert moe_table_dtype("fp4", "fp8", "marlin") == "w4a8"
    assert moe_table_dtype("bf16", "bf16", "marlin") == "bf16"


@pytest.mark.parametrize("gpu", ["h100_sxm", "h200_sxm"])
def test_the_shipped_hopper_profiles_carry_marlin_rows(gpu):
    profile = load_profile(ROOT / "calibration" / "profiles" / f"{gpu}-vllm.json")
    rows = [r for r in profile.table("moe").rows if r[6] == "w4a16m"]
    assert len(rows) > 400
    assert any("marlin" in k for k in profile.metadata.versions["kernels.moe"].split(", "))


def test_marlin_on_hopper_reads_the_same_shape_rows_and_pads_the_experts():
    auto = Simulation(load(BENCH, GPT_OSS))
    marlin = Simulation(load(BENCH, [*GPT_OSS, "model.expert_kernel=marlin"]))
    moe = {op.name: op for op in token_ops(64, marlin.sharded)}["fused_moe"]
    assert moe.shape[-1] == "w4a16m" and moe.dtype == "bf16"
    for shape in (IterationShape(8192, 1, 0, 0, ((8192, 0),)), IterationShape(32, 32, 32, 32 * 1024)):
        assert marlin.cost.iteration_time(shape) == auto.cost.iteration_time(shape)
    assert marlin.cost.timer.source_of(moe) == "profile-standin"  # what `simulate explain` prints
    # Marlin pads gpt-oss-120b's experts to 2944 x 3072 (the Triton path keeps 2880 x 2880).
    assert marlin.memory.weights_gib > auto.memory.weights_gib + 4


def test_marlin_elsewhere_reads_marlin_rows_of_other_shapes():
    """Off Hopper the default kernel at gpt-oss's shape is another one (FlashInfer's on
    Blackwell), so Marlin keeps its own rows, scaled across shapes: slower at prefill."""
    on_b200 = [*GPT_OSS, "hardware.gpu=b200"]
    auto = Simulation(load(BENCH, on_b200))
    marlin = Simulation(load(BENCH, [*on_b200, "model.expert_kernel=marlin"]))
    prefill = IterationShape(8192, 1, 0, 0, ((8192, 0),))
    assert marlin.cost.iteration_time(prefill) > 1.1 * auto.cost.iteration_time(prefill)


def test_only_hopper_marlin_has_a_same_shape_stand_in():
    moe = FAMILY_ADAPTERS["moe"]
    key = (2880, 4, 128, 1, "w4a16m")
    assert moe.same_shape_standin(key, "hopper") == (2880, 4, 128, 1, "w4a16")
    assert moe.same_shape_standin(key, "blackwell") is None
    assert moe.same_shape_standin((2880, 4, 128, 1, "w4a16"), "hopper") is None


@pytest.mark.parametrize("sets", [
    ["model.name=llama-3.1-8b", "model.expert_kernel=marlin"],
    [*GPT_OSS, "model.expert_weight_dtype=fp8", "model.expert_kernel=marlin"],
])
def test_marlin_refuses_what_it_cannot_run(sets):
    with pytest.raises(ConfigError, match=r"model\.expert_kernel"):
        Simulation(load(BENCH, sets))


def test_the_inferencex_hopper_recipe_selects_marlin_from_vllm_0_13(tmp_path):
    """A row naming vLLM 0.13 or later gets Marlin; an older or unnamed release keeps vLLM's
    default kernel (the shipped InferenceMAX runs name theirs: 0.13.0 and 0.11.2)."""
    src = tmp_path / "gptoss.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,vllm_version,ttft_ms,tpot_ms\n"
                   + "".join(f"h200_sxm,openai/gpt-oss-120b,fp4,1,8192,1024,4,{v},380,5\n"
                             for v in ("0.18.0", "", "0.11.2")))
    newer, unnamed, older = read_measured([src]).runs
    assert "model.expert_kernel=marlin" in newer.overrides
    assert not any("expert_kernel" in o for o in unnamed.overrides + older.overrides)
    assert all("scheduler.async_scheduling=true" in r.overrides for r in (newer, unnamed, older))

"""vLLM's Triton fused MoE for FP8 experts chosen over the default kernel
(`model.expert_kernel: triton`).

On Blackwell vLLM runs block-scaled FP8 experts on FlashInfer's TRT-LLM MoE; InferenceX's
first MiniMax-M2.5 FP8 B200 script (vLLM 0.17.0) turned FlashInfer and DeepGEMM MoE off, so
its experts ran Triton, and its expert-parallel test held for every row. The B200 profile
carries Triton's rows (label fp8t, from aiconfigurator's vLLM 0.19 table); on Hopper Triton
is the default under TP, and the default rows time it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.profile import load_profile
from simulator.api import load
from simulator.cost.ops import IterationShape, moe_table_dtype, token_ops
from simulator.errors import ConfigError
from simulator.simulation import Simulation
from simulator.validation.measured import read_measured

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
MINIMAX = ["model.name=minimax-m2.5", "parallelism.tp=2", "cost_model.frontend_latency_ms=0"]
PREFILL = IterationShape(8192, 1, 0, 0, ((8192, 0),))
DECODE = IterationShape(32, 32, 32, 32 * 1024)


def test_triton_has_its_own_label_only_for_fp8_experts():
    assert moe_table_dtype("fp8", "fp8", "triton") == "fp8t"
    assert moe_table_dtype("fp8", "fp8") == "fp8"
    assert moe_table_dtype("fp4", "bf16", "triton") == "w4a16"  # OpenAI's Triton MoE: the default rows
    assert moe_table_dtype("bf16", "bf16", "triton") == "bf16"


def test_the_b200_profile_carries_triton_rows_and_keeps_them_out_of_the_fit():
    profile = load_profile(ROOT / "calibration" / "profiles" / "b200_sxm-vllm.json")
    rows = [r for r in profile.table("moe").rows if r[7] == "fp8t"]
    assert any(r[1:6] == [3072, 768, 8, 256, 1] for r in rows)  # MiniMax-M2.5 at TP2
    assert any(r[1] == 3072 and r[5] == 2 for r in rows)  # and under expert parallelism
    assert "vllm_fused_moe" in profile.metadata.versions["kernels.moe"]
    assert profile.metadata.fit["moe"].eta_compute == pytest.approx(0.2933)  # the default kernels' fit
    hopper = load_profile(ROOT / "calibration" / "profiles" / "h200_sxm-vllm.json")
    assert not any(r[7] == "fp8t" for r in hopper.table("moe").rows)


def test_triton_on_b200_is_slower_than_the_trtllm_kernel_most_at_prefill():
    """aiconfigurator's B200 rows: Triton takes 1.1-1.3x the TRT-LLM kernel's time at decode
    batches and 1.5-2x at prefill sizes, at MiniMax-M2.5's expert shape."""
    auto = Simulation(load(BENCH, [*MINIMAX, "hardware.gpu=b200"]))
    triton = Simulation(load(BENCH, [*MINIMAX, "hardware.gpu=b200", "model.expert_kernel=triton"]))
    moe = {op.name: op for op in token_ops(64, triton.sharded)}["fused_moe"]
    assert moe.shape[-1] == "fp8t" and moe.dtype == "fp8"
    assert triton.cost.timer.source_of(moe) == "profile"
    assert 1.05 * auto.cost.iteration_time(DECODE) < triton.cost.iteration_time(DECODE)
    assert triton.cost.iteration_time(DECODE) < 1.4 * auto.cost.iteration_time(DECODE)
    assert 1.3 * auto.cost.iteration_time(PREFILL) < triton.cost.iteration_time(PREFILL)


def test_triton_on_hopper_is_the_default_kernel():
    auto = Simulation(load(BENCH, [*MINIMAX, "hardware.gpu=h200"]))
    triton = Simulation(load(BENCH, [*MINIMAX, "hardware.gpu=h200", "model.expert_kernel=triton"]))
    for shape in (DECODE, PREFILL):
        assert triton.cost.iteration_time(shape) == auto.cost.iteration_time(shape)
    moe = {op.name: op for op in token_ops(64, triton.sharded)}["fused_moe"]
    assert triton.cost.timer.source_of(moe) == "profile-standin"


@pytest.mark.parametrize("kernel", ["triton", "marlin"])
def test_a_kernel_choice_for_a_model_without_experts_says_so(kernel):
    with pytest.raises(ConfigError) as err:
        Simulation(load(BENCH, ["model.name=llama-3.1-70b", "hardware.gpu=b200", f"model.expert_kernel={kernel}"]))
    assert err.value.where == "model.expert_kernel" and "has no routed experts" in err.value.message


@pytest.mark.parametrize("overrides", [
    ["model.name=minimax-m2.5", "model.weight_dtype=bf16", "model.activation_dtype=bf16",
     "hardware.gpu=b200", "parallelism.tp=4"],  # bf16 experts
    ["model.name=minimax-m2.5", "hardware.gpu=h200", "model.activation_dtype=bf16",
     "parallelism.tp=4"],  # FP8 weights under 16-bit inputs (weight-only)
])
def test_triton_elsewhere_is_refused_with_the_reason(overrides):
    with pytest.raises(ConfigError) as err:
        Simulation(load(BENCH, [*overrides, "model.expert_kernel=triton"]))
    assert err.value.where == "model.expert_kernel" and "Triton" in err.value.message


def test_triton_without_its_rows_is_refused_not_guessed():
    """B300's tables time no Triton FP8 MoE: the default kernel's fitted roofline would read
    its prefill ~3x fast, so the run is refused; the roofline back end gives an estimate."""
    with pytest.raises(ConfigError) as err:
        Simulation(load(BENCH, [*MINIMAX, "hardware.gpu=b300", "model.expert_kernel=triton"]))
    assert err.value.where == "model.expert_kernel" and "b300" in err.value.message
    Simulation(load(BENCH, [*MINIMAX, "hardware.gpu=b300", "model.expert_kernel=triton", "cost_model.backend=roofline"]))
    Simulation(load(BENCH, [*MINIMAX, "hardware.gpu=gb200", "model.expert_kernel=triton"]))  # reads B200's


def _sweep_row(tmp_path: Path, version: str):
    src = tmp_path / f"sweep-{version}.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms,engine_version\n"
                   f"b200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,2,1024,1024,4,100,10,{version}\n")
    run, = read_measured([src]).runs
    return run


def test_the_v017_minimax_script_ran_triton_with_expert_parallelism(tmp_path):
    """PR 757's script (vLLM 0.17.0): FlashInfer and DeepGEMM MoE off, EP on for every row,
    the checkpoint's bf16 KV cache; PR 947 (vLLM 0.19.0) dropped all three."""
    old = _sweep_row(tmp_path, "0.17.0")
    assert {"model.expert_kernel=triton", "parallelism.expert_parallel=true",
            "memory.gpu_memory_utilization=0.95"} <= set(old.overrides)
    assert "model.kv_dtype=fp8" not in old.overrides and "PR 757" in old.launch_flags
    new = _sweep_row(tmp_path, "0.19.0")
    assert not any(o.startswith(("model.expert_kernel", "parallelism.expert_parallel")) for o in new.overrides)
    assert "model.kv_dtype=fp8" in new.overrides and "PR 757" not in new.launch_flags
    unnamed = tmp_path / "sweep.csv"  # a row that names no release: the script's latest version
    unnamed.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                       "b200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,2,1024,1024,4,100,10\n")
    run, = read_measured([unnamed]).runs
    assert "model.kv_dtype=fp8" in run.overrides and "model.expert_kernel=triton" not in run.overrides


def test_engine_version_picks_the_script_version_for_rows_that_name_no_release(tmp_path):
    src = tmp_path / "sweep.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                   "b200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,2,1024,1024,4,100,10\n")
    run, = read_measured([src], engine_version="0.17.0").runs
    assert "model.expert_kernel=triton" in run.overrides and run.engine_version == "0.17.0"


def test_the_first_minimax_h200_script_ran_without_expert_parallelism(tmp_path):
    """PR 831 (vLLM 0.16.0, TP4) passed no EP flag; PR 869's test turned it on, on TP8 rows
    from PR 958's v0.18.0 image on."""
    src = tmp_path / "sweep.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms,engine_version\n"
                   "h200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,4,1024,1024,4,100,10,0.16.0\n"
                   "h200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,8,1024,1024,4,100,10,0.18.0\n")
    tp4, tp8 = read_measured([src]).runs
    assert "parallelism.expert_parallel=true" not in tp4.overrides and "PR 831" in tp4.launch_flags
    assert "memory.gpu_memory_utilization=0.95" in tp4.overrides
    assert "parallelism.expert_parallel=true" in tp8.overrides and "PRs 869, 958" in tp8.launch_flags


@given(major=st.integers(0, 1), minor=st.integers(0, 40), patch=st.integers(0, 5))
@settings(max_examples=60, deadline=None)
def test_a_release_picks_the_script_version_it_ran(major, minor, patch):
    """Releases before 0.19.0 ran PR 757's B200 script, later ones PR 947's, whatever the
    patch level; exactly one recipe answers for every release."""
    from simulator.validation.recipes import launch_recipe

    version = f"{major}.{minor}.{patch}"
    recipe = launch_recipe("MiniMaxAI/MiniMax-M2.5", "b200_sxm", "fp8", 1024, 1024, version)
    older = (major, minor) < (0, 19)
    assert recipe is not None and (recipe.until == "0.19.0") == older
    assert ("model.expert_kernel=triton" in recipe.overrides(1024, version)) == older

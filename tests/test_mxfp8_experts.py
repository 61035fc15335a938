"""MXFP4 experts under MXFP8 inputs (vLLM's VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 on Blackwell).

The gpt-oss launch recipes for B200 set it, and FlashInfer's TRT-LLM MoE then runs the
expert GEMMs on the FP8 tensor cores: the shipped B200 profile carries those rows (from
aiconfigurator's SGLang tables of the same kernel), and a run that names the format gets
them instead of the W4A16 rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.profile import load_profile
from simulator.api import load
from simulator.cost.ops import IterationShape, moe_table_dtype, token_ops
from simulator.errors import ConfigError
from simulator.simulation import Simulation

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
GPT_OSS = ["model.name=gpt-oss-120b", "model.weight_dtype=bf16", "model.activation_dtype=bf16",
           "model.kv_dtype=fp8", "model.expert_weight_dtype=fp4", "hardware.gpu=b200",
           "cost_model.frontend_latency_ms=0"]


def _moe_rows(dtype: str, tp: int = 1) -> dict[int, float]:
    """tokens -> median us of gpt-oss-120b's expert shape at `tp` in the shipped B200 profile."""
    table = load_profile(ROOT / "calibration" / "profiles" / "b200_sxm-vllm.json").table("moe")
    return {r[0]: r[8] for r in table.rows
            if r[1:8] == [2880, 2880 // tp, 4, 128, 1, "power_law_1.2", dtype]}


def test_four_bit_weights_under_fp8_inputs_have_their_own_label():
    assert moe_table_dtype("fp4", "fp8") == "w4a8"
    assert moe_table_dtype("fp4", "bf16") == "w4a16"
    assert moe_table_dtype("fp4", "fp4") == "fp4"
    assert moe_table_dtype("fp8", "fp8") == "fp8"


def test_the_shipped_b200_profile_times_both_input_formats():
    """The same kernel with MXFP8 inputs: ~0.75x at decode batches, under 0.35x at 8k tokens."""
    w4a16, w4a8 = _moe_rows("w4a16"), _moe_rows("w4a8")
    assert set(w4a8) == set(w4a16) and len(w4a8) > 20
    assert all(w4a8[t] < w4a16[t] for t in w4a8)
    assert 0.6 < w4a8[8] / w4a16[8] < 0.9
    assert w4a8[8192] / w4a16[8192] < 0.35
    assert len(_moe_rows("w4a8", tp=8)) == len(w4a8)


def test_a_run_naming_fp8_expert_inputs_times_the_w4a8_rows():
    base = Simulation(load(BENCH, GPT_OSS))
    w4a8 = Simulation(load(BENCH, [*GPT_OSS, "model.expert_activation_dtype=fp8"]))
    moe = {op.name: op for op in token_ops(64, w4a8.sharded)}["fused_moe"]
    assert moe.shape[-1] == "w4a8" and moe.dtype == "fp8"
    assert w4a8.sharded.gemm_dtype == base.sharded.gemm_dtype == "bf16"  # attention stays bf16
    decode = IterationShape(32, 32, 32, 32 * 1500)
    prefill = IterationShape(8192, 1, 0, 0, ((8192, 0),))
    assert 0.7 < w4a8.cost.iteration_time(decode) / base.cost.iteration_time(decode) < 0.95
    assert w4a8.cost.iteration_time(prefill) / base.cost.iteration_time(prefill) < 0.7
    assert w4a8.memory == base.memory  # weights and KV cache are unchanged


def test_fp8_expert_inputs_need_fp8_tensor_cores():
    with pytest.raises(ConfigError) as err:
        Simulation(load(BENCH, [*GPT_OSS, "hardware.gpu=a100-80gb-sxm", "model.kv_dtype=bf16",
                                "model.expert_activation_dtype=fp8"]))
    assert err.value.where == "model.expert_activation_dtype"

"""MoE kernel rows read under the routing aiconfigurator's own estimator uses per model
family (models.spec.MoeRouting): alpha 1.2 for the generic MoE family, 1.01 for the rest."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import write_config
from test_catalogs import QWEN3_30B_A3B_CONFIG
from test_model_variants import GPT_OSS_120B_CONFIG, KIMI_K2_CONFIG

from calibration.profile import PROFILES_DIR, load_profile, parse_profile
from simulator.cost import CostModelConfig
from simulator.cost.calibrated import CalibratedTimer
from simulator.cost.ops import ShardedModel, token_ops
from simulator.hardware import get_gpu
from simulator.models import get_model, load_hf_config

SKEWED = ("gpt-oss-120b", "gpt-oss-20b", "mixtral-8x7b", "qwen3-235b-a22b", "qwen3-30b-a3b", "minimax-m2",
          "qwen3-vl-235b-a22b", "qwen3.5-397b-a17b", "qwen1.5-moe-a2.7b", "qwen2-57b-a14b")
FLATTER = ("deepseek-v3", "kimi-k2", "glm-5", "llama-4-maverick", "minimax-m3", "deepseek-v4-pro", "glm-4.6")


@pytest.mark.parametrize("name", SKEWED)
def test_the_generic_moe_family_reads_alpha_1_2(name):
    assert get_model(name).moe_routing == "power_law_1.2"


@pytest.mark.parametrize("name", FLATTER)
def test_deepseek_style_and_unmapped_families_read_alpha_1_01(name):
    assert get_model(name).moe_routing == "power_law_1.01"


@pytest.mark.parametrize("cfg, routing", [(QWEN3_30B_A3B_CONFIG, "power_law_1.2"),
                                          (GPT_OSS_120B_CONFIG, "power_law_1.2"),
                                          (KIMI_K2_CONFIG, "power_law_1.01")])
def test_a_config_json_gets_its_familys_routing(tmp_path, cfg, routing):
    assert load_hf_config(write_config(tmp_path, cfg)).moe_routing == routing


def _moe_op(model: str, tokens: int, tp: int = 2):
    sm = ShardedModel.build(get_model(model), tp, 1, "bf16", "bf16", "bf16", 8, expert_weight_dtype="fp4")
    return next(op for op in token_ops(tokens, sm) if op.name == "fused_moe")


def _routed(op, routing: str):
    """The same MoE op read under another routing."""
    return dataclasses.replace(op, shape=(*op.shape[:9], routing, op.shape[10]))


def test_the_shipped_tables_time_both_routings_and_skew_reads_fewer_experts():
    """gpt-oss-120b's W4A16 rows on the H100 at TP2 (which Marlin reads): a decode batch of 16 touches fewer
    experts under the steeper power law, so it takes less time; at 8k tokens every expert
    is busy under either."""
    rows = load_profile("h100_sxm-vllm").table("moe").rows
    by = {(r[6], r[0]): r[8] for r in rows if r[1:6] == [2880, 1440, 4, 128, 1] and r[7] == "w4a16"}
    assert {k[0] for k in by} == {"power_law_1.01", "power_law_1.2"}
    assert by["power_law_1.2", 16] < 0.95 * by["power_law_1.01", 16]
    assert by["power_law_1.2", 8192] == pytest.approx(by["power_law_1.01", 8192], rel=0.1)


def test_the_timer_reads_the_models_own_routing_rows():
    timer = CalibratedTimer(load_profile("h100_sxm-vllm"), get_gpu("h100-sxm"), CostModelConfig())
    skewed = _moe_op("gpt-oss-120b", 16)
    flat = _routed(skewed, "power_law_1.01")
    assert skewed.shape[9] == "power_law_1.2"
    assert timer.op_time(skewed) < 0.95 * timer.op_time(flat)
    assert timer.source_of(skewed) == timer.source_of(flat) == "profile"


def _only_flat_rows():
    """The shipped H100 profile as one written before the routing column would read."""
    raw = json.loads((PROFILES_DIR / "h100_sxm-vllm.json").read_text())
    moe = raw["tables"]["moe"]
    at = moe["columns"].index("routing")
    moe["rows"] = [r for r in moe["rows"] if r[at] == "power_law_1.01"]
    return parse_profile(json.dumps(raw))


def test_a_profile_without_the_wanted_routing_reads_the_other_one():
    """Rows of one routing only (a profile written before the routing column): a model of
    the other routing reads the same shape's rows rather than another shape's or a
    roofline, and says they stand in."""
    timer = CalibratedTimer(_only_flat_rows(), get_gpu("h100-sxm"), CostModelConfig())
    op = _moe_op("gpt-oss-120b", 16)
    flat = _routed(op, "power_law_1.01")
    assert timer.op_time(op) == pytest.approx(timer.op_time(flat))
    assert timer.source_of(op) == "profile-nearest" and timer.source_of(flat) == "profile"


@pytest.mark.parametrize("model, expert_dtype, kernel", [("gpt-oss-120b", "fp4", "marlin"),
                                                          ("qwen3-30b-a3b", "fp8", "triton")])
def test_a_kernels_same_shape_standin_falls_back_to_the_other_routing(model, expert_dtype, kernel):
    """On Hopper Marlin (gpt-oss) and Triton FP8 experts read the default kernel's rows of
    their own shape; with one routing's rows only, those rows still stand in (not another
    model's Marlin rows, and no refusal for want of Triton rows)."""
    timer = CalibratedTimer(_only_flat_rows(), get_gpu("h100-sxm"), CostModelConfig())
    act = "fp8" if expert_dtype == "fp8" else "bf16"
    sm = ShardedModel.build(get_model(model), 2, 1, act, act, "bf16", 8, expert_weight_dtype=expert_dtype,
                            expert_kernel=kernel)
    op = next(o for o in token_ops(64, sm) if o.name == "fused_moe")
    assert op.shape[9] == "power_law_1.2"
    key, _ = timer.models["moe"].adapter.locate(op)
    (standin,) = timer.models["moe"].candidates(key)
    assert standin[:4] == key[:4] and standin[5] == "power_law_1.01" and standin[4] != key[4]
    assert timer.source_of(op).startswith("profile-standin")


def test_a_scenario_may_name_another_routing():
    """`model.moe_routing` replaces the family's: gpt-oss's decode steps read the flatter
    rows and run longer; a dense model ignores it."""
    from simulator import api
    from simulator.simulation import resolve_model

    base = ["model.name=openai/gpt-oss-120b", "model.weight_dtype=bf16", "model.activation_dtype=bf16",
            "model.expert_weight_dtype=fp4", "hardware.gpu=h100-sxm", "parallelism.tp=2",
            "workload.arrival.concurrency=16", "workload.num_requests=64", "workload.output_tokens.value=256"]
    own = api.load("scenarios/benchmark-concurrency.yaml", base)
    flat = api.load("scenarios/benchmark-concurrency.yaml", [*base, "model.moe_routing=power_law_1.01"])
    assert resolve_model(own.scenario, own.base_dir).moe_routing == "power_law_1.2"
    assert resolve_model(flat.scenario, flat.base_dir).moe_routing == "power_law_1.01"
    runs = [api.run(s) for s in (own, flat)]
    assert [r.summary["config"]["moe_routing"] for r in runs] == ["power_law_1.2", "power_law_1.01"]
    assert runs[0].summary["tpot_ms"]["mean"] < 0.97 * runs[1].summary["tpot_ms"]["mean"]
    dense = api.load("scenarios/benchmark-concurrency.yaml", ["model.moe_routing=power_law_1.2"])
    assert resolve_model(dense.scenario, dense.base_dir) == resolve_model(
        api.load("scenarios/benchmark-concurrency.yaml").scenario, dense.base_dir)
    assert "moe_routing" not in api.run(dense).summary["config"]

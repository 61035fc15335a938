"""Mixture-of-experts models: routed expert GEMMs, expert activation with batch size,
memory, and a full run."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.api import load
from simulator.cost.ops import IterationShape, ShardedModel, active_experts, token_ops
from simulator.models import get_model
from simulator.simulation import Simulation

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"


def _sim(*overrides: str) -> Simulation:
    return Simulation(load(BENCH, ["cost_model.backend=roofline", "cost_model.frontend_latency_ms=0",
                                   *overrides]))


def test_one_token_activates_top_k_and_a_large_batch_all_experts():
    assert active_experts(1, 128, 8) == pytest.approx(8)
    assert active_experts(4096, 128, 8) == pytest.approx(128)
    assert active_experts(0, 128, 8) == 0


@given(st.integers(1, 5000), st.integers(1, 64))
def test_active_experts_is_monotone_and_bounded(m, k):
    e = 128
    a, b = active_experts(m, e, k), active_experts(m + 1, e, k)
    assert k - 1e-9 <= a <= b <= e + 1e-9
    assert a <= m * k + 1e-9  # cannot touch more experts than routed copies


def test_moe_ops_read_only_the_active_experts_weights():
    model = get_model("qwen3-30b-a3b")
    sm = ShardedModel.build(model, 1, 1, "bf16", "bf16", "bf16", 8)
    one = {op.name: op for op in token_ops(1, sm)}
    expert_bytes = 3 * model.hidden_size * model.moe_ffn_size * 2  # gate, up, down in bf16
    assert one["fused_moe"].bytes == pytest.approx(model.experts_per_token * expert_bytes, rel=0.01)
    assert "gate_up_proj" not in one and "down_proj" not in one
    many = {op.name: op for op in token_ops(4096, sm)}
    all_bytes = model.num_experts * expert_bytes
    assert many["fused_moe"].bytes >= all_bytes


def test_small_batch_decode_costs_the_active_not_the_total_size():
    """Batch-1 decode of Qwen3-30B-A3B (3.3B active) is far cheaper than a dense 32B, and
    per-token cost falls with batch as expert weight reads are shared."""
    moe = _sim("model.name=qwen3-30b-a3b", "model.weight_dtype=bf16", "model.activation_dtype=bf16")
    dense = _sim("model.name=qwen3-32b", "model.weight_dtype=bf16", "model.activation_dtype=bf16")

    def step(sim, b):
        return sim.cost.iteration_time(IterationShape(b, b, b, b * 1000))

    assert step(moe, 1) < 0.3 * step(dense, 1)
    assert step(moe, 64) / 64 < step(moe, 1) / 4
    assert step(moe, 1) < step(moe, 8) < step(moe, 64)


def test_calibrated_backend_times_moe_from_the_gpus_gemm_fit():
    roof = _sim("model.name=qwen3-235b-a22b", "parallelism.tp=4")  # FP8 at TP8 cuts its blocks: EP only
    cal = Simulation(load(BENCH, ["model.name=qwen3-235b-a22b", "parallelism.tp=4"]))
    assert cal.cost.timer.name == "calibrated"
    for b in (1, 32, 512):
        shape = IterationShape(b, b, b, b * 2048)
        t_cal, t_roof = cal.cost.iteration_time(shape), roof.cost.iteration_time(shape)
        assert 0.5 < t_cal / t_roof < 2.0


def test_moe_weights_and_kv_in_the_memory_plan():
    plan = _sim("model.name=qwen3-235b-a22b", "parallelism.tp=4").memory
    weights_gib = get_model("qwen3-235b-a22b").param_count / 4 / 1024**3  # fp8, 1 byte/param
    assert plan.weights_gib == pytest.approx(weights_gib, rel=0.01)
    assert plan.num_blocks > 0


def test_a_closed_loop_moe_run_completes_and_conserves_tokens(tmp_path):
    from simulator.api import run

    result = run(BENCH, ["model.name=mixtral-8x7b", "parallelism.tp=2", "hardware.gpu=h100-sxm",
                         "workload.arrival.concurrency=8", "workload.num_requests=24",
                         "workload.prompt_tokens.value=512", "workload.output_tokens.value=64"])
    req = result.requests
    assert (req["status"] == "completed").all()
    assert int(req["output_tokens"].sum()) == 24 * 64
    assert result.summary["kv_cache"]["peak_utilization"] <= 1.0


def test_sweep_rows_naming_moe_models_are_simulated_not_skipped(tmp_path):
    """The measured values here are placeholders: the test checks the row is predicted."""
    from simulator.validation import run_validation

    src = tmp_path / "sweep.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                   "h200_sxm,Qwen/Qwen3-235B-A22B-FP8,fp8,8,1024,64,4,100.0,10.0\n"
                   "h100_sxm,Qwen/Qwen3-30B-A3B,fp8,1,1024,64,4,100.0,10.0\n")
    result, _ = run_validation([src], BENCH, [], tmp_path / "out", rounds=2)
    assert result["skipped"] == []
    assert all(r["pred_ttft_ms"] > 0 and r["pred_tpot_ms"] > 0 for r in result["per_run"])


def test_calibration_grid_benchmarks_the_expert_gemm_shapes():
    from calibration.grid import build_plan

    model = get_model("qwen3-30b-a3b")
    nk = {(n, k) for _, n, k, _ in build_plan([model], [1]).gemm}
    assert (2 * model.moe_ffn_size, model.hidden_size) in nk  # gate+up of one expert
    assert (model.hidden_size, model.moe_ffn_size) in nk  # down

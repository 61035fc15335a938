"""Expert parallelism (vLLM --enable-expert-parallel): the routed experts split by expert
over the tp x dp GPUs, timed from the expert-parallel rows of the MoE kernel tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibration.profile import PROFILES_DIR, CalibrationError, parse_profile
from simulator.api import load
from simulator.cost.calibrated import CalibratedTimer
from simulator.cost.ops import ShardedModel, fused_moe_op
from simulator.hardware import get_gpu
from simulator.memory import weight_bytes_per_gpu
from simulator.models import get_model
from simulator.simulation import Simulation

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
MINIMAX_H200 = ["model.name=MiniMaxAI/MiniMax-M2.5", "hardware.gpu=h200-sxm", "model.kv_dtype=bf16",
                "cost_model.frontend_latency_ms=0"]


def _sim(*overrides: str) -> Simulation:
    return Simulation(load(BENCH, [*MINIMAX_H200, *overrides]))


def _moe_op(sim: Simulation, tokens: int):
    sm = sim.sharded
    return fused_moe_op(tokens, sm.hidden, sm.moe_ffn, sm.experts_per_token, sm.num_experts, "fp8",
                        ep=sm.ep, count=sm.moe_passes)


def test_the_flag_splits_whole_experts_over_all_tp_x_dp_gpus():
    model = get_model("MiniMaxAI/MiniMax-M2.5")
    by_width = ShardedModel.build(model, 2, 1, "fp8", "fp8", "bf16", 8, dp=2)
    by_expert = ShardedModel.build(model, 2, 1, "fp8", "fp8", "bf16", 8, dp=2, expert_parallel=True)
    assert (by_width.ep, by_width.moe_ffn) == (1, model.moe_ffn_size // 4)
    assert (by_expert.ep, by_expert.moe_ffn) == (4, model.moe_ffn_size)
    dense = ShardedModel.build(get_model("llama-3.1-8b"), 4, 1, "bf16", "bf16", "bf16", 8, expert_parallel=True)
    assert dense.ep == 1  # vLLM ignores the flag for a dense model


@given(st.integers(1, 8192), st.sampled_from([2, 4, 8, 16]))
def test_the_gpus_of_an_expert_parallel_group_share_the_work_and_weights_of_one(tokens, ep):
    """Summed over its ep GPUs, an expert-parallel MoE does the FLOPs and reads the expert
    weights of one GPU holding every expert: nothing is lost or counted twice."""
    one = fused_moe_op(tokens, 3072, 1536, 8, 256, "fp8")
    part = fused_moe_op(tokens, 3072, 1536, 8, 256, "fp8", ep=ep)
    assert part.flops * ep == pytest.approx(one.flops)
    assert part.shape[7] * ep == pytest.approx(one.shape[7])  # bytes the two GEMMs move
    assert part.shape[6] * ep == pytest.approx(one.shape[6])  # active experts


def test_expert_parallel_moe_reads_its_own_rows_of_the_kernel_tables():
    tp = _sim("parallelism.tp=4")
    ep = _sim("parallelism.tp=4", "parallelism.expert_parallel=true")
    op_tp, op_ep = _moe_op(tp, 32), _moe_op(ep, 32)
    assert ep.sharded.ep == 4 and op_ep.shape[8] == 4
    timer = ep.pools["serve"].cost.timer
    assert isinstance(timer, CalibratedTimer)
    assert timer.source_of(op_ep) == timer.source_of(op_tp) == "profile"
    # Other kernels (FlashInfer CUTLASS under EP, Triton under TP on H200): other times.
    assert timer.op_time(op_ep) != pytest.approx(timer.op_time(op_tp), rel=1e-3)
    # The rows themselves: the EP4 time is the table's, at a measured token count.
    rows = timer.models["moe"].trees
    assert any(key[3] == 4 for key in rows) and any(key[3] == 1 for key in rows)


def test_a_shape_without_expert_parallel_rows_is_not_timed_from_tensor_parallel_ones():
    """vLLM runs other MoE kernels under EP, so TP rows never stand in for EP ones."""
    ep = _sim("parallelism.tp=4", "parallelism.expert_parallel=true")
    model = ep.pools["serve"].cost.timer.models["moe"]
    key, _ = model.adapter.locate(_moe_op(ep, 32))
    assert all(k[3] == 4 for k in model.candidates(key))
    odd = (key[0], key[1], key[2], 3, key[4])  # no table has EP3
    assert model.candidates(odd) == []


def test_expert_parallel_run_completes_and_differs_from_width_split():
    a = _sim("parallelism.tp=4", "workload.num_requests=64").run(record_iterations=False)
    b = _sim("parallelism.tp=4", "parallelism.expert_parallel=true", "workload.num_requests=64").run(
        record_iterations=False)
    for r in (a, b):
        assert (r.requests["status"] == "completed").all()
        assert r.requests["output_tokens"].sum() == 64 * 1024
    assert (a.summary["config"]["ep"], b.summary["config"]["ep"]) == (1, 4)
    assert a.summary["tpot_ms"]["mean"] != b.summary["tpot_ms"]["mean"]


def test_expert_parallel_pads_whole_experts_not_slices():
    """gpt-oss MXFP4 on Blackwell: vLLM pads each expert's width to 256. Sliced 8 ways, 2880
    becomes 360 -> 512 per GPU; whole experts pad 2880 -> 3072 once."""
    model, gpu = get_model("openai/gpt-oss-120b"), get_gpu("b200")
    sliced = weight_bytes_per_gpu(model, "bf16", 8, 1, "fp4", (256, 256))
    whole = weight_bytes_per_gpu(model, "bf16", 8, 1, "fp4", (256, 256), expert_parallel=True)
    assert whole < sliced
    assert gpu.peak_tflops.get("fp4")


def _moe_without(moe: dict, rows: list[list], *columns: str) -> dict:
    """`moe` as a profile written before `columns` existed held `rows`."""
    drop = [moe["columns"].index(c) for c in columns]
    return {**moe, "columns": [c for c in moe["columns"] if c not in columns],
            "rows": [[v for i, v in enumerate(r) if i not in drop] for r in rows]}


def test_a_profile_from_before_the_ep_column_reads_as_tensor_parallel():
    """Such a profile also predates the routing column: its rows are power-law 1.01's."""
    raw = json.loads((PROFILES_DIR / "h200_sxm-vllm.json").read_text())
    moe = raw["tables"]["moe"]
    at, routing = moe["columns"].index("ep"), moe["columns"].index("routing")
    tp_rows = [r for r in moe["rows"] if r[at] == 1 and r[routing] == "power_law_1.01"]
    old = _moe_without(moe, tp_rows, "ep", "routing")
    profile = parse_profile(json.dumps({**raw, "tables": {**raw["tables"], "moe": old}}))
    assert profile.tables["moe"].columns[at] == "ep" and profile.tables["moe"].columns[routing] == "routing"
    assert profile.tables["moe"].rows == tp_rows


def test_a_profile_from_before_the_routing_column_reads_as_power_law_1_01():
    raw = json.loads((PROFILES_DIR / "h200_sxm-vllm.json").read_text())
    moe = raw["tables"]["moe"]
    routing = moe["columns"].index("routing")
    rows = [r for r in moe["rows"] if r[routing] == "power_law_1.01"]
    profile = parse_profile(json.dumps({**raw, "tables": {**raw["tables"], "moe": _moe_without(moe, rows, "routing")}}))
    assert profile.tables["moe"].rows == rows


def test_a_broken_shipped_profile_is_an_error_not_a_silent_roofline(monkeypatch):
    import simulator.cost.calibrated.profiles as calibrated

    def broken(_gpu, _backend="vllm"):
        raise CalibrationError("invalid profile: tables.moe.columns", where="h200_sxm-vllm.json")

    monkeypatch.setattr(calibrated, "shipped_profile_for", broken)
    with pytest.raises(CalibrationError):
        _sim()


def test_block_fp8_experts_that_a_width_split_would_cut_through_a_block_need_the_flag():
    """MiniMax-M2's 1,536-wide FP8 experts in 128 x 128 blocks: TP4 slices them into 384
    (three blocks), TP8 into 192, which vLLM refuses; expert parallelism keeps them whole.
    Weights that are not block-FP8 (bf16) split either way."""
    from simulator.errors import ExpertSplitError

    with pytest.raises(ExpertSplitError) as exc:
        _sim("parallelism.tp=8")
    assert exc.value.where == "parallelism.tp" and "expert_parallel: true" in exc.value.fix
    assert "192 per GPU" in exc.value.message
    assert _sim("parallelism.tp=8", "parallelism.expert_parallel=true").sharded.ep == 8
    assert _sim("parallelism.tp=4").sharded.moe_ffn == 384
    bf16 = ["model.weight_dtype=bf16", "model.activation_dtype=bf16", "hardware.gpu=b300"]
    assert _sim("parallelism.tp=8", *bf16).sharded.moe_ffn == 192
    with pytest.raises(ExpertSplitError):  # attention DP without the flag splits over tp x dp
        _sim("parallelism.tp=4", "parallelism.dp=2")


def test_qwen3s_own_block_fp8_release_is_held_to_its_blocks_too():
    """Qwen3's base releases are bf16 and its FP8 a separate block-scaled `-FP8` release
    (`native_fp8`): served FP8, it meets the same 128-wide blocks (vllm-project/vllm#17569:
    Qwen3-235B-A22B-FP8 at TP8 is refused, 192 per GPU)."""
    from simulator.errors import ExpertSplitError

    qwen = ["model.name=qwen3-235b-a22b"]
    with pytest.raises(ExpertSplitError, match="192 per GPU"):
        _sim(*qwen, "parallelism.tp=8")
    assert _sim(*qwen, "parallelism.tp=8", "parallelism.expert_parallel=true").sharded.ep == 8
    assert _sim(*qwen, "parallelism.tp=4").sharded.moe_ffn == 384


def test_a_measured_row_the_width_split_cannot_run_is_simulated_with_the_flag(tmp_path):
    """The server ran, so it ran the only split vLLM allows; the run says so. A user's own
    expert_parallel setting is kept, and then the row is skipped with the reason."""
    from simulator.validation import run_validation

    src = tmp_path / "sweep.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                   "h200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,8,1000,100,4,100.0,10.0\n"
                   "h200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,4,1000,100,4,100.0,10.0\n")
    result, _ = run_validation([src], BENCH, [], tmp_path / "a", rounds=1)
    assert result["skipped"] == [] and result["per_run"][0]["pred_tpot_ms"] > 0
    assert [n["note"].split(":")[0] for n in result["notes"]] == ["simulated with parallelism.expert_parallel=true"]
    result, _ = run_validation([src], BENCH, ["parallelism.expert_parallel=false"], tmp_path / "b", rounds=1)
    assert len(result["skipped"]) == 1 and "expert_parallel: true" in result["skipped"][0]["error"]

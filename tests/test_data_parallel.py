"""Attention data parallelism (`parallelism.dp`): each rank serves its own requests with its
own KV cache; a MoE model's experts are split over all ranks, whose MoE layers carry every
rank's tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import (
    closed_loop,
    decode_shape,
    engines,
    fixed,
    poisson,
    prefill_shape,
    scenario,
    simulate,
    time_limit,
    uniform,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants import check_invariants

from simulator.api import load
from simulator.cost.model import quantised_tokens
from simulator.cost.ops import ShardedModel, token_ops
from simulator.errors import ConfigError
from simulator.memory import weight_bytes_per_gpu
from simulator.models import get_model
from simulator.simulation import Simulation

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
MOE = "qwen3-30b-a3b"  # 30B bf16: fits one H100, so dp=1 and dp=2 both run


def moe_scenario(dp: int, **kw) -> dict:
    return scenario(model=MOE, gpu="h100-sxm", dp=dp, **kw)


def test_dp_splits_the_experts_and_keeps_the_rest_whole():
    model = get_model(MOE)
    one = weight_bytes_per_gpu(model, "bf16", 1, 1)
    two = weight_bytes_per_gpu(model, "bf16", 1, 1, dp=2)
    experts = model.expert_param_count * 2.0  # bf16
    assert one - two == pytest.approx(experts / 2, rel=1e-6)
    dense = get_model("llama-3.1-8b")
    assert weight_bytes_per_gpu(dense, "bf16", 1, 1, dp=4) == weight_bytes_per_gpu(dense, "bf16", 1, 1)


def test_dp_ops_run_the_experts_on_every_ranks_tokens():
    model = get_model(MOE)
    sm = ShardedModel.build(model, 2, 1, "bf16", "bf16", "bf16", 8, dp=2)
    assert sm.moe_ffn == model.moe_ffn_size // 4
    ops = {op.name: op for op in token_ops(16, sm, 48)}
    assert ops["fused_moe"].shape[0] == 48  # this rank's 16 and the peers' 32
    assert ops["moe_router"].shape[0] == 16
    assert ops["moe_dispatch"].shape[:2] == (48 * model.hidden_size * 2.0, 4)
    assert "moe_combine" in ops
    # The reduce-scatter ends each MoE layer in place of its TP all-reduce.
    assert ops["tp_allreduce"].count == 2 * sm.total_layer_passes - sm.moe_passes
    plain = ShardedModel.build(get_model("llama-3.1-8b"), 2, 1, "bf16", "bf16", "bf16", 8, dp=2)
    assert plain.dp == 1  # a dense model's ranks share nothing


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4096), st.integers(0, 8192), st.integers(1, 4096))
def test_peer_tokens_never_make_a_step_cheaper(m, others, more):
    cost = Simulation(load(data=moe_scenario(2))).cost
    base = cost.token_time(m)
    assert cost.token_time(m, 0) == base
    assert cost.token_time(m, others) >= base
    assert cost.token_time(m, others + more) >= cost.token_time(m, others) * (1 - 1e-9)


@given(st.integers(0, 10**7))
def test_quantised_tokens_stay_within_three_percent(n):
    q = quantised_tokens(n)
    assert abs(q - n) <= 0.032 * n
    assert quantised_tokens(q) == q


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_lone_request_under_dp_is_its_iterations(fast_forward):
    """The other rank is idle throughout, so it adds nothing to the MoE layers."""
    p, out = 300, 40
    d = moe_scenario(2, arrival=poisson(1.0), prompt=fixed(p), output=fixed(out), num_requests=1)
    sim, res = simulate(d, fast_forward=fast_forward)
    r = res.requests.iloc[0]
    cost = sim.cost
    assert r["ttft_ms"] == pytest.approx(cost.iteration_time(prefill_shape(p), from_idle=True) * 1e3, rel=1e-9)
    steps = [cost.iteration_time(decode_shape(p + j)) for j in range(out - 1)]
    assert r["tpot_ms"] == pytest.approx(np.mean(steps) * 1e3, rel=1e-9)


def test_summary_counts_every_ranks_gpus_and_cache():
    one_sim, _ = simulate(moe_scenario(1, num_requests=8))
    two_sim, two = simulate(moe_scenario(2, num_requests=8, replicas=2))
    assert two.summary["cost"]["gpus"] == 4
    assert two.summary["config"]["dp"] == 2
    kv = two.summary["kv_cache"]
    assert kv["total_capacity_tokens"] == kv["capacity_tokens"] * 4
    # Half the experts per GPU leaves each rank more room for KV than the whole model does.
    assert two_sim.memory.capacity_tokens > one_sim.memory.capacity_tokens
    assert len(engines(two_sim)) == 4


def test_ranks_share_a_closed_loop_evenly():
    """vLLM's DP balancer sends each request to the least-loaded rank."""
    sim, res = simulate(moe_scenario(2, arrival=closed_loop(8), prompt=fixed(256), output=fixed(64),
                                     num_requests=64))
    assert (res.requests["status"] == "completed").all()
    peaks = [e.scheduler.kv.peak_used for e in engines(sim)]
    assert min(peaks) > 0 and max(peaks) <= 1.25 * min(peaks)


def test_a_peers_prefill_holds_up_a_decoding_rank_for_the_whole_pass(tmp_path):
    """The ranks' forward passes are aligned (each MoE layer is a collective over them), so
    while one rank prefills 4,000 tokens the other's decode step lasts the prefill's pass:
    not just its own step with the prefill's tokens in its experts (the model before
    lockstep), which is less than half of it. The prompt that arrives mid-pass waits for
    the pass to end, as an idle vLLM rank running dummy passes does."""
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,64,200\n0.05,4000,2\n")
    d = moe_scenario(2, num_requests=2, sched={"async_scheduling": False})
    d["workload"] = {"arrival": {"type": "trace", "path": str(trace)}}
    sim, res = simulate(d)
    it = res.iterations
    (prefill,) = it.index[it["prefill_tokens"] == 4000]
    beside = it[(it["start_s"] == it.at[prefill, "start_s"]) & (it.index != prefill)]
    assert len(beside) == 1 and beside["decode_tokens"].iloc[0] == 1
    pass_ms = it.at[prefill, "duration_ms"]
    assert beside["duration_ms"].iloc[0] == pass_ms
    cost = sim.cost
    assert pass_ms == pytest.approx(cost.iteration_time(prefill_shape(4000), 1, from_idle=True) * 1e3, rel=1e-9)
    own_step_ms = cost.iteration_time(decode_shape(64 + 10), 4000) * 1e3
    assert pass_ms > 2 * own_step_ms
    earlier = it[it["start_s"] < 0.05]
    assert it.at[prefill, "start_s"] == pytest.approx((earlier["start_s"] + earlier["duration_ms"] / 1e3).max())


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_a_fixed_length_closed_loop_treats_both_ranks_alike(async_scheduling):
    """Eight clients of 1,000/100 tokens on two ranks: both ranks prefill in one pass, so no
    rank's clients decode slower than the other's (unaligned ranks priced the first rank to
    start without its peer's tokens, then its decode steps with the peer's whole prefill),
    and stepping every pass gives what the default run gives."""
    d = moe_scenario(2, arrival=closed_loop(8), prompt=fixed(1000), output=fixed(100), num_requests=80,
                     sched={"async_scheduling": async_scheduling})
    _, stepped = simulate(d, fast_forward=False)
    _, default = simulate(d)
    np.testing.assert_array_equal(default.requests["e2e_ms"].to_numpy(), stepped.requests["e2e_ms"].to_numpy())
    first = default.requests.nsmallest(8, "arrival_s")
    assert first["ttft_ms"].max() == pytest.approx(first["ttft_ms"].min(), rel=1e-9)
    tpot = default.requests["tpot_ms"]
    assert tpot.max() < 1.05 * tpot.min()


def assert_passes_aligned(iterations) -> None:
    """Lockstep: two iterations of one replica either are the same pass (same start and
    duration) or do not overlap."""
    for _, it in iterations.groupby("replica"):
        spans = it.groupby("start_s")["duration_ms"].agg(["min", "max"]).sort_index()
        assert (spans["min"] == spans["max"]).all()
        ends = spans.index.to_numpy() + spans["max"].to_numpy() / 1e3
        assert (spans.index.to_numpy()[1:] >= ends[:-1] - 1e-12).all()


def test_dp_with_pipeline_stages_is_refused_with_a_fix():
    with pytest.raises(ConfigError) as err:
        Simulation(load(data=moe_scenario(2, pp=2)))
    assert "parallelism.dp" in err.value.render() and "fix" in err.value.render()


@st.composite
def dp_scenarios(draw) -> dict:
    kind = draw(st.sampled_from(["poisson", "closed_loop"]))
    arrival = poisson(draw(st.floats(1.0, 200.0))) if kind == "poisson" else closed_loop(draw(st.integers(1, 24)))
    return moe_scenario(
        draw(st.sampled_from([2, 3, 4])),
        arrival=arrival,
        prompt=uniform(draw(st.integers(1, 64)), draw(st.sampled_from([64, 1500]))),
        output=uniform(1, draw(st.sampled_from([1, 24, 300]))),
        num_requests=draw(st.integers(1, 80)),
        seed=draw(st.integers(0, 2**16)),
        replicas=draw(st.integers(1, 2)),
        kv_tokens=draw(st.sampled_from([None, 2048])),
        max_model_len=2048,
        sched={"async_scheduling": draw(st.booleans())},
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dp_scenarios())
def test_dp_invariants_and_determinism(d):
    with time_limit(30.0):
        sim, res = simulate(d)
    check_invariants(d, sim, res)
    assert_passes_aligned(res.iterations)
    _, again = simulate(d)
    np.testing.assert_array_equal(res.requests["e2e_ms"].to_numpy(), again.requests["e2e_ms"].to_numpy())


SWEEP_HEAD = "system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms"
LAYOUT_HEAD = "system,model,precision,tp_size,pp_size,attention_dp_size,moe_ep_size,isl,osl,concurrency,ttft_ms,tpot_ms"


def _sweep(tmp_path: Path, row: str, head: str = SWEEP_HEAD, name: str = "sweep.csv") -> Path:
    src = tmp_path / name
    src.write_text(head + "\n" + row + "\n")
    return src


def test_a_sweep_row_too_large_for_its_tp_runs_with_the_smallest_dp_that_holds_it(tmp_path):
    """Qwen3-235B FP8 cannot fit one H200; aiconfigurator's sample measures it at tp_size 1
    with attention DP. The measured values are placeholders: the test checks the layout."""
    from simulator.validation import run_validation

    src = _sweep(tmp_path, "h200_sxm,Qwen/Qwen3-235B-A22B-FP8,fp8,1,1000,64,4,100.0,10.0")
    result, out = run_validation([src], BENCH, [], tmp_path / "out", rounds=2)
    assert result["skipped"] == []
    assert "parallelism.dp=2" in result["notes"][0]["note"]
    assert result["per_run"][0]["pred_tpot_ms"] > 0
    assert "inferred settings" in (out / "validation.html").read_text()
    # A DP size the user sets is kept, not inferred.
    result, _ = run_validation([src], BENCH, ["parallelism.dp=4"], tmp_path / "out4", rounds=2)
    assert result["notes"] == [] and result["skipped"] == []


def test_a_dense_model_too_large_for_its_tp_is_still_skipped_with_the_reason(tmp_path):
    from simulator.validation import run_validation

    src = _sweep(tmp_path, "h100_sxm,meta-llama/Llama-3.1-405B,fp8,1,1000,64,4,100.0,10.0\n"
                           "h100_sxm,meta-llama/Llama-3.1-70B,fp8,4,1000,64,4,100.0,10.0")
    result, _ = run_validation([src], BENCH, [], tmp_path / "out", rounds=2)
    assert len(result["skipped"]) == 1 and "does not fit" in result["skipped"][0]["error"]
    assert result["notes"] == []


def test_sweep_layout_columns_set_dp_pp_and_expert_parallelism(tmp_path):
    """Optional `attention_dp_size`/`dp_size`, `pp_size` and `moe_ep_size` columns
    (aiconfigurator's names) describe layouts tp_size alone cannot; blank cells keep the
    default. Measured values are placeholders: the test checks what is simulated."""
    from simulator.validation import run_validation

    src = _sweep(tmp_path, "h200_sxm,Qwen/Qwen3-30B-A3B,bf16,1,1,2,2,1000,64,8,100.0,10.0\n"
                           "h200_sxm,Qwen/Qwen3-30B-A3B,bf16,1,,,,1000,64,8,100.0,10.0\n"
                           "h200_sxm,Qwen/Qwen3-32B,bf16,1,2,,,1000,64,8,100.0,10.0\n"
                           "h200_sxm,Qwen/Qwen3-30B-A3B,bf16,2,1,1,4,1000,64,8,100.0,10.0", LAYOUT_HEAD, "layouts.csv")
    result, out = run_validation([src], BENCH, [], tmp_path / "out", rounds=2)
    assert result["skipped"] == []
    labels = [r["run"] for r in result["per_run"]]
    assert "tp1 dp2 ep2 isl1000" in labels[0] and "tp1 isl1000" in labels[1] and "tp1 pp2 isl1000" in labels[2]
    # vLLM's expert parallelism spans tp x dp GPUs; an EP size that does not is said per run.
    notes = {n["run"]: n["note"] for n in result["notes"]}
    assert list(notes) == [labels[3]] and "moe_ep_size 4 is not tp x dp = 2" in notes[labels[3]]
    # The layout columns act as the same `--set`s would on the plain row.
    dp_row, plain_row = result["per_run"][0], result["per_run"][1]
    assert dp_row["pred_tpot_ms"] != plain_row["pred_tpot_ms"]
    plain = tmp_path / "plain.csv"
    plain.write_text(src.read_text().splitlines()[0] + "\n" + src.read_text().splitlines()[2] + "\n")
    as_set, _ = run_validation([plain], BENCH, ["parallelism.dp=2", "parallelism.expert_parallel=true"],
                               tmp_path / "out2", rounds=2)
    assert as_set["per_run"][0]["pred_tpot_ms"] == dp_row["pred_tpot_ms"]
    assert as_set["per_run"][0]["pred_ttft_ms"] == dp_row["pred_ttft_ms"]
    # The input rows come back unchanged, blank cells included, with the predictions.
    written = (out / "validation.csv").read_text().splitlines()
    assert written[1].startswith("h200_sxm,Qwen/Qwen3-30B-A3B,bf16,1,1,2,2,1000,")
    assert written[2].startswith("h200_sxm,Qwen/Qwen3-30B-A3B,bf16,1,,,,1000,")


def test_a_sweep_layout_cell_that_is_not_a_whole_number_names_the_row(tmp_path):
    from simulator.validation import run_validation
    from simulator.validation.measurement import MeasurementError

    src = tmp_path / "bad.csv"
    src.write_text("system,model,precision,tp_size,pp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                   "h200_sxm,Qwen/Qwen3-32B,bf16,2,1.5,1000,64,8,100.0,10.0\n")
    with pytest.raises(MeasurementError) as exc:
        run_validation([src], BENCH, [], tmp_path / "out", rounds=2)
    assert "bad.csv:2" in str(exc.value) and "pp_size" in str(exc.value)
    assert not (tmp_path / "out").exists()


def test_a_zero_layout_cell_means_not_stated(tmp_path):
    """aiconfigurator's sample writes moe_ep_size 0 for dense models."""
    from simulator.validation import run_validation

    head = "system,model,precision,tp_size,moe_ep_size,isl,osl,concurrency,ttft_ms,tpot_ms"
    zero = _sweep(tmp_path, "h100_sxm,Qwen/Qwen3-32B,fp8,2,0,1000,64,4,100.0,10.0", head, "zero.csv")
    blank = _sweep(tmp_path, "h100_sxm,Qwen/Qwen3-32B,fp8,2,,1000,64,4,100.0,10.0", head, "blank.csv")
    a, _ = run_validation([zero], BENCH, [], tmp_path / "a", rounds=2)
    b, _ = run_validation([blank], BENCH, [], tmp_path / "b", rounds=2)
    assert a["skipped"] == [] and a["notes"] == []
    assert a["per_run"][0]["pred_tpot_ms"] == b["per_run"][0]["pred_tpot_ms"]


def two_rank_scenario(model: str, output_tokens: int) -> dict:
    """60 fixed-length requests at 20 req/s on one replica of two DP ranks."""
    return {"model": {"name": model, "max_model_len": 4096}, "hardware": {"gpu": "h100-sxm"},
            "parallelism": {"dp": 2},
            "workload": {"arrival": {"type": "poisson", "rate": 20.0}, "num_requests": 60, "seed": 3,
                         "prompt_tokens": {"type": "fixed", "value": 300},
                         "output_tokens": {"type": "fixed", "value": output_tokens}},
            "output": {"report": False}}


def test_outputs_name_the_dp_rank_of_each_request_and_step():
    """Each rank's steps and KV cache are its own: the records say which rank they are."""
    from simulator import api

    d = two_rank_scenario("qwen3-30b-a3b", 20)
    res = api.run(d)
    assert set(res.requests["dp_rank"]) == {0, 1} and set(res.iterations["dp_rank"]) == {0, 1}
    for rank, its in res.iterations.groupby("dp_rank"):
        assert (its["kv_blocks_used"] <= its["kv_blocks_total"]).all()
        # Each rank prefills exactly the prompts of the requests it served.
        served = res.requests[res.requests["dp_rank"] == rank]
        assert its["prefill_tokens"].sum() == served["prompt_tokens"].sum()
    single = api.run(d, overrides=["parallelism.dp=1"])
    assert "dp_rank" not in single.requests and "dp_rank" not in single.iterations


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_dense_models_dp_ranks_are_named_in_the_records_too(fast_forward):
    """A dense model's DP ranks run as independent engines (no lockstep, and they may
    fast-forward decode stretches); their rows carry their rank like attention-DP ranks'.
    The run used to fail building iterations.csv: ranks were asked for but never logged."""
    _, res = simulate(two_rank_scenario("llama-3.1-8b", 40), fast_forward=fast_forward)
    assert (res.requests["status"] == "completed").all()
    assert set(res.requests["dp_rank"]) == {0, 1} and set(res.iterations["dp_rank"]) == {0, 1}
    assert len(res.iterations) == res.summary["iterations"]
    for rank, its in res.iterations.groupby("dp_rank"):
        served = res.requests[res.requests["dp_rank"] == rank]
        assert its["prefill_tokens"].sum() == served["prompt_tokens"].sum()
        assert its["decode_tokens"].sum() == (served["output_tokens"] - 1).sum()

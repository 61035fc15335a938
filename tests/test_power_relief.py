"""A TP iteration's collective waits give back power: cost/sustained.py's power_relief,
its fit to the shipped H200 runs, and its use per iteration (cost_model.collective_power_relief)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import closed_loop, fixed, scenario, simulate, time_limit, uniform
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants import check_fast_forward_equivalent, check_invariants

from simulator import api
from simulator.cost import CostModelConfig
from simulator.cost.calibrated import calibrated_backend
from simulator.cost.ops import IterationShape
from simulator.cost.sustained import power_relief
from simulator.hardware import get_gpu
from simulator.simulation import Simulation

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
RELIEF_ON = "cost_model.collective_power_relief=true"


def test_relief_is_the_power_balance_in_closed_form():
    # A third of the time waiting at 0.58 of the limit: (1 - 0.58/3) / (2/3) = 1.21.
    assert power_relief(1 / 3, 0.58) == pytest.approx((1 - 0.58 / 3) * 1.5)
    assert power_relief(0.0, 0.58) == 1.0
    assert power_relief(0.4, 1.0) == pytest.approx(1.0)  # waits that draw the limit give nothing
    assert power_relief(0.5, 0.0) == pytest.approx(2.0)  # idle waits: the busy half may draw twice


@given(st.floats(0.0, 0.9), st.floats(0.0, 0.9), st.floats(0.0, 0.99), st.floats(0.0, 0.99))
def test_relief_grows_with_the_wait_and_shrinks_with_its_draw(s1, s2, q1, q2):
    lo, hi = sorted((s1, s2))
    assert 1.0 <= power_relief(lo, q1) <= power_relief(hi, q1) + 1e-12
    qa, qb = sorted((q1, q2))
    assert power_relief(hi, qa) >= power_relief(hi, qb) - 1e-12


def test_the_catalog_holds_the_fit_of_the_shipped_runs():
    """benchmarks/duty_cycle_fit.py over benchmarks/logs: the copy waits' q is the catalog's,
    idle spins draw less, and one q fits every kernel to a few percent."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from duty_cycle_fit import LOGS, fit, pairs

    ps = pairs(LOGS)
    q_copy, rms_copy = fit([p for p in ps if p.run.wait == "copy"])
    q_spin, rms_spin = fit([p for p in ps if p.run.wait == "spin"])
    assert len(ps) >= 40 and {p.run.tp for p in ps} == {2, 4, 8}
    assert get_gpu("h200").collective_wait_power_fraction == pytest.approx(q_copy, abs=0.005)
    assert q_spin < q_copy and max(rms_copy, rms_spin) < 0.03


def test_the_h100_entry_is_the_mean_of_its_calibrate_runs():
    """calibration/power.py's four logged H100 runs, refitted from the kernel times they
    printed: each reproduces its printed q, attention agrees with the catalog's 0.74, and the
    catalog holds their mean q."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from layer_power_repeat import refit

    runs = refit(ROOT / "benchmarks" / "logs" / "2026-11-27-h100-layer-power-repeat2.log")
    assert len(runs) == 4 and all(found.wait_power == printed for found, printed in runs)
    h100 = get_gpu("h100-sxm")
    assert all(round(abs(found.attention_fraction - h100.sustained_attention_fraction), 2) <= 0.01 for found, _ in runs)
    qs = [found.wait_power for found, _ in runs]
    assert h100.collective_wait_power_fraction == pytest.approx(sum(qs) / len(qs), abs=0.005)


def _timer(on: bool):
    return calibrated_backend(get_gpu("h200"), CostModelConfig(collective_power_relief=on), "h200_sxm-vllm")


def test_relief_speeds_compute_bound_ops_up_to_their_burst_time_only():
    from simulator.cost.ops import Op

    on, off = _timer(True), _timer(False)
    burst = calibrated_backend(get_gpu("h200"), CostModelConfig(sustained_tensor_rate=False), "h200_sxm-vllm")
    assert (on.collective_wait_power, off.collective_wait_power) == (0.58, None)
    m, n, k = 8192, 28672 // 8, 8192
    prefill = Op("gate_up_proj", "gemm", 2.0 * m * n * k, 1.0 * (m * k + n * k + 2 * m * n), 1, (m, n, k), "fp8")
    t0, t1, tb = on.op_time(prefill), on.op_time(prefill, 1.05), burst.op_time(prefill)
    assert tb < t1 < t0 and on.op_time(prefill, 2.0) == pytest.approx(tb)
    m = 8
    decode = Op("gate_up_proj", "gemm", 2.0 * m * n * k, 1.0 * (m * k + n * k + 2 * m * n), 1, (m, n, k), "fp8")
    assert on.op_time(decode, 1.2) == on.op_time(decode)  # memory-bound: HBM sets its pace


def _lone(overrides: list[str]) -> dict:
    loaded = api.load(BENCH, ["workload.arrival.concurrency=1", "workload.num_requests=1",
                              "workload.prompt_tokens.value=8192", *overrides])
    return api.run(loaded).summary


def test_a_tp8_prefill_gets_some_of_its_burst_speed_back_and_tp1_none():
    on, off = _lone(["parallelism.tp=8", RELIEF_ON]), _lone(["parallelism.tp=8"])
    burst = _lone(["parallelism.tp=8", "cost_model.sustained_tensor_rate=false"])
    assert burst["ttft_ms"]["mean"] < on["ttft_ms"]["mean"] < off["ttft_ms"]["mean"]
    assert on["tpot_ms"]["mean"] == pytest.approx(off["tpot_ms"]["mean"], rel=0.01)
    one_on, one_off = _lone(["parallelism.tp=1", RELIEF_ON]), _lone(["parallelism.tp=1"])
    assert one_on["ttft_ms"] == one_off["ttft_ms"]  # no collectives, nothing to give


def test_the_relief_follows_the_waits_share_of_the_iteration():
    """explain's numbers: a TP8 8k prefill waits ~a third of its time; its relief is the
    closed form of that share, and a TP1 one has none."""
    cost = Simulation(api.load(BENCH, ["parallelism.tp=8", RELIEF_ON])).cost
    shape = IterationShape(num_tokens=8192, num_emit=1, prefill_chunks=((8192, 0),))
    busy = cost.token_time(8192) + cost.emit_time(1) + cost.prefill_attention_time(((8192, 0),))
    share = cost.collective_time(8192) / busy
    assert 0.25 < share < 0.4
    assert cost.iteration_relief(shape) == pytest.approx(power_relief(share, 0.58), abs=1e-3)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tp=st.sampled_from([2, 4, 8]), clients=st.integers(1, 32), prompt=st.integers(16, 4000),
       output=st.integers(1, 120), budget=st.sampled_from([512, 2048, 8192]), kv=st.sampled_from([None, 30_000]))
def test_relief_keeps_every_invariant_and_fast_forward_exact(tp, clients, prompt, output, budget, kv):
    d = scenario("vllm-v1", arrival=closed_loop(clients), prompt=uniform(16, prompt), output=uniform(1, output),
                 num_requests=30, tp=tp, model="llama-3.1-70b", gpu="h200", max_model_len=8192, kv_tokens=kv,
                 sched={"max_num_batched_tokens": budget, "max_num_seqs": min(256, budget)})
    d["model"].update(weight_dtype="fp8", activation_dtype="fp8")
    d["cost_model"] = {"backend": "auto", "collective_power_relief": True}
    with time_limit(30.0):
        sim, res = simulate(d)
    check_invariants(d, sim, res)
    with time_limit(30.0):
        _, stepped = simulate(d, fast_forward=False)
    check_fast_forward_equivalent(d, res, stepped)


def test_invariants_and_fast_forward_hold_with_relief():
    d = scenario("vllm-v1", arrival=closed_loop(24), prompt=fixed(3000), output=fixed(200), num_requests=60,
                 tp=4, model="llama-3.1-70b", gpu="h200", max_model_len=8192, kv_tokens=40_000)
    d["model"]["weight_dtype"] = "fp8"
    d["model"]["activation_dtype"] = "fp8"
    d["cost_model"] = {"backend": "auto", "collective_power_relief": True}
    sim, res = simulate(d)
    assert sim.cost.wait_power == 0.58
    check_invariants(d, sim, res)
    assert (res.requests["status"] == "completed").all() and res.requests["preemptions"].sum() > 0
    _, stepped = simulate(d, fast_forward=False)
    check_fast_forward_equivalent(d, res, stepped)


def test_explain_says_how_far_the_waits_raise_the_rates_or_that_it_could():
    from simulator.explain import explain

    def notes(overrides: list[str]) -> str:
        return " ".join(explain(api.load(BENCH, overrides), prefill=8192).notes)

    on = notes(["parallelism.tp=8", RELIEF_ON])
    assert "let the clocks run 1.19" in on and "collective_power_relief=true models it" not in on
    off = notes(["parallelism.tp=8"])
    assert "draw 0.58 of its power limit (measured)" in off and "let the clocks run" not in off
    assert "power limit" not in notes(["parallelism.tp=1"])  # no waits at TP1

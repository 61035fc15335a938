"""`simulate plan` over disaggregated layouts: the space's product of prefill and decode
pools, units sized and priced by both pools' GPUs, the verification run with N units'
instances, and colocated points that keep their keys when disaggregated ones join them."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, cli

from simulator.config import load_scenario
from simulator.errors import ServesimError
from simulator.plan.config import gpus_per_replica, layout_label, load_plan
from simulator.plan.infeasible import plan_fix
from simulator.plan.runner import deployment_scenario, run_plan

TINY = ROOT / "scenarios" / "plans" / "tiny.yaml"
QUICK = {"tolerance": 0.25, "verify": False, "requests_per_point": 100, "max_requests_per_point": 400}


def tiny_plan(**space) -> dict:
    import yaml

    d = yaml.safe_load(TINY.read_text())
    d["space"] = {**d["space"], "gpu": ["h100-sxm"], **space}
    return d


def disaggregated(prefill: dict | None = None, decode: dict | None = None) -> dict:
    return {"prefill": prefill or {"tp": [1]}, "decode": decode or {"tp": [1]}}


def test_the_space_is_the_product_of_both_pools_beside_the_colocated_layouts():
    data = tiny_plan(tp=[1, 2], disaggregation=disaggregated({"tp": [1, 2]}, {"tp": [1], "replicas": [1, 2]}))
    points = load_plan(data=data).points
    pools = [p for p in points if p.params.get("pools")]
    assert len(points) == 2 + 2 * 2 and len(pools) == 4
    shapes = {(p.params["pools"]["prefill"]["tp"], p.params["pools"]["decode"]["replicas"]) for p in pools}
    assert shapes == {(1, 1), (1, 2), (2, 1), (2, 2)}
    for p in pools:
        d = p.scenario
        assert "parallelism" not in d and d["disaggregation"]["prefill"] == p.params["pools"]["prefill"]
        assert load_scenario(data=d).scenario.disaggregation is not None  # each one a valid scenario
        pre, dec = p.params["pools"]["prefill"], p.params["pools"]["decode"]
        assert gpus_per_replica(p.params) == pre["tp"] + dec["replicas"]  # both pools' GPUs
    big = next(p for p in pools if p.params["pools"]["prefill"]["tp"] == 2 and p.params["pools"]["decode"]["replicas"] == 2)
    assert layout_label(big.params) == "prefill TP2 + decode 2×TP1" and big.label.startswith("h100-sxm prefill TP2")


def test_colocated_points_keep_their_keys_when_disaggregated_ones_join():
    """A resumed sweep reuses every colocated result after the space gains disaggregation."""
    before = {p.key for p in load_plan(data=tiny_plan(tp=[1, 2])).points}
    after = load_plan(data=tiny_plan(tp=[1, 2], disaggregation=disaggregated())).points
    assert before == {p.key for p in after if not p.params.get("pools")}
    only = load_plan(data=tiny_plan(tp=None, colocated=False, disaggregation=disaggregated())).points
    assert len(only) == 1 and only[0].params["pools"]
    with pytest.raises(ServesimError, match=r"lists colocated layouts \(tp\)"):  # not dropped in silence
        load_plan(data=tiny_plan(tp=[1, 2], colocated=False, disaggregation=disaggregated()))


def test_a_disaggregated_base_is_its_own_layout_and_colocated_only_when_named():
    data = tiny_plan()
    del data["space"]["tp"]
    data["base"]["disaggregation"] = {"prefill": {"tp": 2}, "decode": {"tp": 1, "replicas": 2},
                                      "kv_transfer": {"latency_ms": 3.0}}
    points = load_plan(data=data).points
    assert len(points) == 1
    d = points[0].scenario
    assert d["disaggregation"]["prefill"] == {"tp": 2, "pp": 1, "replicas": 1}
    assert d["disaggregation"]["kv_transfer"] == {"latency_ms": 3.0}  # the base's transfer, as written
    assert gpus_per_replica(points[0].params) == 4
    data["space"]["tp"] = [1, 2]
    points = load_plan(data=data).points
    assert sorted(bool(p.params.get("pools")) for p in points) == [False, False, True]
    colocated = [p for p in points if not p.params.get("pools")]
    assert all("disaggregation" not in p.scenario for p in colocated)
    assert {load_scenario(data=p.scenario).scenario.parallelism.tp for p in colocated} == {1, 2}


def test_n_units_run_n_times_each_pool():
    loaded = load_plan(data=tiny_plan(tp=None, colocated=False, disaggregation=disaggregated({"tp": [2]},
                                                                                   {"replicas": [2]})))
    (point,) = loaded.points
    row = {"key": point.key, "label": point.label, "replicas": 3}
    d = deployment_scenario(loaded, row, rate=12.0, requests=500)
    dis = load_scenario(data=d).scenario.disaggregation
    assert (dis.prefill.tp, dis.prefill.replicas, dis.decode.tp, dis.decode.replicas) == (2, 3, 1, 6)
    assert point.scenario["disaggregation"]["decode"]["replicas"] == 2  # the point itself is untouched


def test_a_pool_fix_reads_in_plan_terms():
    fix = ("set one of: disaggregation.prefill.tp: 4; parallelism.tp: 2; disaggregation.decode.gpu: b200; "
           "memory.gpu_memory_utilization: 0.92")
    assert plan_fix(fix) == ("set one of: space.disaggregation.prefill.tp: [4]; space.tp: [2]; "
                             "space.disaggregation.decode.gpu: [b200]; base.memory.gpu_memory_utilization: 0.92")


def test_a_disaggregated_bases_pool_prices_and_placeholder_layout():
    """The base's pools keep their own price in the plan; its `parallelism` (a placeholder
    beside pools) is not a colocated layout to search unless the space names one."""
    data = tiny_plan()
    del data["space"]["tp"]
    data["base"]["disaggregation"] = {"prefill": {"tp": 1}, "decode": {"tp": 1, "gpu": "a100",
                                                                       "cost_per_gpu_hour": 1.0}}
    (point,) = load_plan(data=data).points
    assert point.scenario["disaggregation"]["decode"]["cost_per_gpu_hour"] == 1.0
    data["space"]["colocated"] = True
    with pytest.raises(ServesimError, match="names no colocated tp"):
        load_plan(data=data)


def test_a_non_paged_policy_is_an_infeasible_disaggregated_point(tmp_path):
    data = tiny_plan(tp=[1], disaggregation=disaggregated(), scheduler={"policy": ["vllm-v1", "static"]})
    data["search"] = {**data["search"], **QUICK}
    outcome = run_plan(load_plan(data=data), tmp_path / "out", workers=1)
    bad = [r for r in outcome.rows if r["pools"] and r["policy"] == "static"]
    assert len(bad) == 1 and bad[0]["status"] == "infeasible" and "paged KV" in bad[0]["reason"]
    good = [r for r in outcome.rows if r["pools"] and r["policy"] == "vllm-v1"]
    assert good[0]["status"] == "ok" and good[0]["max_rate_per_replica"] > 0


def test_a_disaggregated_recommendation_is_sized_priced_and_verified_as_units(tmp_path, capsys):
    data = tiny_plan(tp=None, colocated=False, disaggregation=disaggregated())
    data["target"] = {"rate": 300}  # more than one unit carries
    path = tmp_path / "plan.yaml"
    import yaml

    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert cli("plan", path, "-o", out, "--workers", 1) == 0
    stdout = " ".join(capsys.readouterr().out.split())
    assert "(prefill TP1 + decode TP1, " in stdout and " units)" in stdout
    best = json.loads((out / "plan.json").read_text())["recommendation"]
    assert best["verified"] and best["replicas"] >= 2 and best["pools"]["decode"]["tp"] == 1
    assert best["gpus"] == 2 * best["replicas"]
    assert best["usd_per_hour"] == pytest.approx(best["gpus"] * best["usd_per_gpu_hour"])
    rec = json.loads((out / "recommended" / "summary.json").read_text())
    assert rec["disaggregation"]["prefill"]["replicas"] == rec["disaggregation"]["decode"]["replicas"] == best["replicas"]
    assert rec["cost"]["gpus"] == best["gpus"]
    assert rec["ttft_ms"]["p99"] <= 500 and rec["tpot_ms"]["p99"] <= 50  # it meets the plan's SLO
    csv = (out / "plan.csv").read_text().splitlines()
    header = csv[0].split(",")
    row = dict(zip(header, csv[1].split(","), strict=True))
    assert row["prefill"] == "TP1" and row["decode"] == "TP1" and row["tp"] == ""


def test_the_shipped_disaggregated_plan_saves_gpus_at_a_tight_decode_slo(tmp_path):
    """README's example: at p99 TPOT <= 40 ms a unit of 2×TP4 prefill + TP4 decode carries
    16 req/s on 12 H100s, where every colocated layout needs 16 GPUs."""
    loaded = load_plan(ROOT / "scenarios" / "plans" / "llama70b-disaggregated.yaml")
    outcome = run_plan(loaded, tmp_path / "out", workers=2)
    best = outcome.recommendation
    assert best["verified"] and best["label"] == "h100-sxm prefill 2×TP4 + decode TP4" and best["gpus"] == 12
    colocated = [r for r in outcome.rows if r["rank"] is not None and not r["pools"]]
    assert colocated and min(r["gpus"] for r in colocated) == 16


def test_moe_pools_search_attention_dp_and_expert_parallelism():
    data = tiny_plan(tp=None, colocated=False, disaggregation=disaggregated(
        {"tp": [1]}, {"tp": [1], "dp": [1, 2], "expert_parallel": [False, True]}))
    data["base"]["model"]["name"] = "qwen3-30b-a3b"
    points = load_plan(data=data).points
    decode = sorted(layout_label(p.params).split(" + ")[1] for p in points)
    # EP over one GPU is the point without it, so three decode layouts, not four.
    assert decode == ["decode TP1", "decode TP1 DP2", "decode TP1 DP2 EP"]
    wide = next(p for p in points if p.params["pools"]["decode"].get("expert_parallel"))
    assert gpus_per_replica(wide.params) == 1 + 2
    assert load_scenario(data=wide.scenario).scenario.disaggregation.decode.dp == 2
    dense = tiny_plan(tp=None, colocated=False, disaggregation=disaggregated(
        {"tp": [1]}, {"tp": [2], "expert_parallel": [False, True]}))
    assert len(load_plan(data=dense).points) == 1  # no experts: the flag changes nothing


def test_pools_on_different_gpus_are_priced_per_pool_and_named_once():
    """A decode pool on A100 beside an H100 prefill pool: one point per GPU pair (the space's
    GPU list does not multiply a unit whose pools both name theirs), priced as the sum of
    each pool's GPUs at its own rate."""
    from simulator.hardware import get_gpu

    data = tiny_plan(tp=None, colocated=False, gpu=["h100-sxm", "h200"], disaggregation=disaggregated(
        {"tp": [1], "gpu": ["h100-sxm"]}, {"tp": [1], "gpu": ["a100", "h100-sxm"]}))
    data["prices"] = {"a100-80gb-sxm": 1.5}
    points = load_plan(data=data).points
    labels = sorted(p.label for p in points)
    # the all-H100 unit is an ordinary one, labelled as such
    assert labels == ["h100-sxm prefill TP1 + decode TP1", "prefill TP1 h100-sxm + decode TP1 a100-80gb-sxm"]
    mixed = next(p for p in points if "a100" in p.label)
    d = mixed.scenario
    assert d["hardware"]["gpu"] == "a100-80gb-sxm" and d["disaggregation"]["prefill"]["gpu"] == "h100-sxm"
    assert "gpu" not in d["disaggregation"]["decode"]  # the run's own GPU
    from simulator.plan.search import search_config

    rec = search_config({**mixed.task(load_plan(data=data)), "search": {**data["search"], **QUICK}})
    h100 = get_gpu("h100-sxm").cost_per_gpu_hour
    assert rec["status"] == "ok" and rec["gpus_per_replica"] == 2
    assert rec["usd_per_gpu_hour"] * 2 == pytest.approx(h100 + 1.5)  # GPUs x the blend = the unit's $/h
    # vLLM's defaults are each GPU's: the headline names both budgets
    assert (rec["prefill_max_num_batched_tokens"], rec["max_num_batched_tokens"]) == (8192, 2048)


def test_a_mixed_unit_keeps_the_bases_price_and_quantises_only_where_every_pool_can():
    data = tiny_plan(tp=None, colocated=False, weight_dtype=["fp8"], disaggregation=disaggregated(
        {"tp": [1], "gpu": ["h100-sxm"]}, {"tp": [1], "gpu": ["a100"]}))
    data["base"]["hardware"] = {"gpu": "h100-sxm", "cost_per_gpu_hour": 2.0}
    (point,) = load_plan(data=data).points
    pools = point.scenario["disaggregation"]
    assert pools["prefill"]["cost_per_gpu_hour"] == 2.0  # the base's rate for the base's GPU
    # A100 has no FP8 tensor cores: the unit runs FP8 weights weight-only, as vLLM would there
    assert point.params["activation_dtype"] == "bf16"
    sim_loaded = load_scenario(data=point.scenario)
    from simulator.simulation import Simulation

    sim = Simulation(sim_loaded)
    assert [p.price for p in sim.pools.values()] == [2.0, sim.pools["decode"].gpu.cost_per_gpu_hour]

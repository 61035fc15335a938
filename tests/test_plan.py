"""`simulate plan`: end to end on the tiny plan, a search with a known answer, infeasible
configurations, resume, failures that do not abort a sweep, clean errors, and the Ray
executor giving the same results as local processes."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from conftest import ROOT, cli, constant, cost_model_of, fixed, prefill_shape, scenario

from simulator.errors import ServesimError
from simulator.plan import search as search_mod
from simulator.plan.analysis import pareto
from simulator.plan.config import load_plan
from simulator.plan.runner import read_results, run_plan
from simulator.plan.search import search_config

TINY = ROOT / "scenarios" / "plans" / "tiny.yaml"
LLAMA70B = ROOT / "scenarios" / "plans" / "llama70b-chat.yaml"
#: Faster settings for tests that do not check the numbers themselves.
QUICK = {"tolerance": 0.25, "verify": False, "requests_per_point": 100, "max_requests_per_point": 400}


def tiny_plan(tmp_path, **search) -> dict:
    """The tiny plan as a dict (its base is inline, so it loads from anywhere)."""
    import yaml

    d = yaml.safe_load(TINY.read_text())
    d["search"] = {**d.get("search", {}), **search}
    return d


def lines(path) -> list[dict]:
    """The records of a results file; a torn line (an interrupted write) is skipped."""
    out = []
    for x in path.read_text().splitlines():
        try:
            out.append(json.loads(x))
        except json.JSONDecodeError:
            continue
    return out


# -- end to end ------------------------------------------------------------------------------
def test_tiny_plan_end_to_end(tmp_path, capsys):
    out = tmp_path / "plan"
    assert cli("plan", TINY, "-o", out, "--workers", 2) == 0
    stdout = capsys.readouterr().out
    assert "recommended:" in stdout and "runner-up:" in stdout
    for name in ("plan.csv", "plan.json", "plan.html", "plan.yaml", "results.jsonl", "recommended/report.html",
                 "recommended/summary.json"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "plan.json").read_text())
    assert summary["counts"] == {**summary["counts"], "configurations": 4, "infeasible": 1, "feasible": 3}
    best = summary["recommendation"]
    assert best["verified"] and best["rank"] == 1 and best["carried_rps"] == 20
    assert best["replicas"] >= math.ceil(20 / best["max_rate_per_replica"])  # more only if verification added
    assert best["gpus"] == best["replicas"] * best["tp"] * best["pp"]
    assert best["usd_per_hour"] == pytest.approx(best["gpus"] * best["usd_per_gpu_hour"])
    # The recommended run is the full deployment at the target rate, and it meets the SLO.
    rec = json.loads((out / "recommended" / "summary.json").read_text())
    assert rec["config"]["replicas"] == best["replicas"]
    assert rec["ttft_ms"]["p99"] <= 500 and rec["tpot_ms"]["p99"] <= 50
    # Every configuration is in the CSV; the ranked ones are cheapest first.
    csv = pd.read_csv(out / "plan.csv")
    assert len(csv) == 4
    ranked = csv.dropna(subset=["rank"]).sort_values("rank")
    assert list(ranked["usd_per_hour"]) == sorted(ranked["usd_per_hour"])
    assert ranked["pareto_cost_latency"].any() and csv["pareto_throughput"].any()
    # Infeasible configurations are listed with the reason (the memory breakdown).
    bad = csv[csv["status"] == "infeasible"].iloc[0]
    assert bad["gpu"] == "l4" and bad["tp"] == 1 and "does not fit" in bad["reason"]
    html = (out / "plan.html").read_text()
    assert 'href="recommended/report.html"' in html and "does not fit" in html and "data:image/png" in html


# -- the search -----------------------------------------------------------------------------
def test_binary_search_finds_an_analytic_capacity():
    """One request at a time (dynamic, batch 1, no wait), one output token, fixed prompts,
    constant arrivals: a D/D/1 queue whose capacity is exactly 1/S, S the prefill time."""
    base = scenario("dynamic", arrival=constant(1.0), prompt=fixed(512), output=fixed(1),
                    sched={"max_batch_size": 1, "max_wait_ms": 0.0})
    service = cost_model_of(base).iteration_time(prefill_shape(512))
    plan = {"base": base, "target": {"rate": 100.0}, "slo": {"ttft_ms": {"p99": 1.5 * service * 1e3}},
            "search": {"requests_per_point": 300, "tolerance": 0.05, "verify": False}}
    loaded = load_plan(data=plan)
    (point,) = loaded.points
    rec = search_config(point.task(loaded))
    assert rec["status"] == "ok", rec
    capacity = 1 / service
    assert rec["saturation_rps"] == pytest.approx(capacity, rel=1e-6)
    assert abs(rec["max_rate"] - capacity) <= 0.05 * capacity, (rec["max_rate"], capacity)
    lo, hi = rec["bracket"]
    assert hi - lo <= 0.05 * lo and lo == rec["max_rate"]
    # Below capacity TTFT is exactly S; every passing probe shows it.
    for p in rec["probes"]:
        if p["passed"]:
            assert p["ttft_p99_ms"] == pytest.approx(service * 1e3, rel=1e-6)


def test_early_stop_never_changes_a_verdict():
    """The live monitor stops only decided runs: with and without it, the same probes pass."""
    base = scenario("vllm-v1", prompt=fixed(256), output=fixed(64))
    plan = {"base": base, "target": {"rate": 10.0},
            "slo": {"ttft_ms": {"p99": 300}, "tpot_ms": {"p90": 30}, "attainment": {"ttft_ms": 300, "min_fraction": 0.95}},
            "search": {"requests_per_point": 200, "tolerance": 0.1, "verify": False}}
    results = []
    for early in (True, False):
        plan["search"]["early_stop"] = early
        loaded = load_plan(data=plan)
        results.append(search_config(loaded.points[0].task(loaded)))
    fast, full = results
    assert fast["max_rate"] == full["max_rate"]
    assert [(p["rate"], p["passed"]) for p in fast["probes"]] == [(p["rate"], p["passed"]) for p in full["probes"]]
    assert any(p["early_stop"] for p in fast["probes"]) and not any(p["early_stop"] for p in full["probes"])


def test_infeasible_configurations_say_why():
    plan = {"base": scenario(model="llama-3.1-70b"), "target": {"rate": 1.0}, "slo": {"ttft_ms": {"p99": 1000}},
            "space": {"gpu": ["h100-sxm"], "tp": [1, 3]}}
    loaded = load_plan(data=plan)
    recs = {p.params["tp"]: search_config(p.task(loaded)) for p in loaded.points}
    assert recs[1]["status"] == "infeasible" and "does not fit" in recs[1]["reason"]
    assert "weights" in recs[1]["reason"]  # the memory breakdown
    assert recs[3]["status"] == "infeasible" and "does not divide" in recs[3]["reason"]


def test_space_expands_knobs_per_policy():
    plan = {"base": scenario(), "target": {"rate": 1.0}, "slo": {"ttft_ms": {"p99": 1000}},
            "space": {"gpu": ["h100-sxm", "a100-80gb-sxm"], "weight_dtype": ["bf16", "fp8"],
                      "scheduler": {"policy": ["vllm-v1", "dynamic"], "max_num_seqs": [None, 64],
                                    "max_batch_size": [4]}}}
    loaded = load_plan(data=plan)
    scheds = {json.dumps(p.params["scheduler"], sort_keys=True) for p in loaded.points}
    assert scheds == {json.dumps(s, sort_keys=True) for s in (
        {"policy": "vllm-v1"}, {"policy": "vllm-v1", "max_num_seqs": 64}, {"policy": "dynamic", "max_batch_size": 4})}
    assert len(loaded.points) == 2 * 2 * 3
    acts = {(p.params["gpu"], p.params["weight_dtype"]): p.params["activation_dtype"] for p in loaded.points}
    assert acts[("h100-sxm", "fp8")] == "fp8"  # W8A8 on Hopper
    assert acts[("a100-80gb-sxm", "fp8")] == "bf16"  # weight-only where there are no FP8 tensor cores
    assert len({p.key for p in loaded.points}) == len(loaded.points)


def test_space_expands_data_and_expert_parallelism_for_moe_models_only():
    """dp and expert_parallel are dimensions of the space; a replica of TP2 DP2 counts 4 GPUs,
    and the flag, which changes nothing for a dense model, adds no dense-model points."""
    from simulator.plan.config import gpus_per_replica

    space = {"tp": [2], "dp": [1, 2], "expert_parallel": [False, True]}
    moe = load_plan(data={"base": scenario(model="qwen3-30b-a3b"), "target": {"rate": 1.0},
                          "slo": {"ttft_ms": {"p99": 1000}}, "space": space})
    assert [p.label for p in moe.points] == ["h100-sxm TP2", "h100-sxm TP2 EP", "h100-sxm TP2 DP2",
                                             "h100-sxm TP2 DP2 EP"]
    scen = {(p.params["dp"], p.params["expert_parallel"]): p.scenario["parallelism"] for p in moe.points}
    assert scen[(2, True)] == {"tp": 2, "pp": 1, "dp": 2, "expert_parallel": True, "replicas": 1}
    assert sorted(gpus_per_replica(p.params) for p in moe.points) == [2, 2, 4, 4]
    one_gpu = load_plan(data={"base": scenario(model="qwen3-30b-a3b"), "target": {"rate": 1.0},
                              "slo": {"ttft_ms": {"p99": 1000}}, "space": {**space, "tp": [1]}})
    assert [p.label for p in one_gpu.points] == ["h100-sxm TP1", "h100-sxm TP1 DP2", "h100-sxm TP1 DP2 EP"]
    dense = load_plan(data={"base": scenario(), "target": {"rate": 1.0},
                            "slo": {"ttft_ms": {"p99": 1000}}, "space": space})
    assert sorted((p.params["dp"], p.params["expert_parallel"]) for p in dense.points) == [(1, False), (2, False)]


def test_pareto_front():
    rows = [{"c": 1, "l": 5}, {"c": 2, "l": 3}, {"c": 3, "l": 3}, {"c": 4, "l": 1}, {"c": 2, "l": 6}]
    front = pareto(rows, lambda r: (r["c"], r["l"]))
    assert [(r["c"], r["l"]) for r in front] == [(1, 5), (2, 3), (4, 1)]


# -- resume and failures ---------------------------------------------------------------------
def test_resume_recomputes_nothing_finished(tmp_path):
    out = tmp_path / "plan"
    loaded = load_plan(TINY, data=tiny_plan(tmp_path, **QUICK))
    run_plan(loaded, out, workers=2)
    first = lines(out / "results.jsonl")
    assert len(first) == 4
    # A second run into the same folder must be told to resume.
    with pytest.raises(ServesimError, match="previous sweep"):
        run_plan(loaded, out, workers=2)
    outcome = run_plan(loaded, out, workers=2, resume=True)
    assert outcome.searched == 0 and outcome.reused == 4
    assert lines(out / "results.jsonl") == first  # nothing recomputed, nothing appended
    # Interrupted sweep: two records and a torn line survive; only the other two rerun.
    text = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(text[:2]) + '\n{"key": "torn')
    outcome = run_plan(loaded, out, workers=2, resume=True)
    assert outcome.searched == 2
    assert set(read_results(out / "results.jsonl")) == {r["key"] for r in first}
    after = {r["key"]: r for r in lines(out / "results.jsonl")[-2:]}
    before = {r["key"]: r for r in first}
    for key, rec in after.items():
        assert rec.get("max_rate") == before[key].get("max_rate")  # deterministic


def test_resume_via_cli_reuses_every_point(tmp_path, capsys):
    out = tmp_path / "plan"
    sets = [x for k, v in QUICK.items() for x in ("--set", f"search.{k}={json.dumps(v)}")]
    assert cli("plan", TINY, "-o", out, "-j", 1, "-q", *sets) == 0
    n = len(lines(out / "results.jsonl"))
    assert cli("plan", TINY, "-o", out, "-j", 1, "--resume", *sets) == 0
    assert "4 reused" in capsys.readouterr().out.replace("\n", " ")
    assert len(lines(out / "results.jsonl")) == n
    assert cli("plan", TINY, "-o", out, "-j", 1, "-q", *sets) == 2  # no --resume: refused
    assert "previous sweep" in capsys.readouterr().err


def test_a_failing_configuration_does_not_abort_the_sweep(tmp_path, monkeypatch):
    real = search_mod._search

    def flaky(task):
        if task["params"]["gpu"] == "l4" and task["params"]["tp"] == 2:
            raise RuntimeError("boom")
        return real(task)

    monkeypatch.setattr(search_mod, "_search", flaky)
    out = tmp_path / "plan"
    outcome = run_plan(load_plan(TINY, data=tiny_plan(tmp_path, **QUICK)), out, workers=1)
    status = {r["label"]: r["status"] for r in outcome.rows}
    assert status["l4 TP2"] == "error" and status["h100-sxm TP1"] == "ok"
    summary = json.loads((out / "plan.json").read_text())
    assert summary["counts"]["errors"] == 1 and summary["recommendation"] is not None
    err = next(r for r in lines(out / "results.jsonl") if r["status"] == "error")
    assert "RuntimeError: boom" in err["reason"]
    # Resume retries the failed configuration only.
    monkeypatch.setattr(search_mod, "_search", real)
    outcome = run_plan(load_plan(TINY, data=tiny_plan(tmp_path, **QUICK)), out, workers=1, resume=True)
    assert outcome.searched == 1 and all(r["status"] != "error" for r in outcome.rows)


def test_budget_target_maximises_rate(tmp_path):
    d = tiny_plan(tmp_path, **{**QUICK, "verify": True})
    d["target"] = {"max_gpus": 2}
    outcome = run_plan(load_plan(TINY, data=d), tmp_path / "plan", workers=2)
    best = outcome.recommendation
    assert best["gpus"] <= 2 and best["verified"]
    ok = [r for r in outcome.rows if r["rank"] is not None]
    assert best["carried_rps"] == max(r["carried_rps"] for r in ok)


def test_no_unverified_recommendation_when_verification_keeps_failing(tmp_path):
    """Static batches wait to fill, so at a low target their latency is worse than at the
    rates the search probed; every configuration fails verification. The sweep used to
    stop verifying after three and recommend the fourth, unverified and as infeasible."""
    d = tiny_plan(tmp_path, **{**QUICK, "verify": True, "max_verify_bumps": 0, "requests_per_point": 50})
    d["base"]["workload"].update(prompt_tokens=fixed(32), output_tokens=fixed(1))
    d["space"] = {"gpu": ["h100-sxm"], "tp": [1],
                  "scheduler": {"policy": ["static"], "max_batch_size": [4, 8, 16, 32]}}
    d["target"] = {"rate": 0.5}
    d["slo"] = {"e2e_ms": {"p90": 5000}}
    outcome = run_plan(load_plan(TINY, data=d), tmp_path / "plan", workers=1)
    assert len(outcome.verification) == 4 and not any(v["passed"] for v in outcome.verification)
    assert outcome.recommendation is None and all(r["rank"] is None for r in outcome.rows)


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d["space"].update(gpux=["h100-sxm"]), "space.gpux"),
    (lambda d: d["space"].update(gpu=["h100-sxn"]), "unknown GPU"),
    (lambda d: d.pop("target"), "target"),
    (lambda d: d["slo"].update(ttft_ms={"p98": 100}), "slo.ttft_ms.p98"),
    (lambda d: d["base"]["workload"].update(arrival={"type": "closed_loop", "concurrency": 4}), "searches over the arrival rate"),
    (lambda d: d["space"]["scheduler"].update(policy=["vllm-v9"]), "unknown scheduler policy"),
    (lambda d: d["base"]["model"].update(name="llama-9"), "unknown model"),
    (lambda d: d["space"].update(colocated=False, tp=None), "nothing to search"),
    (lambda d: d["space"].update(colocated=False), "lists colocated layouts (tp)"),
    (lambda d: d["space"].update(disaggregation={"decode": {"replicas": [0]}}), "space.disaggregation.decode"),
])
def test_bad_plans_are_one_clean_error(tmp_path, capsys, edit, needle):
    import yaml

    d = tiny_plan(tmp_path)
    d.setdefault("space", {}).setdefault("scheduler", {})
    edit(d)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(d))
    assert cli("plan", path, "-o", tmp_path / "out") == 2
    err = " ".join(capsys.readouterr().err.split())  # as read, not as the console wrapped it
    assert needle.lower() in err.lower() and "Traceback" not in err and "fix:" in err
    assert not (tmp_path / "out").exists()


PLANS = sorted((ROOT / "scenarios" / "plans").glob("*.yaml"))


@pytest.mark.parametrize("path", PLANS, ids=[p.name for p in PLANS])
def test_shipped_plans_load(path):
    """Every example plan validates, and so does each configuration's scenario."""
    loaded = load_plan(path)
    assert loaded.points and len({p.key for p in loaded.points}) == len(loaded.points)


def test_example_plans_cover_the_documented_spaces():
    assert TINY in PLANS and LLAMA70B in PLANS
    assert len(load_plan(LLAMA70B).points) == 9
    assert len(load_plan(ROOT / "scenarios" / "plans" / "bench-100.yaml").points) == 100


# -- Ray -----------------------------------------------------------------------------------------
def test_ray_executor_matches_local(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[ray]')")
    loaded = load_plan(TINY, data=tiny_plan(tmp_path, **QUICK))
    local = run_plan(loaded, tmp_path / "local", executor="local", workers=2)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False)
    try:
        remote = run_plan(loaded, tmp_path / "ray", executor="ray")
    finally:
        if started:
            ray.shutdown()
    strip = ("wall_s", "saturation_wall_s", "traceback")

    def norm(rec: dict) -> dict:
        rec = {k: v for k, v in rec.items() if k not in strip}
        rec["probes"] = [{k: v for k, v in p.items() if k != "wall_s"} for p in rec.get("probes", [])]
        if rec.get("at_max"):
            rec["at_max"] = {k: v for k, v in rec["at_max"].items() if k != "wall_s"}
        return rec

    assert {k: norm(v) for k, v in local.records.items()} == {k: norm(v) for k, v in remote.records.items()}
    assert [r["label"] for r in local.rows] == [r["label"] for r in remote.rows]


def test_missing_ray_says_how_to_install(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert cli("plan", TINY, "-o", tmp_path / "out", "--executor", "ray") == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[ray]'" in err and "Traceback" not in err


def test_an_unreachable_ray_address_is_refused_before_anything_is_written(tmp_path, capsys):
    """Ray retries an address nothing answers at for minutes; the plan refuses it at once."""
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert cli("plan", TINY, "-o", tmp_path / "out", "--executor", "ray", "--address", f"127.0.0.1:{port}") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"cannot reach Ray at 127.0.0.1:{port}" in err and "fix:" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target, needles", [
    # A rate no simulable fleet carries: refused per configuration, not simulated until memory runs out.
    ({"rate": 1e9}, ["target missed:", "more than the planner simulates (1,024)", "outside the target's rate"]),
    # A budget below one replica: the budget is blamed, with the smallest budget that buys one.
    ({"max_usd_per_hour": 0.5}, ["target missed:", "one replica is over the budget",
                                  "raise target.max_usd_per_hour to at least", "outside the target's budget"]),
    # The fix rounds up: following it buys the replica (2.99 $/h an H100).
    ({"max_usd_per_hour": 2.98}, ["raise target.max_usd_per_hour to at least 2.99 (one h100-sxm TP1)"]),
    # The smallest count space.replicas allows is what the budget must buy.
    ({"max_gpus": 3, "replicas": [4, 8]}, [
        "the smallest count space.replicas allows (4 replicas, 4 GPUs, $11.96/h) is over the budget",
        "raise target.max_gpus to at least 4 (4 × h100-sxm TP1, space.replicas' fewest)"]),
    # A free GPU under a dollar cap alone: nothing bounds the fleet, and the message says so.
    ({"max_usd_per_hour": 6, "prices": {"h100-sxm": 0}}, ["a $0/h GPU leaves target.max_usd_per_hour no bound"]),
])
def test_a_target_no_deployment_reaches_is_blamed_on_the_target(tmp_path, capsys, target, needles):
    import yaml

    d = tiny_plan(tmp_path, **QUICK)
    target = dict(target)
    if "replicas" in target:
        d["space"]["replicas"] = target.pop("replicas")
    if "prices" in target:
        d["prices"] = target.pop("prices")
    d["target"] = target
    d["space"]["gpu"] = ["h100-sxm"]
    d["space"]["tp"] = [1]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(d))
    assert cli("plan", path, "-o", tmp_path / "out", "--workers", 1) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert all(n in out for n in needles), out
    assert "SLO missed" not in out and "recommended: none" in out
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["recommendation"] is None


def test_a_rate_target_one_replica_over_a_gpu_cap_is_verified_at_the_cap(tmp_path, capsys):
    """Replicas pool their traffic: 250 req/s derives 3 H100s (120 req/s each), but 2 carry
    it. A `max_gpus: 2` cap used to drop the configuration as over the cap without a run;
    the cap's count is now verified, and passes."""
    import yaml

    d = tiny_plan(tmp_path)
    d["target"] = {"rate": 250, "max_gpus": 2}
    d["space"]["gpu"] = ["h100-sxm"]
    d["space"]["tp"] = [1]
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(d))
    assert cli("plan", path, "-o", tmp_path / "out", "--workers", 1) == 0
    rec = json.loads((tmp_path / "out" / "plan.json").read_text())["recommendation"]
    assert rec["replicas"] == 2 and rec["gpus"] == 2 and rec["verified"]
    d["target"]["max_gpus"] = 1  # two under the derived count: the cap stops it, without a run
    path.write_text(yaml.safe_dump(d))
    assert cli("plan", path, "-o", tmp_path / "out1", "--workers", 1) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "over the budget cap" in out and "recommended: none" in out

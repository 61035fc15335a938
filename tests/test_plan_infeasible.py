"""`simulate plan` says why configurations were infeasible, and when none was, it says so
instead of blaming the SLO."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from simulator.cli import main
from simulator.plan.infeasible import ReasonGroup, plan_fix, reason_groups, summary_lines

TINY = ROOT / "scenarios" / "plans" / "tiny.yaml"
QUICK = ("--set", "search.verify=false", "--set", "search.requests_per_point=100", "--set", "search.tolerance=0.25")


def plan(tmp_path, capsys, *sets: str) -> str:
    args = ["plan", str(TINY), "-o", str(tmp_path / "out"), "--workers", "1", *QUICK]
    for s in sets:
        args += ["--set", s]
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code
    return capsys.readouterr().out


def test_tp_that_does_not_divide_the_heads_is_named_not_the_slo(tmp_path, capsys):
    out = plan(tmp_path, capsys, "space.tp=[3]")
    assert "infeasible:  2 × tp=3 does not divide the 32 attention heads" in out
    assert "(h100-sxm TP3, l4 TP3)" in out
    assert "no configuration was feasible" in out and "set space.tp to one that divides 32" in out
    assert "under the SLO" not in out


def test_model_that_does_not_fit_suggests_a_space_that_does(tmp_path, capsys):
    out = plan(tmp_path, capsys, "space.gpu=[l4]", "space.tp=[1]")
    assert "infeasible:  does not fit: no memory left for the KV cache (l4 TP1)" in out
    assert "no configuration was feasible" in out and "space.tp: [2]" in out
    assert "under the SLO" not in out
    # The files keep the full reason, the memory breakdown included.
    rec = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[0])
    assert "weights (per GPU)" in rec["reason"] and rec["message"].startswith("does not fit")


def test_an_slo_miss_with_some_infeasible_still_blames_the_slo(tmp_path, capsys):
    out = plan(tmp_path, capsys, "space.tp=[1]", "slo.ttft_ms.p99=1")
    assert "infeasible:  does not fit: no memory left for the KV cache (l4 TP1)" in out
    assert "no configuration meets the target under the SLO" in out


def test_many_reasons_are_counted_and_capped():
    rows = [{"status": "infeasible", "key": str(i), "label": f"c{i}", "reason": f"r{i % 5}: bad\n  fix: do {i % 5}"}
            for i in range(12)] + [{"status": "ok", "key": "ok", "label": "fine", "reason": None}]
    groups = reason_groups(rows, {})  # records from before message/fix were stored: parsed from the reason
    lines = summary_lines(groups)
    assert lines[0] == "3 × r0: bad (c0, c5, c10)" and groups[0].fix == "do 0"
    assert lines[-1] == "… 4 more configurations for other reasons (plan.csv)" and len(lines) == 4
    many = summary_lines([ReasonGroup("m", None, [f"c{i}" for i in range(5)])])
    assert many == ["5 × m (c0, c1, c2, +2 more)"]


def test_scenario_fixes_become_space_fields():
    assert plan_fix("set one of: parallelism.tp: 8 with parallelism.pp: 2; hardware.gpu: b200; "
                    "memory.gpu_memory_utilization: 0.8") == (
        "set one of: space.tp: [8] with space.pp: [2]; space.gpu: [b200]; base.memory.gpu_memory_utilization: 0.8")


def test_plan_output_below_a_file_is_a_clean_error(tmp_path, capsys):
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(SystemExit) as exit_:
        main(["plan", str(TINY), "-o", str(blocker / "sub")])
    assert exit_.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is a file" in err and "Traceback" not in err


def test_an_empty_replica_list_is_refused_at_load(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["plan", str(TINY), "--set", "space.replicas=[]"])
    assert exit_.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "space.replicas: an empty list" in err and "[from --set" in err


@pytest.mark.parametrize(("override", "words"), [
    ("prices={h100-sxm: -2}", "prices.h100-sxm: Input should be greater than or equal to 0"),
    ("search={requests_per_point: 5000, max_requests_per_point: 100}", "max_requests_per_point (100) is below"),
])
def test_contradictory_plan_settings_are_refused_at_load(override, words, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["plan", str(TINY), "--set", override])
    assert exit_.value.code == 2
    assert words in " ".join(capsys.readouterr().err.split())

"""`simulate compare`: a base scenario and its variants, each the run `simulate` would make."""

from __future__ import annotations

import json

import pytest
from conftest import CHATBOT, ROOT, cli

from simulator import api
from simulator.compare import METRICS, build_variants, run_comparison
from simulator.errors import ServesimError

FEW = "workload.num_requests=60"


def test_each_column_is_the_run_simulate_makes(tmp_path, capsys):
    assert cli("compare", CHATBOT, "--set", FEW, "--variant", "slow: workload.arrival.rate=2",
               "--variant", "tp2: parallelism.tp=2", "-o", tmp_path / "out") == 0
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert [v["name"] for v in doc["variants"]] == ["base", "slow", "tp2"]
    for v, sets in zip(doc["variants"], ([FEW], [FEW, "workload.arrival.rate=2"], [FEW, "parallelism.tp=2"]),
                       strict=True):
        alone = api.run(CHATBOT, sets, record_iterations=False).summary
        assert v["summary"]["ttft_ms"] == alone["ttft_ms"] and v["summary"]["cost"] == alone["cost"]
    ttft = next(r for r in doc["table"] if r["metric"] == "TTFT p99")
    base, slow = ttft["values"][:2]
    assert ttft["change_pct"][0] == 0.0 and ttft["change_pct"][1] == pytest.approx((slow - base) / base * 100)
    gpus = next(r for r in doc["table"] if r["metric"] == "GPUs")
    assert gpus["values"] == [1.0, 1.0, 2.0]
    out = capsys.readouterr().out
    assert "tp2: parallelism.tp=2" in out and "(+100.0%)" in out  # twice the GPUs, in red
    csv = (tmp_path / "out" / "compare.csv").read_text().splitlines()
    assert csv[0] == "metric,unit,base,slow,tp2,slow change %,tp2 change %,slow change pts,tp2 change pts"
    # A fraction's change is the percentage points the table shows, in the files too.
    peak = next(r for r in doc["table"] if r["metric"] == "KV peak")
    assert peak["change_pts"][1] == pytest.approx((peak["values"][1] - peak["values"][0]) * 100)
    assert ttft["change_pts"] == [None, None, None]
    assert len(csv) == 1 + len(METRICS)
    page = (tmp_path / "out" / "compare.html").read_text(encoding="utf-8")
    assert "<th>base</th><th>slow</th><th>tp2</th>" in page and "data:image/png;base64," in page
    assert "<li><b>tp2</b>: parallelism.tp=2</li>" in page  # what each variant changes
    assert page.count("<tr>") == 1 + len(METRICS) and (tmp_path / "out" / "compare.png").stat().st_size > 0


def test_a_scenario_file_is_a_variant_too(tmp_path):
    variants = build_variants(CHATBOT, [FEW], [str(ROOT / "scenarios" / "summarization.yaml")])
    assert [v.name for v in variants] == ["base", "summarization"]
    comparison = run_comparison(variants)
    assert len(comparison.summaries) == 2
    assert comparison.summaries[1]["scenario"] == "summarization"
    # Its own workload and SLO are not the base's conditions: said, as an edit's are not.
    unlike = variants[1].unlike(variants[0])
    assert "its own workload (other requests)" in unlike and "its own SLO" in unlike
    same = build_variants(CHATBOT, [FEW], [str(CHATBOT), "tp2: parallelism.tp=2"])
    assert [v.unlike(same[0]) for v in same[1:]] == [None, None]


@pytest.mark.parametrize("variants, match", [
    ([], "nothing to compare the base with"),
    (["tp2 parallelism.tp=2"], "neither `NAME: path=value"),
    ([": parallelism.tp=2"], "has no name"),
    (["tp2:"], "changes nothing"),
    (["a: parallelism.tp=2", "a: parallelism.tp=4"], "used twice: a"),
    (["base: parallelism.tp=2"], "the name of the first column"),
    (["bad: parallelism.tp=3"], None),  # the scenario's own check, raised when it runs
])  # fmt: skip
def test_bad_variants_are_one_clean_error_and_write_nothing(variants, match, tmp_path, capsys):
    args = [a for v in variants for a in ("--variant", v)]
    assert cli("compare", CHATBOT, "--set", FEW, *args, "-o", tmp_path / "out") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error:") and "fix:" in err and "Traceback" not in err
    if match:
        assert match in err
    else:
        assert "tp=3 does not divide" in err
    assert not (tmp_path / "out").exists()


def test_a_variants_bad_edit_names_the_variant_and_its_edit(tmp_path):
    with pytest.raises(ServesimError) as exc:
        build_variants(CHATBOT, [], ["x: workload.arrival.rat=3"])
    assert exc.value.where.startswith("variant 'x': ")
    assert "[from its edit 'workload.arrival.rat=3']" in exc.value.message
    assert "--set" not in exc.value.render()


@pytest.mark.parametrize(("variant", "where", "says"), [
    ("x: foo", "--variant 'x'", "override 'foo' has no '='"),
    ("", "--variant", "an empty variant"),
])
def test_a_malformed_variant_is_named_as_a_variant(variant, where, says):
    with pytest.raises(ServesimError) as exc:
        build_variants(CHATBOT, [], [variant])
    assert exc.value.where == where and says in exc.value.message
    assert "--set" not in exc.value.render()


def test_a_variant_that_does_not_fit_is_named(tmp_path):
    variants = build_variants(CHATBOT, ["workload.num_requests=5"], ["big: model.name=llama-3.1-405b"])
    with pytest.raises(ServesimError) as exc:
        run_comparison(variants)
    assert exc.value.where.startswith("variant 'big': ") and "does not fit" in exc.value.message


def test_a_comparison_without_an_slo_has_no_attainment_rows_and_counts_read_whole():
    from simulator.compare import marked_change, shown

    variants = build_variants(ROOT / "scenarios" / "benchmark-concurrency.yaml", ["workload.num_requests=8"],
                              ["c8: workload.arrival.concurrency=8"])
    table = run_comparison(variants).rows()
    assert not {"goodput", "SLO attainment"} & {r["metric"] for r in table}
    units = {r["metric"]: r["unit"] for r in table}
    assert units["KV peak"] == "fraction" and shown(0.173, "fraction") == "17.3%"
    assert shown(16.0, "") == "16" and shown(2.5, "") == "2.50"  # three figures, as every table shows them
    assert marked_change(None, 0.0, 124.0, True) == ("worse", "from 0")  # preemptions appearing
    assert marked_change(None, 0.0, 1.0, False, "fraction") == ("better", "+100.0 pts")  # attainment 0 -> 100%
    assert marked_change(None, 0.0, 0.0, True) == (None, "")


def test_a_kv_peak_is_neither_better_nor_worse_and_fractions_change_in_points():
    """A lower KV peak may be a slower server: its change is shown uncoloured. Attainment
    11.7% -> 100% is +88.3 points, not +757%. Money shows to the cent."""
    from simulator.compare import marked_change, shown

    kv = next(m for m in METRICS if m[0] == "KV peak")
    assert kv[3] is None
    assert marked_change(-25.7, 0.231, 0.171, None, "fraction") == ("changed", "-6.0 pts")
    assert marked_change(757.1, 0.117, 1.0, False, "fraction") == ("better", "+88.3 pts")
    assert marked_change(12.3, 10.0, 11.23, False, "req/s") == ("better", "+12.3%")
    assert shown(23.92, "$/h") == "23.92"


def test_the_page_says_when_a_variant_ran_other_requests(tmp_path):
    """compare.json lists a scenario-file variant with its own workload; the shareable page
    says so too, instead of claiming every variant ran the same requests."""
    other = ROOT / "scenarios" / "llama70b-tp4-replicas.yaml"
    assert cli("compare", other, "--set", FEW, "--variant", str(CHATBOT), "-o", tmp_path / "out", "-q") == 0
    page = (tmp_path / "out" / "compare.html").read_text()
    warnings = json.loads((tmp_path / "out" / "compare.json").read_text())["warnings"]
    assert warnings and "Not every variant ran the base" in page and "Every variant ran the same" not in page

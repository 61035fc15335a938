"""What the command line says when the input is wrong or probably unintended: who made a
bad field (the file or a `--set`), a folder passed as a file, an arrival type switched with
a leftover field, a plan that cannot start, a validation whose error points at its inputs,
and the width of its tables in a pipe."""

from __future__ import annotations

import re

import pytest
from conftest import CHATBOT, ROOT, cli

from simulator import api
from simulator.errors import ServesimError

TINY_PLAN = ROOT / "scenarios" / "plans" / "tiny.yaml"
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"


def flat(text: str) -> str:
    return " ".join(text.split())


# -- who wrote the bad field ------------------------------------------------------------
def test_a_bad_set_is_named_not_blamed_on_the_file(capsys):
    assert cli(CHATBOT, "--set", "workload.arrival.rat=3", "-q") == 2
    err = flat(capsys.readouterr().err)
    assert "[from --set 'workload.arrival.rat=3']" in err
    assert "did you mean `rate`? correct or drop --set 'workload.arrival.rat=3'" in err
    assert "from the file" not in err


def test_an_unknown_section_made_by_set_names_the_set(capsys):
    assert cli(CHATBOT, "--set", "foo.bar=1", "-q") == 2
    err = flat(capsys.readouterr().err)
    assert "foo: Extra inputs are not permitted [from --set 'foo.bar=1']" in err


def test_a_bad_field_in_the_file_still_points_at_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(CHATBOT.read_text().replace("  arrival:", "  arival: 1\n  arrival:", 1))
    with pytest.raises(ServesimError) as exc:
        api.load(bad, ["workload.arrival.rate=2"])  # an unrelated --set is not blamed
    assert "--set" not in exc.value.message.split("\n")[1]
    assert "remove it (from the file, or with --set '~workload.arival')" in exc.value.fix


def test_a_folder_given_as_a_scenario_says_so(capsys):
    assert cli("run", ROOT / "scenarios", "-q") == 2
    err = flat(capsys.readouterr().err)
    assert "this is a folder, not a scenario file" in err
    assert "pass one YAML file, e.g." in err and ".yaml" in err


# -- an arrival switched by --set --------------------------------------------------------
def test_switching_the_arrival_type_warns_about_the_rate_it_keeps():
    loaded = api.load(CHATBOT, ["workload.arrival.type=closed_loop", "workload.arrival.concurrency=64"])
    assert loaded.scenario.workload.arrival.rate == 10.0  # valid: a closed loop's send-rate cap
    (warning,) = loaded.warnings
    assert "`rate: 10.0`, written for poisson, still applies" in warning
    assert "--set '~workload.arrival.rate'" in warning
    dropped = api.load(CHATBOT, ["workload.arrival.type=closed_loop", "workload.arrival.concurrency=64",
                                 "~workload.arrival.rate"])
    assert dropped.warnings == () and dropped.scenario.workload.arrival.rate is None
    assert api.load(CHATBOT, ["workload.arrival.rate=3"]).warnings == ()  # no switch, no warning
    same = api.load(BENCH, ["workload.arrival.type=closed_loop"])  # the file's own type
    assert same.warnings == ()


def test_the_run_command_prints_the_warning(tmp_path, capsys):
    assert cli(CHATBOT, "--set", "workload.arrival.type=closed_loop", "--set", "workload.arrival.concurrency=8",
               "--set", "workload.num_requests=20", "-q", "-o", tmp_path / "out") == 0
    assert "warning: --set workload.arrival.type=closed_loop" in flat(capsys.readouterr().err)


# -- vLLM's budget rule ------------------------------------------------------------------
def test_a_budget_below_max_num_seqs_is_refused_as_vllm_refuses_it():
    with pytest.raises(ServesimError) as exc:
        api.run(CHATBOT, ["scheduler.max_num_batched_tokens=100", "scheduler.max_num_seqs=200",
                          "workload.num_requests=5"])
    assert "max_num_batched_tokens (100) is below max_num_seqs (200)" in exc.value.message
    assert "at least 200" in exc.value.fix


def test_the_default_max_num_seqs_never_exceeds_an_explicit_budget():
    from simulator.simulation import Simulation

    sim = Simulation(api.load(CHATBOT, ["scheduler.max_num_batched_tokens=100"]))
    assert sim.max_num_seqs == 100  # vLLM's EngineArgs: min(usage default 1024, the budget)
    assert Simulation(api.load(CHATBOT)).max_num_seqs == 1024


# -- plans -------------------------------------------------------------------------------
def test_an_unknown_executor_is_refused_before_any_output(tmp_path, capsys):
    assert cli("plan", TINY_PLAN, "--executor", "foo", "-o", tmp_path / "out") == 2
    assert "unknown executor 'foo'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_zero_plan_workers_is_a_usage_error(tmp_path):
    assert cli("plan", TINY_PLAN, "-j", "0", "-o", tmp_path / "out") == 2
    assert not (tmp_path / "out").exists()


def test_a_plan_with_no_answer_says_why_each_configuration_missed(tmp_path, capsys):
    assert cli("plan", TINY_PLAN, "--set", "slo.ttft_ms.p99=1", "-o", tmp_path / "out") == 0
    out = flat(capsys.readouterr().out)
    assert "SLO missed: h100-sxm TP1: SLO not met even at" in out
    # The lowest rate is run out, so its reason gives the value reached, not just the limit.
    assert re.search(r"p99 TTFT [\d,.]+ ms > 1 ms", out)
    assert "recommended: none" in out
    # The fix names what the best configuration reached where the SLO was out of reach.
    assert "fix: relax the SLO to what the closest configuration reached" in out
    fix = out.split("fix:")[1].split("recommended:")[0]
    found = re.search(r"\(p99 TTFT ([\d,]+\.\d) ms on (h100-sxm TP\d)\)", fix)
    assert found and "TPOT" not in fix  # TPOT was met
    # Asking for what it names passes: the value is rounded up, not to the nearest ms.
    gpu_tp = found.group(2).split()
    assert cli("plan", TINY_PLAN, "--set", f"slo.ttft_ms.p99={found.group(1)}", "--set", f"space.gpu=[{gpu_tp[0]}]",
               "--set", f"space.tp=[{gpu_tp[1][2:]}]", "--set", "target.rate=0.5", "-o", tmp_path / "out2") == 0
    assert "recommended: none" not in flat(capsys.readouterr().out)


# -- validation --------------------------------------------------------------------------
def test_a_huge_error_points_at_the_inputs():
    from simulator.validation.scoring import mismatch_hint

    def result(mape, sweep=False):
        r = {"metrics": {"ttft_ms": {"all": {"mape": mape}}, "tpot_ms": {"all": {"mape": 4.0}}}}
        return {**r, "cliffs": {}} if sweep else r

    assert mismatch_hint(result(12.0)) is None
    hint = mismatch_hint(result(89.0))
    assert hint.startswith("An error of 89% usually means the inputs disagree")
    assert "--rounds" not in hint and "--rounds" in mismatch_hint(result(208.0, sweep=True))
    assert "prefix_id" not in hint  # only runs replayed from per-request timestamps can have resent prompts
    replayed = {**result(89.0), "kv_occupancy": {"runs": []}}
    assert "mark them with a per-request CSV's prefix_id and prefix_tokens columns" in mismatch_hint(replayed)


def test_an_empty_measurement_file_says_it_is_empty(tmp_path, capsys):
    empty = tmp_path / "e.csv"
    empty.write_text("")
    assert cli("validate", empty, "-s", BENCH, "-o", tmp_path / "out") == 2
    err = flat(capsys.readouterr().err)
    assert "the file is empty" in err and "arrival_s,prompt_tokens" in err
    assert not (tmp_path / "out").exists()


def test_skipped_rows_are_not_counted_as_runs(tmp_path, capsys):
    sweep = tmp_path / "part.csv"
    sweep.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                     "h200_sxm,llama-3.1-70b,fp8,1,128,16,2,100,10\n"
                     "h200_sxm,nosuch-model,fp8,1,128,16,2,100,10\n")
    assert cli("validate", sweep, "-s", BENCH, "-o", tmp_path / "out", "--rounds", 2) == 0
    assert "validation: 1 run(s), 1 skipped, against" in capsys.readouterr().out


# -- the terminal ------------------------------------------------------------------------
def test_version(capsys):
    from simulator import __version__

    assert cli("--version") == 0
    assert capsys.readouterr().out.strip() == f"servesim {__version__}"


def test_piped_output_is_laid_out_wider_than_80_columns(monkeypatch):
    from simulator.terminal import PIPED_WIDTH, make_console

    monkeypatch.delenv("COLUMNS", raising=False)
    console = make_console()
    assert not console.is_terminal and console.width == PIPED_WIDTH
    monkeypatch.setenv("COLUMNS", "80")
    assert console.width == 80  # COLUMNS, read when printing, still wins


def test_a_scenario_passed_to_plan_is_named_as_one(tmp_path, capsys):
    assert cli("plan", CHATBOT, "-o", tmp_path / "out") == 2
    err = flat(capsys.readouterr().err)
    assert "this is a scenario, not a plan" in err and "simulate run" in err
    assert "Field required" not in err
    assert not (tmp_path / "out").exists()


def test_run_options_may_come_before_the_scenario(tmp_path):
    assert cli("-q", CHATBOT, "--set", "workload.num_requests=5", "-o", tmp_path / "out") == 0
    assert (tmp_path / "out" / "summary.json").is_file()


@pytest.mark.skipif(not __import__("os").path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_an_uncreatable_output_folder_is_named_as_given(capsys):
    assert cli(CHATBOT, "-q", "--set", "workload.num_requests=5", "-o", "/proc/nope") == 2
    err = flat(capsys.readouterr().err)
    assert err.startswith("error: /proc/nope: cannot create the folder") and ".tmp-" not in err


def test_a_bad_plan_set_is_named_too(tmp_path, capsys):
    assert cli("plan", TINY_PLAN, "--set", "target.rat=5", "-o", tmp_path / "out") == 2
    err = flat(capsys.readouterr().err)
    assert "target.rat: Extra inputs are not permitted (got 5) [from --set 'target.rat=5']" in err
    assert "did you mean `rate`? correct or drop --set 'target.rat=5'" in err
    assert not (tmp_path / "out").exists()


def test_a_removal_by_set_is_named_as_the_cause(capsys):
    assert cli(CHATBOT, "--set", "~workload.arrival", "-q") == 2
    assert "workload.arrival: Field required [from --set '~workload.arrival']" in flat(capsys.readouterr().err)


# -- which override a problem is blamed on (the second audit) ------------------------------
def test_a_typo_in_the_file_is_not_blamed_on_a_set_below_it(tmp_path, capsys):
    typo = tmp_path / "typo.yaml"
    typo.write_text("model: {name: llama-3.1-8b}\nhardware: {gpu: h100-sxm}\nworkload:\n"
                    "  arrival: {type: poison, rate: 3}\n  prompt_tokens: {type: fixed, value: 100}\n"
                    "  output_tokens: {type: fixed, value: 10}\n")
    assert cli(typo, "--set", "workload.arrival.rate=20", "-q") == 2
    err = flat(capsys.readouterr().err)
    assert "Input tag 'poison'" in err and "[from --set" not in err


def test_a_set_that_switches_a_variant_is_named_for_what_the_variant_needs(capsys):
    assert cli(CHATBOT, "--set", "workload.arrival.type=closed_loop", "-q") == 2
    err = flat(capsys.readouterr().err)
    assert "workload.arrival.concurrency (closed_loop): Field required [from --set 'workload.arrival.type=closed_loop']" in err
    assert "add this field" in err  # the --set did not write the missing field: the fix stays
    assert cli(CHATBOT, "--set", "scheduler.policy=sarathi", "--set", "scheduler.max_num_batched_tokens=256", "-q") == 2
    assert "[from --set 'scheduler.policy=sarathi']" in flat(capsys.readouterr().err)


def test_removing_and_setting_at_once_is_refused(capsys):
    assert cli(CHATBOT, "--set", "~workload.arrival.rate=5", "-q") == 2
    assert "both removes a field and sets it" in flat(capsys.readouterr().err)


def test_a_field_made_by_set_is_named_when_the_run_is_built(capsys):
    assert cli(CHATBOT, "--set", "model.name=nope", "-q") == 2
    err = flat(capsys.readouterr().err)
    assert "unknown model 'nope'" in err and "[from --set 'model.name=nope']" in err
    assert cli("explain", CHATBOT, "--set", "model.name=nope") == 2
    assert flat(capsys.readouterr().err).startswith(f"error: {CHATBOT}: model.name: unknown model 'nope'")


def test_a_plan_passed_to_run_is_named_as_one(capsys):
    assert cli(TINY_PLAN, "-q") == 2
    err = flat(capsys.readouterr().err)
    assert "this is a capacity plan, not a scenario" in err and "simulate plan" in err


def test_a_plans_own_overrides_are_not_called_set(tmp_path, capsys):
    import yaml

    plan = yaml.safe_load((ROOT / "scenarios" / "plans" / "bench-100.yaml").read_text())
    plan["base"] = str(CHATBOT)
    plan["overrides"] = [*plan.get("overrides", []), "scheduler.bogus=1"]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(plan))
    assert cli("plan", path, "-o", tmp_path / "out") == 2
    err = flat(capsys.readouterr().err)
    assert err.startswith(f"error: {path}: base ({CHATBOT})")
    assert f"[from {path}'s overrides 'scheduler.bogus=1']" in err and "--set" not in err


def test_a_set_into_an_inline_base_is_named_as_typed(tmp_path, capsys):
    assert cli("plan", TINY_PLAN, "--set", "base.scheduler.bogus=1", "-o", tmp_path / "out") == 2
    err = flat(capsys.readouterr().err)
    assert "[from --set 'base.scheduler.bogus=1']" in err
    assert "correct or drop --set 'base.scheduler.bogus=1'" in err


def test_the_arrival_warning_is_for_a_switch_to_a_closed_loop_only():
    between_open_loops = api.load(CHATBOT, ["workload.arrival.type=constant"])
    assert between_open_loops.warnings == ()  # a constant rate is the same rate
    (warning,) = api.load(CHATBOT, ["workload.arrival.type=closed_loop", "workload.arrival.concurrency=4"]).warnings
    assert "now caps how fast the clients send" in warning


def test_piped_help_keeps_long_words_whole(monkeypatch):
    import typer.rich_utils as help_layout

    from simulator.terminal import PIPED_WIDTH, widen_piped_help

    monkeypatch.setattr(help_layout, "MAX_WIDTH", None)
    monkeypatch.setenv("COLUMNS", "80")
    widen_piped_help()
    assert help_layout.MAX_WIDTH is None  # COLUMNS wins
    monkeypatch.delenv("COLUMNS")
    widen_piped_help()
    assert help_layout.MAX_WIDTH == PIPED_WIDTH


def test_validate_names_the_set_behind_a_failure_every_run_shares(tmp_path, capsys):
    measured = tmp_path / "m.csv"
    measured.write_text("arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,e2e_ms\n0,100,10,50,20,230\n")
    assert cli("validate", measured, "-s", CHATBOT, "--set", "parallelism.tp=3", "-o", tmp_path / "out") == 2
    err = flat(capsys.readouterr().err)
    assert "no run could be simulated (1 of 1 failed)" in err
    assert "tp=3 does not divide the 32 attention heads of llama-3.1-8b [from --set 'parallelism.tp=3']" in err
    assert not (tmp_path / "out").exists()


# -- a --set inside a section whose own rule failed ------------------------------------
@pytest.mark.parametrize(("sets", "says"), [
    (["model.name="], "give exactly one of `name`"),
    (["workload.prompt_tokens.min=7000"], "is greater than max"),
])
def test_a_set_taking_part_in_a_sections_rule_is_named(sets, says):
    with pytest.raises(ServesimError) as exc:
        api.load(CHATBOT, sets)
    assert says in exc.value.message and f"[with --set '{sets[0]}']" in exc.value.message


def test_a_validators_own_error_names_the_file_and_the_set():
    with pytest.raises(ServesimError) as exc:
        api.load(CHATBOT, ["~workload.prompt_tokens"])
    assert exc.value.where == f"{CHATBOT}: workload.prompt_tokens"
    assert "[from --set '~workload.prompt_tokens']" in exc.value.message


@pytest.mark.parametrize("assignment", ["workload..arrival=5", ".workload=5"])
def test_a_set_path_with_an_empty_name_is_refused(assignment):
    with pytest.raises(ServesimError, match="empty name between dots"):
        api.load(CHATBOT, [assignment])


def test_a_value_no_form_of_a_field_accepts_is_one_problem_in_the_fields_words(tmp_path):
    """`replicas` takes a list of counts or `minimise`: pydantic's two complaints (with its
    internal member labels) are one line that names the field."""
    from simulator.plan.config import load_plan

    plan = tmp_path / "p.yaml"
    plan.write_text(TINY_PLAN.read_text().replace("  replicas: minimise", "  replicas: maximise", 1))
    with pytest.raises(ServesimError) as exc:
        load_plan(plan)
    text = exc.value.render()
    assert "literal[" not in text and "list[int]" not in text
    assert "space.replicas: Input should be 'minimise' or 'minimize'; or Input should be a valid list" in text

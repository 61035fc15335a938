"""The `simulate` command line: outputs, exit codes, clean errors, atomic output folders,
and determinism. Most cases call `simulator.cli.main` in-process (fast); a few run the
real entry point in a subprocess to see exactly what a user sees."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from conftest import CHATBOT, ROOT, cli

SMALL = ["--set", "workload.num_requests=50"]
FIGURES_MIN = 3


def strict_json(text: str):
    def _no_constants(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=_no_constants)


def check_outputs(out, n: int, *, report: bool = True) -> dict:
    summary = strict_json((out / "summary.json").read_text())
    assert summary["requests"]["completed"] + summary["requests"]["rejected"] == n
    req = pd.read_csv(out / "requests.csv")
    assert len(req) == n
    assert {"request_id", "ttft_ms", "tpot_ms", "e2e_ms", "status"} <= set(req.columns)
    it = pd.read_csv(out / "iterations.csv")
    assert len(it) == summary["iterations"] > 0
    assert (out / "scenario.yaml").is_file()
    if report:
        html = (out / "report.html").read_text()
        assert "<html" in html.lower()
        pngs = sorted(out.glob("*.png"))
        assert len(pngs) >= FIGURES_MIN
        assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    return summary


def no_leftovers(tmp_path, name: str = "out") -> None:
    assert not (tmp_path / name).exists(), "an output folder was left behind"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".{name}")], \
        "a temporary output folder was left behind"


def test_shorthand_writes_every_output(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli(CHATBOT, *SMALL, "-o", out, "--quiet") == 0
    check_outputs(out, 50)
    assert capsys.readouterr().out == ""  # --quiet: no table
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_run_subcommand_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli("run", CHATBOT, *SMALL, "-o", out, "--no-report") == 0
    check_outputs(out, 50, report=False)
    assert not (out / "report.html").exists()
    text = capsys.readouterr().out
    assert "TTFT" in text and "throughput" in text and str(out.name) in text
    assert re.search(r"mean\s.*p50\s.*p90\s.*p95\s.*p99", text)  # DESIGN.md §3's percentiles
    # Which kernel times drove the run is printed and kept in summary.json.
    kernels = strict_json((out / "summary.json").read_text())["config"]["kernel_times"]
    assert kernels.startswith("aiconfigurator:h100_sxm/vllm/")  # chatbot: backend auto, one H100
    # H100's BF16 rate measured back to back, and prefill attention's inside a prefill layer
    assert kernels.endswith("sustained bf16 0.85; prefill attention 0.74")
    assert "kernels" in text and kernels.split(" ")[0] in text
    assert "cost       1 GPU, $" in text  # one H100: singular
    assert cli("run", CHATBOT, *SMALL, "--set", "parallelism.tp=2", "-o", tmp_path / "tp2", "--no-report") == 0
    assert "cost       2 GPUs, $" in capsys.readouterr().out


def test_same_seed_same_outputs(tmp_path):
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert cli(CHATBOT, *SMALL, "-o", out, "--quiet", "--no-report") == 0
        s = strict_json((out / "summary.json").read_text())
        s.pop("sim_wall_s")
        runs.append((s, (out / "requests.csv").read_bytes(), (out / "iterations.csv").read_bytes()))
    assert runs[0] == runs[1]
    # A different seed gives a different run.
    out = tmp_path / "c"
    assert cli(CHATBOT, *SMALL, "--set", "workload.seed=1", "-o", out, "--quiet",
               "--no-report") == 0
    assert (out / "requests.csv").read_bytes() != runs[0][1]


def test_rerun_replaces_a_previous_output_folder(tmp_path):
    out = tmp_path / "out"
    assert cli(CHATBOT, "--set", "workload.num_requests=20", "-o", out, "-q", "--no-report") == 0
    assert cli(CHATBOT, "--set", "workload.num_requests=30", "-o", out, "-q", "--no-report") == 0
    assert len(pd.read_csv(out / "requests.csv")) == 30


@pytest.mark.parametrize("what", ["gpus", "models", "policies"])
def test_list_commands(what, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # rich wraps tables at the terminal width
    assert cli("list", what) == 0
    text = capsys.readouterr().out
    expected = {"gpus": "h100-sxm", "models": "llama-3.1-8b", "policies": "vllm-v1"}[what]
    assert expected in text


def test_list_gpus_names_the_kernel_tables_auto_uses(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    assert cli("list", "gpus") == 0
    rows = {line.split()[0]: line.split()[6:] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert rows["h200"][0] == "h200_sxm-vllm"
    assert rows["gb200"][0] == "b200_sxm-vllm"  # its die's tables
    assert rows["gb300"][0] == "gb300-vllm"  # its own
    assert rows["h20"][:2] == ["—", "(roofline)"]


@pytest.mark.parametrize("what", ["gpus", "models"])
def test_list_never_cuts_the_names_a_scenario_types(what, capsys, monkeypatch):
    """At 80 columns (a pipe's width) every catalog name stands whole at the start of a line."""
    from simulator.hardware import GPU_CATALOG
    from simulator.models import MODEL_CATALOG

    monkeypatch.setenv("COLUMNS", "80")
    assert cli("list", what) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 80
    firsts = {line.split()[0] for line in lines if line.strip()}
    assert set(GPU_CATALOG if what == "gpus" else MODEL_CATALOG) <= firsts
    # Nothing is cropped: a folded description still reads whole, word by word.
    words = " ".join(lines).split()
    for text in ([g.display_name for g in GPU_CATALOG.values()] if what == "gpus"
                 else [f"top-{m.experts_per_token}" for m in MODEL_CATALOG.values() if m.is_moe]):
        for word in text.split():
            assert word in words, word


def test_help_exits_zero(capsys):
    assert cli("--help") == 0
    assert "run" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "compare", "validate", "plan", "explain"])
def test_set_option_reads_as_path_value_in_help(command, capsys, monkeypatch):
    """Typer would print the Python type (`<list[str]>`); the help names the form instead."""
    monkeypatch.setenv("COLUMNS", "200")
    assert cli(command, "--help") == 0
    out = capsys.readouterr().out
    assert "PATH=VALUE" in out and "list[str]" not in out


# -- bad input: exit 2, one message, nothing written ---------------------------------------
def bad_trace(tmp_path):
    trace = tmp_path / "bad.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,10\n0.5,abc,3\n")
    return trace


BAD_INPUTS = {
    "unknown field": (["--set", "workload.arrival.rat=3"], "did you mean"),
    "wrong type": (["--set", "parallelism.tp=two"], "parallelism.tp"),
    "negative rate": (["--set", "workload.arrival.rate=-1"], "greater than 0"),
    "unknown model": (["--set", "model.name=llama-9"], "unknown model"),
    "unknown gpu": (["--set", "hardware.gpu=h900"], "unknown GPU"),
    "does not fit": (["--set", "model.name=llama-3.1-70b", "--set", "hardware.gpu=l4"],
                     "does not fit"),
    "tp not dividing heads": (["--set", "parallelism.tp=3"], "tp=3"),
    "override without =": (["--set", "workload.arrival.rate"], "no '='"),
    "missing trace": (["--set", "workload={arrival: {type: trace, path: /no/such/trace.csv}}"],
                      "not found"),
    "malformed trace row": (["--set", "workload={arrival: {type: trace, path: BAD}}"], ":3"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_message(case, tmp_path, capsys):
    args, words = BAD_INPUTS[case]
    args = [a.replace("BAD", str(bad_trace(tmp_path))) for a in args]
    assert cli(CHATBOT, *args, "-o", tmp_path / "out", "--quiet") == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert err.startswith("error:")
    assert words in err
    assert "fix:" in err
    assert "Traceback" not in captured.err + captured.out
    no_leftovers(tmp_path)


def test_missing_scenario_file(tmp_path, capsys):
    assert cli(tmp_path / "nope.yaml", "-o", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "not found" in err
    no_leftovers(tmp_path)


def test_entry_point_subprocess(tmp_path):
    """What a user sees: the real interpreter, exit codes and streams."""
    run = [sys.executable, "-m", "simulator.cli"]
    ok = subprocess.run([*run, str(CHATBOT), "--set", "workload.num_requests=10", "-o",
                         str(tmp_path / "ok"), "--quiet", "--no-report"],
                        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "ok" / "summary.json").is_file()
    bad = subprocess.run([*run, str(CHATBOT), "--set", "parallelism.tp=two", "-o",
                          str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error:") and "Traceback" not in bad.stderr
    assert bad.stdout == ""
    no_leftovers(tmp_path)


@pytest.mark.parametrize("args", [
    ["run", str(CHATBOT), "--bogus"],
    ["run"],
    ["list", "nothing"],
], ids=["unknown option", "missing argument", "unknown command"])
def test_usage_errors_exit_2_without_traceback(args, capsys):
    assert cli(*args) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_output_dir_never_deletes_foreign_files(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    precious = out / "notes.txt"
    precious.write_text("not servesim's")
    cli(CHATBOT, "--set", "workload.num_requests=5", "-o", out, "-q", "--no-report")
    assert precious.exists()


def test_output_dir_that_is_a_file_is_a_clean_error(tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("x")
    assert cli(CHATBOT, "--set", "workload.num_requests=5", "-o", target, "-q",
               "--no-report") == 2
    assert capsys.readouterr().err.startswith("error:")
    assert target.read_text() == "x"


def test_explain_adds_up_to_the_iteration_times_a_run_uses(capsys):
    """`simulate explain`: its per-op times sum to the cost model's iteration times."""
    from simulator import api
    from simulator.cost.ops import IterationShape
    from simulator.explain import explain
    from simulator.simulation import Simulation

    bench = ROOT / "scenarios" / "benchmark-concurrency.yaml"
    e = explain(api.load(bench), batch=16, context=1000, prefill=512)
    cost = Simulation(api.load(bench)).cost
    assert sum(e.decode.values()) == pytest.approx(cost.iteration_time(IterationShape(16, 16, 16, 16_000)))
    # The lone prefill starts an idle engine: no earlier iteration hides its CPU work.
    lone = IterationShape(512, 1, 0, 0, ((512, 0),))
    assert sum(e.prefill.values()) == pytest.approx(cost.iteration_time(lone, from_idle=True))
    assert cost.iteration_time(lone, from_idle=True) > cost.iteration_time(lone)  # async scheduling
    assert "attn_decode" in e.decode and "attn_decode" not in e.prefill and "attn_prefill" in e.prefill
    assert e.sources["gate_up_proj"] == "profile"  # H200 tables ship
    assert cli("explain", bench, "--batch", 16, "--context", 1000, "--prefill", 512) == 0
    text = capsys.readouterr().out
    assert "gate_up_proj" in text and "total" in text and "TP1 PP1" in text
    # FP8 GEMMs and a BF16 KV cache (the base scenario's): both dtypes' compute runs slower.
    assert [n.split(":")[0] for n in e.notes] == ["memory per GPU", "bf16 kernels (GEMMs, experts)",
                                                 "fp8 kernels (GEMMs, experts)", "prefill attention", "API server"]
    assert "compute at 0.71" in e.notes[3]  # H200's attention measured inside a prefill layer
    assert "measured on this GPU" in e.notes[2] and "compute at 0.88" in " ".join(text.split())
    # What the step runs on, and the memory that bounds its batch (the run's own plan).
    assert "llama-3.1-70b (fp8 weights, bf16 KV) on h200" in " ".join(text.split())
    plan = Simulation(api.load(bench)).batch_pool.memory
    assert f"KV cache {plan.kv_gib:.1f} GiB = {plan.capacity_tokens:,} tokens" in e.notes[0]
    # A disaggregated scenario: the decode column is the decode pool's, the prefill the prefill pool's.
    disagg = ROOT / "scenarios" / "validation" / "distserve-opt13b-a100-disagg.yaml"
    fp16 = explain(api.load(disagg), batch=8, context=500, prefill=500)
    assert "prefill TP2 PP1, decode TP1 PP1" in fp16.layout  # roofline: no sustained-rate notes
    assert [n.split(":")[0] for n in fp16.notes] == ["memory per GPU (decode pool)", "API server"]
    assert cli("explain", bench, "--batch", 0) == 2
    assert "--batch: must be >= 1" in capsys.readouterr().err


def test_ctrl_c_exits_130_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """typer hands a Ctrl-C back as a return value out of standalone mode; it must still
    end the process with 130, not 0, so `simulate ... && next` stops."""
    from simulator import api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run", interrupted)
    assert cli(CHATBOT, *SMALL, "-o", tmp_path / "out", "-q") == 130
    assert "interrupted" in capsys.readouterr().err
    no_leftovers(tmp_path)


def test_output_dir_below_a_file_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    from simulator import api

    def never(*args, **kwargs):
        raise AssertionError("the run started although its output folder cannot be made")

    monkeypatch.setattr(api, "run", never)
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    assert cli(CHATBOT, *SMALL, "-o", blocker / "sub", "-q") == 2
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long paths
    assert err.startswith("error:") and "is a file" in err and "Traceback" not in err


def test_summary_says_why_requests_were_rejected(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert cli(CHATBOT, *SMALL, "--set", "model.max_model_len=600", "-o", tmp_path / "out", "--no-report") == 0
    summary = strict_json((tmp_path / "out" / "summary.json").read_text())
    groups = summary["requests"]["rejected_reasons"]
    assert summary["requests"]["rejected"] == sum(g["count"] for g in groups) > 0
    out = capsys.readouterr().out
    assert f"rejected {groups[0]['count']}× e.g. " in out and "max_model_len=600" in out


def test_unknown_model_names_the_file_the_field_and_the_way_out(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    assert cli(CHATBOT, "--set", "model.name=llama-3.1-8bb", "-q") == 2
    err = capsys.readouterr().err
    assert f"{CHATBOT}: model.name: unknown model 'llama-3.1-8bb'; did you mean 'llama-3.1-8b'" in err
    assert "model.config_json" in err and "known models" not in err  # a guess, not the whole list


def test_a_validator_message_is_not_followed_by_a_generic_fix(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    assert cli(CHATBOT, "--set", "workload.prompt_tokens.min=10000", "-q") == 2
    err = capsys.readouterr().err
    assert "swap them" in err and "fix:" not in err


def test_explain_refuses_a_context_beyond_max_model_len_and_fits_its_defaults(capsys, monkeypatch):
    from simulator import api
    from simulator.explain import explain

    monkeypatch.setenv("COLUMNS", "300")
    bench = ROOT / "scenarios" / "benchmark-concurrency.yaml"
    assert cli("explain", bench, "--context", "10000000") == 2
    assert "max_model_len=16384" in capsys.readouterr().err
    short = explain(api.load(bench, ["model.max_model_len=1024"]))
    assert "at 1023 tokens of context" in short.decode_label and "1024 prompt tokens" in short.prefill_label


def test_summary_title_shows_attention_data_parallelism(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert cli(CHATBOT, *SMALL, "--set", "model.name=qwen3-30b-a3b", "--set", "parallelism.dp=2",
               "-o", tmp_path / "out", "--no-report") == 0
    assert "h100-sxm, 1× TP1·PP1, DP2," in capsys.readouterr().out


def test_api_overrides_apply_on_top_of_a_loaded_scenario():
    """A LoadedScenario keeps what it was loaded with; more overrides add to it (a dict-
    loaded one has no file to re-read)."""
    from simulator import api

    loaded = api.load(CHATBOT, ["workload.num_requests=30", "cost_model.backend=roofline"])
    res = api.run(loaded, overrides=["workload.arrival.rate=3"])
    assert res.summary["requests"]["total"] == 30 and res.summary["config"]["cost_backend"] == "roofline"
    from_dict = api.load(data={"model": {"name": "llama-3.1-8b"},
                               "workload": {"num_requests": 10, "arrival": {"type": "poisson", "rate": 5.0},
                                            "prompt_tokens": {"type": "fixed", "value": 100},
                                            "output_tokens": {"type": "fixed", "value": 10}}})
    assert api.run(from_dict, overrides=["workload.num_requests=5"]).summary["requests"]["total"] == 5


def test_summary_lists_only_the_files_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert cli(CHATBOT, *SMALL, "--no-report", "--set", "output.iterations_csv=false", "-o", tmp_path / "o") == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("output"))
    assert line.endswith("(summary.json, requests.csv)")


def test_validate_prints_a_note_shared_by_many_runs_once():
    """A release rule repeats on every sweep row it touches: the terminal counts the runs and
    names the first, while validation.json keeps each run's note."""
    from simulator.cli import _grouped_notes

    notes = [{"run": "a c4", "note": "predates async"}, {"run": "b", "note": "other"},
             {"run": "a c8", "note": "predates async"}]
    assert _grouped_notes(notes) == ["2 runs (first: a c4): predates async", "b: other"]
    assert _grouped_notes([]) == []


def test_the_command_line_loads_without_pandas_or_matplotlib():
    """`simulate --help` and usage errors import neither: they took twice as long with pandas
    loaded by a top-level import. A run loads them when it needs them."""
    import subprocess
    import sys

    code = "import sys, simulator.cli; print(sorted(m for m in ('pandas', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_saved_scenario_reruns_from_its_output_folder(tmp_path, monkeypatch):
    """scenario.yaml beside the outputs names its trace by absolute path: a relative one
    would be read from the output folder, where the trace is not."""
    import yaml

    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                               + "".join(f"{0.1 * i},{100 + i},{20}\n" for i in range(30)))
    d = yaml.safe_load(CHATBOT.read_text())
    d["workload"] = {"arrival": {"type": "trace", "path": "traces/t.csv"}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
    monkeypatch.chdir(ROOT)  # not the scenario's folder
    assert cli("run", tmp_path / "s.yaml", "-o", tmp_path / "a", "--no-report", "-q") == 0
    saved = yaml.safe_load((tmp_path / "a" / "scenario.yaml").read_text())
    assert saved["workload"]["arrival"]["path"] == str((tmp_path / "traces" / "t.csv").resolve())
    assert cli("run", tmp_path / "a" / "scenario.yaml", "-o", tmp_path / "b", "--no-report", "-q") == 0
    assert (pd.read_csv(tmp_path / "a" / "requests.csv")["ttft_ms"]
            .equals(pd.read_csv(tmp_path / "b" / "requests.csv")["ttft_ms"]))


@pytest.mark.parametrize("argv, says", [
    (["rnu", str(CHATBOT)], "unknown command 'rnu'; did you mean 'run'?"),
    (["valdate", "m.csv"], "did you mean 'validate'?"),
    (["nosuchfile"], "nosuchfile: scenario file not found"),  # no command is close: a scenario's path
])
def test_a_mistyped_command_is_named_as_one(argv, says, capsys):
    from simulator.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = " ".join(capsys.readouterr().err.split())
    assert exc.value.code == 2 and says in err and "Traceback" not in err


def test_list_models_says_the_attention_kind_and_sorts_numbers_as_numbers(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    assert cli("list", "models") == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    rows = {line.split()[0]: line for line in lines}
    assert "MLA (latent 512)" in rows["deepseek-v3"] and "+1 shared" in rows["deepseek-v3"]
    assert "window 128 on 18/36" in rows["gpt-oss-120b"] and " GQA" in rows["llama-3.1-8b"]
    names = [line.split()[0] for line in lines[1:]]
    assert names.index("llama-3-8b") < names.index("llama-3.1-8b") and names.index("qwen3-8b") < names.index("qwen3-32b")
    assert cli("list", "gpus") == 0
    a100 = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("a100-80gb-sxm "))
    assert a100.split()[4] == "—"  # no FP8 tensor cores: not "0 TFLOP/s"


def test_a_log_gets_a_progress_line_now_and_then(monkeypatch):
    """Where stderr is no terminal (a log, CI) rich draws no bar: a plain line every
    PLAIN_PROGRESS_EVERY_S seconds says how far a long run is."""
    import io

    from rich.console import Console

    from simulator import terminal

    out = io.StringIO()
    line = terminal.PlainProgress(Console(file=out, width=200), "measuring", "grid points")
    line(3, 10, "gemm (1, 4096, 4096)")
    assert out.getvalue() == ""  # not yet: the first line waits its interval
    monkeypatch.setattr(terminal, "PLAIN_PROGRESS_EVERY_S", 0.0)
    line(5, 10, "gemm (1, 4096, 4096)")
    assert out.getvalue().startswith("measuring: 5/10 grid points after ") and "(gemm (1, 4096, 4096))" in out.getvalue()

"""`simulate validate` on malformed or unusable measurement files: each ends in a
ServesimError that names the file, the key or cell and the reason (printed by the CLI
without a traceback) before anything is simulated, and a file whose model is outside the
catalog says which model it was simulated as."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from simulator.config import load_scenario
from simulator.errors import ServesimError
from simulator.validation import prepare_measured, run_validation
from simulator.validation.measured import read_measured
from simulator.validation.measurement import MeasuredRun
from simulator.validation.runner import _none_completed, simulate_run

ROOT = Path(__file__).resolve().parent.parent
BENCH_SCENARIO = ROOT / "scenarios" / "benchmark-concurrency.yaml"
DISTSERVE_SCENARIO = ROOT / "scenarios" / "validation" / "distserve-opt13b-a100-vllm.yaml"
SWEEP_HEADER = "system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
PER_REQUEST_HEADER = "arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms\n"


def _bench(**patch) -> dict:
    """A small `vllm bench serve --save-detailed` result: two requests, two clients."""
    doc = {"max_concurrency": 2, "request_rate": "inf", "input_lens": [100, 200],
           "output_lens": [5, 5], "ttfts": [0.1, 0.2], "itls": [[0.01] * 4, [0.01] * 4]}
    return {**doc, **patch}


def _summary(**patch) -> dict:
    """A result saved without --save-detailed: run-level figures only."""
    doc = {"num_prompts": 40, "completed": 40, "max_concurrency": 4, "total_input_tokens": 12000,
           "total_output_tokens": 2000, "mean_ttft_ms": 40.0, "mean_tpot_ms": 8.0}
    return {**doc, **patch}


def _json_file(tmp_path: Path, doc: dict, name: str = "bench.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _error(path: Path) -> str:
    """The rendered ServesimError reading `path` raises (naming the file)."""
    with pytest.raises(ServesimError) as exc:
        read_measured([path])
    text = exc.value.render()
    assert str(path) in text or path.name in text
    return " ".join(text.split())


@pytest.mark.parametrize(("patch", "words"), [
    ({"ttfts": 0.1}, "`ttfts` is 0.1, must be a list of numbers, one per request"),
    ({"ttfts": None}, "`ttfts` is null, must be a list of numbers"),
    ({"input_lens": 5}, "`input_lens` is 5, must be a list of numbers, one per request"),
    ({"itls": 3}, "`itls` is 3, must be a list of per-request lists"),
    ({"errors": "x"}, "`errors` is \"x\", must be a list of error texts"),
    ({"output_lens": [5, 5, 5]}, "`output_lens` has 3 entries for 2 requests"),
    ({"latencies": [0.5]}, "`latencies` has 1 entries for 2 requests"),
    ({"max_concurrency": "abc"}, "`max_concurrency` is \"abc\", must be a positive whole number (or null)"),
    ({"max_concurrency": -4}, "`max_concurrency` is -4, must be a positive whole number"),
    ({"max_concurrency": 0}, "`max_concurrency` is 0, must be a positive whole number"),
    ({"max_concurrency": 2.5}, "`max_concurrency` is 2.5"),
    ({"max_concurrency": None, "request_rate": 0}, "`request_rate` is 0, must be a number > 0"),
    ({"request_rate": "fast"}, "`request_rate` is 'fast'"),
    ({"burstiness": 0}, "`burstiness` is 0, must be a number > 0"),
    ({"ttfts": [float("nan"), 0.2]}, "`ttfts`[0] is NaN, expected a number >= 0"),
    ({"output_lens": [5, -1]}, "`output_lens`[1] is -1, expected a whole number >= 0"),
    ({"latencies": [None, 0.5]}, "`latencies`[0] is null for a request that got a first token"),
    ({"input_lens": [None, 200]}, "`input_lens`[0] is null for a request that got a first token"),
    ({"start_times": [0.0, None]}, "`start_times`[1] is null for a request that got a first token"),
])
def test_bad_per_request_json(tmp_path, patch, words):
    assert words in _error(_json_file(tmp_path, _bench(**patch)))


@pytest.mark.parametrize("patch", [
    {"errors": ["timeout", "timeout"]},
    {"ttfts": [0, 0]},
    {"ttfts": [None, None], "input_lens": [None, None], "output_lens": [None, None]},
])
def test_a_run_whose_every_request_failed_is_refused_when_read(tmp_path, patch):
    assert "no successful request to compare against: all 2 requests failed" in \
        _error(_json_file(tmp_path, _bench(**patch)))


def test_a_run_without_requests_is_refused_when_read(tmp_path):
    doc = _bench(input_lens=[], output_lens=[], ttfts=[], itls=[])
    assert "no successful request to compare against: `ttfts` is empty" in _error(_json_file(tmp_path, doc))


def test_one_failed_run_of_an_appended_file_names_its_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(_bench()) + "\n" + json.dumps(_bench(errors=["x", "y"])) + "\n")
    assert "(runs#2): no successful request" in _error(path)


@pytest.mark.parametrize(("patch", "words"), [
    ({"completed": 0}, "no successful request to compare against: `completed` is 0 of 40 `num_prompts`"),
    ({"completed": 2.5}, "`completed` is 2.5, must be a whole number of requests"),
    ({"max_concurrency": "abc"}, "`max_concurrency` is \"abc\", must be a positive whole number"),
    ({"max_concurrency": -4}, "`max_concurrency` is -4"),
])
def test_bad_summary_json(tmp_path, patch, words):
    assert words in _error(_json_file(tmp_path, _summary(**patch)))


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    for name in ("m.csv", "m.json"):
        path = tmp_path / name
        path.write_bytes(b"\xff\xfe\x00garbage")
        assert "not UTF-8 text" in _error(path)


@pytest.mark.parametrize(("text", "words"), [
    (SWEEP_HEADER, "the file has no rows"),
    (SWEEP_HEADER + "h200_sxm,,fp8,2,1000,100,8,100,20\n", "m.csv:2: model is blank, expected a model name"),
    (SWEEP_HEADER + ",llama-3.1-70b,fp8,2,1000,100,8,100,20\n", "m.csv:2: system is blank, expected a GPU name"),
    (SWEEP_HEADER + "h200_sxm,llama-3.1-70b,fp8,2,1000,100,-8,100,20\n", "concurrency is '-8'"),
    (SWEEP_HEADER + "h200_sxm,llama-3.1-70b,fp8,2,nan,100,8,100,20\n", "m.csv:2: isl is blank, expected a whole number >= 1"),  # NaN reads as blank
    (SWEEP_HEADER + "h200_sxm,llama-3.1-70b,fp8,2,1000,100,8,100,-20\n", "tpot_ms is '-20'"),
    # pandas would take the extra leading cells as an index and shift every column.
    (SWEEP_HEADER + "h200_sxm,llama-3.1-70b,fp8,2,1000,100,8,100,20,7\n", "m.csv:2: 10 cells under a header of 9"),
    (PER_REQUEST_HEADER + "0,10,5,1,2,3\n", "m.csv:2: 6 cells under a header of 5 columns"),
    (PER_REQUEST_HEADER + '0,10,5,"1,2\n', "not a readable CSV"),
    # Shared-prefix columns, as a csv trace has them.
    ("arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,prefix_tokens\n0,10,5,1,2,4\n",
     "prefix_tokens needs a prefix_id column"),
    ("arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,prefix_id,prefix_tokens\n0,10,5,1,2,3,11\n",
     "m.csv:2: prefix_tokens is '11', expected a whole number from 0 to the row's prompt_tokens (10)"),
    ("arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,prefix_id,prefix_tokens\n0,10,5,1,2,a,x\n",
     "m.csv:2: prefix_tokens is 'x', expected a whole number from 0"),
])
def test_bad_csv(tmp_path, text, words):
    path = tmp_path / "m.csv"
    path.write_text(text)
    assert words in _error(path)


def test_a_trailing_empty_cell_is_not_an_index(tmp_path):
    """Some exporters end every row with a comma: the cells stay in their columns."""
    path = tmp_path / "m.csv"
    path.write_text(PER_REQUEST_HEADER + "0,10,5,1,2,\n0.5,20,6,3,4,\n")
    (run,) = read_measured([path]).runs
    assert list(run.requests["prompt_tokens"]) == [10, 20]
    assert list(run.requests["ttft_ms"]) == [1, 3]


def test_header_only_sweep_from_the_dev_set_says_no_rows(tmp_path):
    src = ROOT.parent / "shared" / "validation" / "nvidia-silicon-h200-llama70b-fp8-vllm" / "measurements.csv"
    if not src.is_file():
        pytest.skip(f"dev set missing: {src}")
    path = tmp_path / "h.csv"
    path.write_text(src.read_text().splitlines()[0] + "\n")
    assert "no rows" in _error(path)


def test_rounds_below_one_is_refused(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text(SWEEP_HEADER + "h200_sxm,llama-3.1-8b,bf16,1,256,16,2,30,8\n")
    with pytest.raises(ServesimError, match=r"--rounds: rounds 0 is not a whole number >= 1"):
        read_measured([path], rounds=0)


def test_runner_reports_a_run_without_requests_instead_of_indexing_it():
    """The readers refuse such runs; a caller's own MeasuredRun gets a reason, not an IndexError."""
    columns = ["arrival_s", "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms"]
    run = MeasuredRun(label="empty", source="x", kind="trace", measured={}, requests=pd.DataFrame(columns=columns))
    pred = simulate_run(run, BENCH_SCENARIO, [])
    assert pred.error.startswith("empty: no successful request to replay")
    assert "ran no request" in _none_completed(run, pd.DataFrame(columns=["status", "reject_reason"]))


def _measured_with_model_id(tmp_path: Path, model_id: str, scenario: Path = BENCH_SCENARIO):
    src = _json_file(tmp_path, _bench(model_id=model_id))
    base = load_scenario(scenario, [])
    return prepare_measured([src], base, [])


def test_a_model_id_outside_the_catalog_is_noted(tmp_path):
    measured, followed = _measured_with_model_id(tmp_path, "someorg/UnknownModel-7B")
    (run,) = measured.runs
    assert followed == {}
    assert run.note.startswith("its model_id 'someorg/UnknownModel-7B' is not in the catalog; "
                               "simulated as llama-3.1-70b (set model.name or model.config_json")
    catalog, _ = _measured_with_model_id(tmp_path, "Qwen/Qwen3-8B")
    assert catalog.runs[0].note is None or "catalog" not in catalog.runs[0].note


def test_a_config_json_scenario_with_a_catalog_model_id_does_not_crash(tmp_path):
    """The base scenario's model from a config.json has no catalog name to compare with."""
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
              "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
              "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(BENCH_SCENARIO.read_text().replace("name: llama-3.1-70b",
                                                           f"config_json: {tmp_path / 'config.json'}"))
    measured, followed = _measured_with_model_id(tmp_path, "Qwen/Qwen3-8B", scenario)
    assert followed == {} and "model.name=qwen3-8b" not in measured.runs[0].overrides
    unknown, _ = _measured_with_model_id(tmp_path, "someorg/UnknownModel-7B", scenario)
    assert f"simulated as the scenario's {tmp_path / 'config.json'}" in unknown.runs[0].note


def test_the_unknown_model_note_reaches_validation_json(tmp_path):
    src = _json_file(tmp_path, _bench(model_id="someorg/UnknownModel-7B"))
    result, out = run_validation([src], BENCH_SCENARIO, [], tmp_path / "out", workers=1)
    (note,) = json.loads((out / "validation.json").read_text())["notes"]
    assert note["run"] == "bench" and "'someorg/UnknownModel-7B' is not in the catalog" in note["note"]
    assert "model_from_file" not in result


def test_cli_bad_input_exits_non_zero_without_a_traceback(tmp_path):
    """What a user sees: the real interpreter, an error line naming file and key, no output folder."""
    src = _json_file(tmp_path, _bench(ttfts=0.1))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "simulator.cli", "validate", str(src), "-s", str(BENCH_SCENARIO),
                           "-o", str(out), "-q"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0
    assert "Traceback" not in text
    assert f"error: {src}: `ttfts` is 0.1, must be a list of numbers, one per request" in text
    assert not out.exists()


@pytest.mark.filterwarnings("error::UserWarning")
def test_one_token_outputs_write_the_report_without_a_legend_warning(tmp_path):
    """No request has a TPOT, so the TPOT figure has no labelled curve: matplotlib warned
    onto stderr (even under -q) about an empty legend."""
    path = tmp_path / "run.csv"
    path.write_text(PER_REQUEST_HEADER + "".join(f"{i * 0.5},64,1,{20 + i},\n" for i in range(6)))
    scenario = ROOT / "scenarios" / "validation" / "distserve-opt13b-a100-vllm.yaml"
    result, out = run_validation([path], scenario, ["model.name=opt-125m"], tmp_path / "out")
    assert result["runs"] == 1 and (out / "validation.html").is_file()


def test_an_unreadable_row_among_readable_ones_is_skipped_with_its_reason(tmp_path):
    """A sweep whose one row has a blank client count (a disaggregated row of
    aiconfigurator's sample, say) still validates the others; the row is reported as
    skipped with the file, line, field and fix. A file of only such rows is an error."""
    path = tmp_path / "m.csv"
    path.write_text(SWEEP_HEADER + "h200_sxm,llama-3.1-8b,bf16,1,256,16,2,30,8\n"
                    "h200_sxm,llama-3.1-8b,bf16,1,256,16,,30,8\n")
    runs = read_measured([path]).runs
    assert [r.error is None for r in runs] == [True, False]
    assert "m.csv:3: concurrency is blank, expected a whole number >= 1" in runs[1].error
    assert "fix" in runs[1].error


def test_an_output_folder_holding_an_input_is_refused_and_left_alone(tmp_path):
    """Validating a previous validation.csv into its own folder would replace the input."""
    measured = tmp_path / "m.csv"
    measured.write_text(PER_REQUEST_HEADER + "0.0,100,10,50.0,25.0\n0.5,120,12,60.0,25.0\n")
    out = tmp_path / "out"
    run_validation([measured], DISTSERVE_SCENARIO, [], out)
    again = out / "validation.csv"
    before = again.read_text()
    with pytest.raises(ServesimError, match="holds an input file"):
        run_validation([again], DISTSERVE_SCENARIO, [], out)
    assert again.read_text() == before


def test_when_no_run_simulates_the_error_names_the_run_and_its_file(tmp_path):
    measured = tmp_path / "huge.csv"
    measured.write_text(PER_REQUEST_HEADER + "0,200000,4,60,26\n")
    with pytest.raises(ServesimError) as err:
        run_validation([measured], DISTSERVE_SCENARIO, [], tmp_path / "out")
    assert "huge (huge.csv): " in err.value.render()
    assert not (tmp_path / "out").exists()

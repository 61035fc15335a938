"""Measurement files as users bring them (the `simulate validate` input audit): spreadsheet
exports, duplicate or reserved columns, releases such as `0.10`, quantised checkpoints and
aiconfigurator's precision names, vLLM's side files. Each is read as it was meant, or
refused with the file, line and a fix."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from simulator.config import load_scenario
from simulator.errors import ServesimError
from simulator.validation import prepare_measured, run_validation
from simulator.validation.measured import read_measured
from simulator.validation.precision import (
    PRECISIONS,
    canonical_precision,
    checkpoint_precision,
    follow_model_id,
    model_id_overrides,
    precision_overrides,
)
from simulator.validation.runner import RunPrediction
from simulator.validation.scoring import runs_frame

ROOT = Path(__file__).resolve().parent.parent
DISTSERVE = ROOT / "scenarios" / "validation" / "distserve-opt13b-a100-vllm.yaml"
CHATBOT = ROOT / "scenarios" / "chatbot.yaml"
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
SWEEP_HEADER = "system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms"
REQUEST_HEADER = "arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,e2e_ms"
LLAMA_ROW = "h200_sxm,meta-llama/Llama-3.1-8B-Instruct,bf16,1,128,16"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _error(paths: list[Path]) -> str:
    with pytest.raises(ServesimError) as exc:
        read_measured(paths)
    return " ".join(exc.value.render().split())


# ------------------------------------------------------------------ D3: releases as written


@pytest.mark.parametrize("column", ["engine_version", "vllm_version", "backend_version"])
def test_a_release_is_read_as_written_not_as_a_number(tmp_path, column):
    """`0.10` is vLLM 0.10, not 0.1 (which would be a V0-engine release): the version
    columns are read as text, so the row runs 0.10's defaults, not a wrong release's note."""
    src = _write(tmp_path / "v.csv", f"{SWEEP_HEADER},{column}\n{LLAMA_ROW},2,20,5,0.10\n{LLAMA_ROW},4,20,5,0.20\n")
    runs = read_measured([src]).runs
    assert [r.engine_version for r in runs] == ["0.10", "0.20"]


def test_a_release_cell_of_na_names_none(tmp_path):
    """A version column holding `N/A` (as old scripts wrote) names no release, as a blank does."""
    src = _write(tmp_path / "v.csv", f"{SWEEP_HEADER},vllm_version\n{LLAMA_ROW},2,20,5,N/A\n")
    assert read_measured([src], engine_version="0.12.0").runs[0].engine_version == "0.12.0"


# ------------------------------------------------------------------ D5: precision names


@pytest.mark.parametrize(("name", "dtypes"), [
    # aiconfigurator's GEMM/MoE quant modes (sdk/common.py), as (weight, activation, kv)
    ("float16", ("fp16", "fp16", "fp16")), ("bfloat16", ("bf16", "bf16", "bf16")),
    ("int8_wo", ("int8", "bf16", "bf16")), ("int4_wo", ("int4", "bf16", "bf16")),
    ("fp8", ("fp8", "fp8", "fp8")), ("fp8_static", ("fp8", "fp8", "fp8")), ("fp8_block", ("fp8", "fp8", "fp8")),
    ("fp8_ootb", ("fp8", "fp8", "fp8")), ("sq", ("int8", "int8", "bf16")), ("nvfp4", ("fp4", "fp4", "fp8")),
    ("w4afp8", ("int4", "fp8", "bf16")), ("w4a16_mxfp4", ("fp4", "bf16", "bf16")),
    ("nvfp4_wo", ("fp4", "bf16", "fp8")), ("w4a16_nvfp4", ("fp4", "bf16", "fp8")),
    # common spellings
    ("int4_awq", ("int4", "bf16", "bf16")), ("W4A16_AWQ", ("int4", "bf16", "bf16")),
    ("fp8_dynamic", ("fp8", "fp8", "bf16")), ("FP8-Dynamic", ("fp8", "fp8", "bf16")), ("fp8_kv16", ("fp8", "fp8", "bf16")),
    ("fp8_e4m3", ("fp8", "fp8", "fp8")), ("mxfp8", ("fp8", "fp8", "bf16")), ("w8a16", ("int8", "bf16", "bf16")),
    ("fp8-blockwise", ("fp8", "fp8", "fp8")), ("fp8_block_scale", ("fp8", "fp8", "fp8")),
    # TensorRT Model Optimizer's quant configs
    ("w4a8_awq", ("int4", "fp8", "bf16")), ("nvfp4_awq", ("fp4", "fp4", "fp8")),
])
def test_aiconfigurator_and_common_precision_names(name, dtypes):
    assert PRECISIONS[canonical_precision(name)] == dtypes


def test_weight_only_int8_is_not_w8a8():
    """`int8` stays W8A8 (INT8 GEMMs); `int8_wo` keeps 16-bit GEMM inputs."""
    w8a8 = precision_overrides("int8", "llama-3.1-8b", "h100-sxm")
    w8a16 = precision_overrides(canonical_precision("int8_wo"), "llama-3.1-8b", "h100-sxm")
    assert "model.activation_dtype=int8" in w8a8 and "model.activation_dtype=bf16" in w8a16
    assert "model.weight_dtype=int8" in w8a16


def test_weight_only_nvfp4_stays_weight_only_on_blackwell():
    """nvfp4_wo on a B200 (which has FP4 tensor cores) is still dequantised into bf16 GEMMs."""
    assert "model.activation_dtype=bf16" in precision_overrides(canonical_precision("nvfp4_wo"), "llama-3.1-8b", "b200")
    assert "model.activation_dtype=fp4" in precision_overrides("fp4", "llama-3.1-8b", "b200")


def test_an_unknown_precision_lists_the_accepted_names(tmp_path):
    src = _write(tmp_path / "p.csv", f"{SWEEP_HEADER}\n{LLAMA_ROW.replace('bf16', 'fp7')},2,20,5\n"
                 f"{LLAMA_ROW.replace('bf16', 'int4_awq')},2,20,5\n")
    bad, good = read_measured([src]).runs
    assert good.error is None and "model.weight_dtype=int4" in good.overrides
    assert "unknown precision 'fp7'" in bad.error and "p.csv:2" in bad.error
    assert all(name in bad.error for name in ("int8_wo", "w4afp8", "nvfp4_wo", "fp8_dynamic"))


def test_a_checkpoint_named_fp8_dynamic_keeps_a_16_bit_kv_cache():
    assert checkpoint_precision("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic") == "fp8_kv16"
    assert checkpoint_precision("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8") == "fp8_kv16"


# ------------------------------------------------------------------ D4: the scenario's own model, quantised


def test_a_quantised_checkpoint_of_the_scenarios_model_runs_at_its_precision():
    """`...-FP8` under a bf16 Llama-3.1-8B scenario runs FP8, with a note; the unquantised
    name leaves the scenario alone, as does a token that agrees with its dtypes."""
    chat = load_scenario(CHATBOT, []).scenario
    fp8 = follow_model_id("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", chat.model, chat.hardware.gpu)
    assert "model.weight_dtype=fp8" in fp8.overrides and fp8.model is None
    assert "quantised to fp8" in fp8.note and "weight_dtype bf16" in fp8.note
    assert model_id_overrides("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", chat.model, chat.hardware.gpu) == fp8.overrides
    assert follow_model_id("meta-llama/Llama-3.1-8B-Instruct", chat.model, chat.hardware.gpu) == ([], None, None)
    bench = load_scenario(BENCH, []).scenario  # llama-3.1-70b fp8, bf16 KV: the scenario's KV choice stands
    assert follow_model_id("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8", bench.model, bench.hardware.gpu) == \
        ([], None, None)
    awq = follow_model_id("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", bench.model, bench.hardware.gpu)
    assert "model.weight_dtype=int4" in awq.overrides and "int4" in awq.note


def test_another_model_and_an_unknown_one_are_followed_as_before():
    bench = load_scenario(BENCH, []).scenario
    other = follow_model_id("meta-llama/Llama-3.1-8B-Instruct", bench.model, bench.hardware.gpu)
    assert other.model == "llama-3.1-8b" and other.overrides[0] == "model.name=llama-3.1-8b" and other.note is None
    local = follow_model_id("/models/my-finetune", bench.model, bench.hardware.gpu)
    assert local.overrides == [] and "not in the catalog" in local.note


# ------------------------------------------------------------------ D8: two cells, one column


@pytest.mark.parametrize(("name", "text"), [
    ("r.csv", f"{REQUEST_HEADER},TTFT_ms\n0,55,4,60,26,148,61\n"),
    ("s.csv", f"{SWEEP_HEADER},Concurrency\n{LLAMA_ROW},2,20,5,2\n"),
])
def test_two_header_cells_naming_one_column_are_refused(tmp_path, name, text):
    path = _write(tmp_path / name, text)
    message = _error([path])
    assert f"{name}:1" in message and "both name column" in message and "rename or drop one" in message


# ------------------------------------------------------------------ D9: the user's columns are kept


def test_a_users_source_column_is_kept(tmp_path):
    """One file: no source column is added, and the user's own is written back as it was."""
    src = _write(tmp_path / "srccol.csv", f"{REQUEST_HEADER},source\n0,55,4,69.5,26.1,148.0,clusterA\n"
                 "1.38,829,170,141.1,30.3,5275.1,clusterB\n")
    _, out = run_validation([src], DISTSERVE, [], tmp_path / "out", workers=1)
    table = pd.read_csv(out / "validation.csv")
    assert table["source"].tolist() == ["clusterA", "clusterB"] and table["pred_ttft_ms"].notna().all()


def test_several_files_name_each_rows_file_beside_a_users_source(tmp_path):
    for k in (1, 2):
        _write(tmp_path / f"r{k}.csv", f"{REQUEST_HEADER},source\n0,55,4,69.5,26.1,148.0,cluster{k}\n")
    table = read_measured([tmp_path]).table
    assert table["source"].tolist() == ["cluster1", "cluster2"]
    assert table["source_file"].tolist() == ["r1.csv", "r2.csv"]


def test_input_pred_columns_are_refused(tmp_path):
    """A validation.csv passed back in would have its predictions overwritten silently."""
    path = _write(tmp_path / "validation.csv", f"{REQUEST_HEADER},pred_ttft_ms\n0,55,4,60,26,148,61\n")
    message = _error([path])
    assert "validation.csv:1" in message and "'pred_ttft_ms'" in message and "drop or rename" in message


# ------------------------------------------------------------------ D10: groups and families


def test_a_rows_release_is_part_of_its_configuration(tmp_path):
    """The same setup measured on two releases is two curves with distinct labels."""
    rows = "".join(f"{LLAMA_ROW},{c},{10 * c},5,{v}\n" for v, cs in (("0.11.0", (1, 2)), ("0.15.0", (2, 4)))
                   for c in cs)
    runs = read_measured([_write(tmp_path / "c.csv", f"{SWEEP_HEADER},engine_version\n{rows}")]).runs
    assert len({r.label for r in runs}) == 4
    assert len({r.group for r in runs}) == 2 and len({r.family for r in runs}) == 1
    assert runs[0].label.endswith("v0.11.0 c1") and runs[3].label.endswith("v0.15.0 c4")


def test_spellings_of_one_gpu_and_model_are_one_family(tmp_path):
    src = _write(tmp_path / "v.csv", f"{SWEEP_HEADER}\n"
                 "h200_sxm,meta-llama/Llama-3.1-70B,fp8,1,1024,1024,4,200,21\n"
                 "H200,meta-llama/Llama-3.1-70B-Instruct,fp8,1,1024,1024,8,300,22\n"
                 "h100_sxm,meta-llama/Llama-3.1-70B,fp8,1,1024,1024,4,200,21\n")
    runs = read_measured([src]).runs
    assert runs[0].family == runs[1].family == "h200_sxm meta-llama/Llama-3.1-70B fp8"
    assert runs[0].group == runs[1].group and runs[2].family != runs[0].family


# ------------------------------------------------------------------ D11: a TTFT of 0 is a failed request


def test_a_ttft_of_zero_is_a_failed_request(tmp_path):
    """Replayed for its load (both rows stay), but none of its latencies is scored, as the
    vLLM JSON reader drops a TTFT of 0; the run says how many."""
    src = _write(tmp_path / "z.csv", f"{REQUEST_HEADER}\n0,55,4,0,26,148\n1,100,5,50,20,130\n")
    run = read_measured([src]).runs[0]
    assert len(run.requests) == 2
    assert run.measured == {"ttft_ms": 50.0, "tpot_ms": 20.0, "e2e_ms": 130.0}
    assert "1 request(s) with ttft_ms 0" in run.note
    only = _write(tmp_path / "all.csv", f"{REQUEST_HEADER}\n0,55,4,0,26,148\n")
    assert "every request has ttft_ms 0" in _error([only])


# ------------------------------------------------------------------ D12: folders and extensions


def _bench_doc() -> dict:
    return {"max_concurrency": 2, "request_rate": "inf", "input_lens": [100, 200], "output_lens": [5, 5],
            "ttfts": [0.1, 0.2], "itls": [[0.01] * 4, [0.01] * 4]}


def test_a_folders_pytorch_side_files_are_skipped_with_a_note(tmp_path):
    _write(tmp_path / "run.json", json.dumps(_bench_doc()))
    _write(tmp_path / "run.pytorch.json", json.dumps([{"benchmark": {"name": "vLLM benchmark"}}]))
    runs = read_measured([tmp_path]).runs
    assert len(runs) == 1 and "run.pytorch.json" in runs[0].note
    message = _error([tmp_path / "run.pytorch.json"])
    assert "PyTorch-benchmark side file" in message and "run.json" in message


def test_upper_case_extensions_are_read(tmp_path):
    _write(tmp_path / "RUN1.CSV", f"{REQUEST_HEADER}\n0,55,4,60,26,148\n")
    assert len(read_measured([tmp_path]).runs) == 1
    upper = _write(tmp_path / "UPPER.JSON", json.dumps(_bench_doc()))
    assert read_measured([upper]).kind == "vllm_json"


# ------------------------------------------------------------------ D13: spreadsheet CSVs


def test_blank_lines_and_rows_of_empty_cells_are_skipped(tmp_path):
    """Lines are still named as they stand in the file."""
    src = _write(tmp_path / "s.csv", f"\n\n{REQUEST_HEADER}\n0,55,4,60,26,148\n,,,,,\n\n1,100,5,50,20,130\n,,,,,\n")
    run = read_measured([src]).runs[0]
    assert len(run.requests) == 2
    bad = _write(tmp_path / "b.csv", f"\n{REQUEST_HEADER}\n,,,,,\n0,55,4,60,26,148\nx,100,5,50,20,130\n")
    assert "b.csv:5: arrival_s is 'x'" in _error([bad])
    sweep = _write(tmp_path / "w.csv", f"\n{SWEEP_HEADER}\n{LLAMA_ROW},2,20,5\n,,,,,,,,\n{LLAMA_ROW},x,20,5\n")
    runs = read_measured([sweep]).runs
    assert len(runs) == 2 and "w.csv:5" in runs[1].error and runs[1].label == "row 5"


@pytest.mark.parametrize(("sep", "word"), [("\t", "tabs"), (";", "semicolons")])
def test_a_file_in_another_delimiter_is_named_as_such(tmp_path, sep, word):
    path = _write(tmp_path / "t.csv", REQUEST_HEADER.replace(",", sep) + "\n" + sep.join("055466") + "\n")
    message = _error([path])
    assert f"t.csv:1: the header is one cell separated by {word}" in message and "comma-separated" in message


def test_an_unclosed_quote_names_its_line(tmp_path):
    path = _write(tmp_path / "q.csv", f'{REQUEST_HEADER}\n0,10,5,"1,2\n')
    assert "not a readable CSV" in _error([path])


# ------------------------------------------------------------------ D14: "Infinity" as text


@pytest.mark.parametrize("text", ["Infinity", "inf", "INF", "+Infinity"])
def test_an_infinite_rate_saved_as_text(tmp_path, text):
    doc = {**_bench_doc(), "max_concurrency": None, "request_rate": text, "burstiness": text}
    run = read_measured([_write(tmp_path / "b.json", json.dumps(doc))]).runs[0]
    assert run.rate == float("inf") and run.burstiness == float("inf")


def test_a_quantised_checkpoint_of_the_scenarios_own_model_runs_at_its_precision(tmp_path):
    """`RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8` measured, `scenarios/chatbot.yaml` (the same
    model in bf16) as the base: the run takes FP8 from the checkpoint's name and says so; the
    bf16 release of the same model leaves the scenario alone."""
    from conftest import CHATBOT

    def bench(model_id: str, name: str) -> dict:
        doc = {"model_id": model_id, "max_concurrency": 2, "request_rate": "inf", "input_lens": [100, 200] * 4,
               "output_lens": [40] * 8, "ttfts": [0.05] * 8, "itls": [[0.008] * 39] * 8}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        return run_validation([path], CHATBOT, [], tmp_path / name)[0]

    fp8 = bench("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "fp8")
    bf16 = bench("meta-llama/Llama-3.1-8B-Instruct", "bf16")
    assert "model_from_file" not in fp8 and "model_from_file" not in bf16
    assert any("fp8" in n["note"] for n in fp8["notes"]) and not bf16["notes"]
    assert fp8["per_run"][0]["pred_tpot_ms"] < 0.9 * bf16["per_run"][0]["pred_tpot_ms"]  # half the weight bytes


def test_an_unknown_gpu_skips_its_row_and_keeps_the_others(tmp_path):
    """One row naming a GPU outside the catalog is reported and skipped, as an unknown model
    is; the file's other rows still simulate."""
    from conftest import ROOT

    sweep = tmp_path / "gpus.csv"
    sweep.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                     "h100_sxm,meta-llama/Llama-3.1-8B-Instruct,fp8,1,1000,100,4,100,10\n"
                     "foo_gpu,meta-llama/Llama-3.1-8B-Instruct,fp8,1,1000,100,4,100,10\n")
    result, _ = run_validation([sweep], ROOT / "scenarios" / "benchmark-concurrency.yaml", [],
                               tmp_path / "out", rounds=1)
    assert [s["run"].split()[0] for s in result["skipped"]] == ["foo_gpu"]
    assert "unknown GPU 'foo_gpu'" in result["skipped"][0]["error"]
    assert result["per_run"][0]["pred_tpot_ms"] is not None


def test_a_disaggregated_row_is_skipped_with_its_reason(tmp_path):
    """aiconfigurator's `mode: disagg` rows leave tp_size blank and put the layout in
    prefill_*/decode_* columns: said as such, not as a blank tp_size, and not simulated."""
    from conftest import ROOT

    sweep = tmp_path / "modes.csv"
    sweep.write_text("system,model,precision,mode,tp_size,prefill_tp_size,decode_tp_size,isl,osl,concurrency,"
                     "ttft_ms,tpot_ms\n"
                     "h100_sxm,meta-llama/Llama-3.1-8B-Instruct,fp8,agg,1,,,1000,100,4,100,10\n"
                     "h100_sxm,meta-llama/Llama-3.1-8B-Instruct,fp8,disagg,,1,1,1000,100,4,100,10\n")
    result, _ = run_validation([sweep], ROOT / "scenarios" / "benchmark-concurrency.yaml", [],
                               tmp_path / "out", rounds=1)
    assert len(result["skipped"]) == 1 and "disaggregated run (mode disagg)" in result["skipped"][0]["error"]
    simulated = [r for r in result["per_run"] if r["error"] is None]
    assert len(simulated) == 1 and simulated[0]["pred_tpot_ms"] is not None


@pytest.mark.parametrize("name, gpu", [("B200-SXM-180GB", "b200"), ("NVIDIA B300 SXM6 AC", "b300"),
                                       ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000")])
def test_gpu_names_as_tools_print_them(name, gpu):
    from simulator.hardware import get_gpu

    assert get_gpu(name).name == gpu


@pytest.mark.parametrize("model_id, precision", [
    ("moonshotai/Kimi-K2-Instruct", "fp8"), ("moonshotai/Kimi-K2-Instruct-0905", "fp8"),
    ("moonshotai/Kimi-K2.5", "int4"), ("moonshotai/Kimi-K2-Thinking", "int4")])
def test_kimi_k2_releases_carry_their_own_expert_format(model_id, precision):
    """K2-Instruct shipped block-FP8 experts; K2-Thinking and K2.5 moved to INT4."""
    from simulator.validation.precision import checkpoint_precision

    assert checkpoint_precision(model_id) == precision


def test_a_request_beyond_the_models_context_is_noted_and_ep_on_a_dense_model_is_ignored(tmp_path):
    from conftest import ROOT

    sweep = tmp_path / "ctx.csv"
    sweep.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms,moe_ep_size\n"
                     "h100_sxm,meta-llama/Meta-Llama-3-8B-Instruct,bf16,1,8192,64,1,100,10,2\n")
    result, _ = run_validation([sweep], ROOT / "scenarios" / "benchmark-concurrency.yaml", [],
                               tmp_path / "out", rounds=1)
    note = result["notes"][0]["note"]
    assert "beyond the model's context (8,192)" in note
    assert "moe_ep_size 2 ignored: the model has no experts" in note


def test_a_kimi_k2_fp8_release_under_a_kimi_scenario_runs_in_fp8():
    """K2-Instruct's name states no quantisation token, but the catalog lists it among the
    model's FP8 releases: under a Kimi scenario (INT4 experts) it is followed to FP8."""
    from conftest import CHATBOT

    from simulator.validation.precision import follow_model_id

    base = load_scenario(CHATBOT, ["model.name=kimi-k2", "model.expert_weight_dtype=int4"]).scenario.model
    follow = follow_model_id("moonshotai/Kimi-K2-Instruct", base, "h200")
    assert "model.weight_dtype=fp8" in follow.overrides and "quantised to fp8" in follow.note
    assert follow_model_id("moonshotai/Kimi-K2.5", base, "h200").overrides == []


@pytest.mark.parametrize("model_id, model, precision", [
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a16", "llama-3.1-8b", "int8_wo"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "llama-3.1-8b", "int4"),
    ("neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8", "llama-3.1-70b", "int8"),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-W8A16", "llama-3.1-8b", "int8_wo")])
def test_red_hat_quantized_release_names_resolve_with_their_format(model_id, model, precision):
    from simulator.models import get_model
    from simulator.validation.precision import checkpoint_precision

    assert get_model(model_id).name == model
    assert checkpoint_precision(model_id) == precision


@pytest.mark.parametrize("model_id, precision", [
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "fp8_kv16"),  # no KV scales: vLLM keeps a 16-bit cache
    ("neuralmagic/Meta-Llama-3-8B-Instruct-FP8-KV", "fp8"),  # KV scales: an FP8 cache
    ("nvidia/Llama-3.1-8B-Instruct-FP8", "fp8")])  # ModelOpt: the KV cache quantised too
def test_an_fp8_checkpoints_kv_cache_follows_its_publishers_naming(model_id, precision):
    assert checkpoint_precision(model_id) == precision


# ------------------------------------------------------------------ session 55: a second audit


def _predicted(run, ttft: float) -> RunPrediction:
    return RunPrediction(run, {"ttft_ms": ttft, "tpot_ms": 20.0}, pd.DataFrame(), {})


@pytest.mark.parametrize("first", ["", "0"])
def test_a_cliff_is_judged_against_the_lowest_concurrency_that_measured_a_ttft(tmp_path, first):
    """A blank or 0 TTFT at the lowest concurrency is no reference: the 40 s row is still a
    cliff against the next row's 900 ms, and the others are not all called cliffs."""
    src = _write(tmp_path / "c.csv", f"{SWEEP_HEADER}\n{LLAMA_ROW},4,{first},21\n{LLAMA_ROW},8,900,22\n"
                                     f"{LLAMA_ROW},64,40000,25\n")
    runs = read_measured([src]).runs
    frame = runs_frame([_predicted(r, t) for r, t in zip(runs, (800.0, 950.0, 30000.0), strict=True)])
    assert frame["measured_cliff"].tolist() == [False, False, True]
    assert frame["pred_cliff"].tolist() == [False, False, True]


def test_a_sweep_latency_of_0_is_not_scored_and_said(tmp_path):
    src = _write(tmp_path / "z.csv", f"{SWEEP_HEADER}\n{LLAMA_ROW},4,0,21\n")
    (run,) = read_measured([src]).runs
    assert run.measured == {"tpot_ms": 21.0}
    assert "ttft_ms 0" in run.note and "not scored" in run.note


def test_a_bad_layout_cell_skips_its_row_not_the_file(tmp_path):
    src = _write(tmp_path / "l.csv", f"pp_size,{SWEEP_HEADER}\n1,{LLAMA_ROW},4,50,20\ntwo,{LLAMA_ROW},8,60,21\n")
    first, second = read_measured([src]).runs
    assert first.error is None
    assert "pp_size is 'two'" in second.error and "l.csv:3" in second.error


def test_a_sweep_may_leave_out_one_latency_column_but_not_both(tmp_path):
    src = _write(tmp_path / "t.csv", "system,model,precision,tp_size,isl,osl,concurrency,ttft_ms\n"
                                     f"{LLAMA_ROW},4,50\n")
    (run,) = read_measured([src]).runs
    assert run.measured == {"ttft_ms": 50.0}
    bad = _write(tmp_path / "n.csv", "gpu,model,precision,tp,isl,osl,concurrency,mean_ttft_ms,mean_tpot_ms\n"
                                     "h200,m,fp8,1,128,16,4,50,20\n")
    message = _error([bad])
    assert "gpu for system" in message and "tp for tp_size" in message
    assert "mean_ttft_ms for ttft_ms" in message and "mean_tpot_ms for tpot_ms" in message


def test_comment_lines_are_skipped(tmp_path):
    src = _write(tmp_path / "c.csv", f"# run of 2026-01-01\n{SWEEP_HEADER}\n{LLAMA_ROW},4,50,20\n# end\n")
    (run,) = read_measured([src]).runs
    assert run.measured == {"ttft_ms": 50.0, "tpot_ms": 20.0}


def test_rows_of_several_sweep_files_name_their_file(tmp_path):
    for name in ("a", "b"):
        _write(tmp_path / f"{name}.csv", f"{SWEEP_HEADER}\n{LLAMA_ROW},4,50,20\n")
    measured = read_measured([tmp_path / "a.csv", tmp_path / "b.csv"])
    assert measured.table["source"].tolist() == ["a.csv", "b.csv"]


@pytest.mark.parametrize(("version", "async_flag"), [("0.7.3", False), ("0.9.2", False), ("0.10.2", True)])
def test_a_recipe_passes_async_scheduling_only_to_releases_that_had_the_flag(tmp_path, version, async_flag):
    """InferenceX's Llama-70B recipe passed --async-scheduling, which vLLM first shipped in
    0.10.0: a row naming an older release on its grid runs without it, as its note says."""
    src = _write(tmp_path / "r.csv", f"{SWEEP_HEADER},vllm_version\n"
                                     f"h200_sxm,meta-llama/Llama-3.1-70B,fp8,1,1024,1024,4,200,21,{version}\n")
    measured, _ = prepare_measured([src], load_scenario(BENCH), [])
    (run,) = measured.runs
    settings = [o for o in run.overrides if o.startswith("scheduler.async_scheduling=")]
    assert settings[-1] == f"scheduler.async_scheduling={str(async_flag).lower()}"
    assert ("async_scheduling=true" in run.launch_flags) is async_flag


def test_a_set_that_replaces_a_rows_setting_is_said(tmp_path):
    src = _write(tmp_path / "s.csv", f"{SWEEP_HEADER}\nh200_sxm,meta-llama/Llama-3.1-70B,fp8,1,1024,1024,4,200,21\n")
    overrides = ["model.kv_dtype=bf16", "hardware.gpu=h100_sxm"]
    measured, _ = prepare_measured([src], load_scenario(BENCH, overrides), overrides)
    (run,) = measured.runs
    assert "--set hardware.gpu=h100_sxm" in run.note and "hardware.gpu=h200_sxm" in run.note
    assert run.note.count("model.kv_dtype=fp8") == 1
    assert run.launch_flags.endswith("replaced by --set: model.kv_dtype=fp8")
    untouched, _ = prepare_measured([src], load_scenario(BENCH), [])
    assert "--set" not in (untouched.runs[0].note or "")


def test_a_per_request_csv_follows_its_model_column_and_names_the_others(tmp_path):
    src = _write(tmp_path / "m.csv", f"{REQUEST_HEADER},model,system,tp_size\n"
                                     "0,1000,50,100,20,1080,Qwen/Qwen3-32B,h200_sxm,1\n"
                                     "1,2000,50,200,20,1180,Qwen/Qwen3-32B,h200_sxm,1\n")
    (run,) = read_measured([src]).runs
    assert run.model_id == "Qwen/Qwen3-32B"
    assert "system (hardware.gpu)" in run.note and "tp_size (parallelism.tp)" in run.note


def test_a_vllm_summary_with_a_nan_mean_and_failed_requests(tmp_path):
    """vLLM saves a mean over no request as NaN (TPOT when every output is one token): that
    metric is not scored; the failed requests, which the summary does not describe, are said."""
    src = tmp_path / "s.json"
    src.write_text('{"backend": "vllm", "num_prompts": 12, "completed": 10, "failed": 2, "request_rate": "inf", '
                   '"max_concurrency": 4, "total_input_tokens": 10240, "total_output_tokens": 10, '
                   '"mean_ttft_ms": 60.0, "mean_tpot_ms": NaN, "mean_e2el_ms": 61.0}')
    (run,) = read_measured([src]).runs
    assert run.measured == {"ttft_ms": 60.0, "e2e_ms": 61.0}
    assert "mean_tpot_ms NaN" in run.note and "2 failed request(s)" in run.note


@pytest.mark.parametrize(("hw", "gpu"), [("b200-trt", "b200"), ("rtx-pro-6000", "rtx-pro-6000"),
                                         ("h100-cr", "h100"), ("h200-nvl", "h200-nvl")])
def test_an_inferencex_runner_label_is_dropped_but_a_dashed_gpu_name_kept(hw, gpu):
    from simulator.validation.inferencex_json import _gpu_of_runner
    assert _gpu_of_runner(hw) == gpu


@pytest.mark.parametrize("spelling", ["fp4", "w4a16_mxfp4", "mxfp4"])
def test_gpt_oss_in_any_spelling_of_its_own_format_gets_its_harness_flags(spelling):
    """gpt-oss's MXFP4 experts are `fp4` in InferenceX's rows and `w4a16_mxfp4` in
    aiconfigurator's terms: one checkpoint, so one launch recipe, and one prediction."""
    from simulator.validation.precision import canonical_precision
    from simulator.validation.recipes import launch_recipe
    recipe = launch_recipe("openai/gpt-oss-120b", "h200_sxm", canonical_precision(spelling), 1024, 1024)
    assert recipe is not None and "gptoss_fp4_{h100,h200}" in recipe.source
    assert launch_recipe("openai/gpt-oss-120b", "h200_sxm", "bf16", 1024, 1024) is None


def test_a_vllm_jsons_failed_request_keeps_its_row_without_a_prediction(tmp_path):
    """A JSON's requests have no id, only their order: a failed request (an entry in
    `errors`) is neither replayed nor scored, but keeps its row in validation.csv, so the
    rows after it still pair with the file's requests (found by an output audit)."""
    doc = {"backend": "vllm", "request_rate": "inf", "max_concurrency": 2,
           "input_lens": [300, 400, 500, 600], "output_lens": [8, 0, 40, 120], "ttfts": [0.05, 0.0, 0.06, 0.07],
           "itls": [[0.01] * 7, [], [0.01] * 39, [0.01] * 119], "errors": ["", "Timeout", "", ""]}
    src = tmp_path / "r.json"
    src.write_text(json.dumps(doc))
    _result, out = run_validation([src], BENCH, [], tmp_path / "out", workers=1)
    table = pd.read_csv(out / "validation.csv")
    assert list(table["prompt_tokens"]) == [300, 400, 500, 600]
    assert table["pred_ttft_ms"].isna().tolist() == [False, True, False, False]
    simulated = table.dropna(subset=["pred_e2e_ms"])
    assert simulated["pred_e2e_ms"].is_monotonic_increasing  # each row's own output: 8, 40, 120 tokens


def test_a_per_request_csvs_prefix_ids_are_labels_as_a_traces_are(tmp_path):
    """A uint64 content hash or a text id names shared text; blank and -1 name none (as
    in a csv trace: `simulator.workload.traces.id_labels`)."""
    head = "arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,prefix_id,prefix_tokens\n"
    rows = "".join(f"{i},100,10,20,5,{pid},50\n" for i, pid in
                   enumerate(["18446744073709551615", "18446744073709551615", "sys", "-1", ""]))
    req = read_measured([_write(tmp_path / "m.csv", head + rows)]).runs[0].requests
    assert req["prefix_id"].tolist() == [0, 0, 1, -1, -1]

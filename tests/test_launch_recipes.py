"""The InferenceX launch flags a sweep row on that harness's grid is simulated with."""

from __future__ import annotations

from pathlib import Path

from simulator.validation.measured import read_measured
from simulator.validation.recipes import AICONFIGURATOR_RECIPES, INFERENCEX_RECIPES, launch_recipe

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
HEAD = "system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms"


def _runs(tmp_path: Path, *rows: str, **kwargs):
    src = tmp_path / "sweep.csv"
    src.write_text("\n".join([HEAD, *rows]) + "\n")
    return read_measured([src], **kwargs).runs


def test_a_grid_row_gets_its_harness_flags_after_the_precision_mapping(tmp_path):
    """MiniMax-M2.5 FP8 on B200 ran with --kv-cache-dtype fp8 and a batch budget of 2 x ISL;
    the checkpoint's own KV dtype (bf16) is what the precision mapping gives, so the
    recipe's assignment must come after it to win."""
    row, = _runs(tmp_path, "b200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,2,8192,1024,64,100.0,10.0")
    kv = [o for o in row.overrides if o.startswith("model.kv_dtype=")]
    assert kv == ["model.kv_dtype=bf16", "model.kv_dtype=fp8"]
    assert "scheduler.max_num_batched_tokens=16384" in row.overrides
    assert "memory.block_size=32" in row.overrides
    assert row.launch_flags.startswith("model.kv_dtype=fp8") and "minimaxm2.5_fp8" in row.launch_flags


def test_rows_off_the_grid_other_models_and_no_recipes_keep_the_base_flags(tmp_path):
    off_grid, llama_b200, gpt_h100 = _runs(
        tmp_path,
        "b200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,2,2000,500,64,100.0,10.0",
        "b200_sxm,meta-llama/Llama-3.1-70B,fp8,8,1024,1024,4,50.0,8.0",
        "h100_sxm,openai/gpt-oss-120b,fp4,2,1000,1000,4,50.0,8.0")
    for run in (off_grid, llama_b200, gpt_h100):
        assert run.launch_flags is None
        assert not any(o.startswith(("memory.", "scheduler.max_num_batched")) for o in run.overrides)
    row, = _runs(tmp_path, "b200_sxm,MiniMaxAI/MiniMax-M2.5,fp8,2,1024,1024,64,100.0,10.0", recipes=False)
    assert row.launch_flags is None and row.overrides[-1] != "scheduler.max_num_batched_tokens=2048"


def test_every_recipe_names_catalog_entries_and_sets_valid_fields(tmp_path):
    """Each recipe resolves from the names the published sample uses and its overrides load."""
    from simulator.config import load_scenario

    for recipe in (*INFERENCEX_RECIPES, *AICONFIGURATOR_RECIPES):
        assert recipe.source and (recipe.overrides(1024) or recipe.engine_version)
        load_scenario(BENCH, recipe.overrides(1024))
    assert launch_recipe("MiniMaxAI/MiniMax-M2.5", "b300_sxm", "fp4", 1024, 1024).batched_tokens_per_isl == 2
    gpt_oss_b200 = launch_recipe("openai/gpt-oss-120b", "b200_sxm", "fp4", 8192, 1024)
    assert gpt_oss_b200.kv_dtype == "fp8"
    assert "model.expert_activation_dtype=fp8" in gpt_oss_b200.overrides(8192)  # MXFP4 x MXFP8 experts
    gpt_oss_h200 = launch_recipe("openai/gpt-oss-120b", "h200_sxm", "fp4", 1024, 1024)
    assert "model.expert_kernel=marlin" in gpt_oss_h200.overrides(1024, "0.15.1")  # VLLM_MXFP4_USE_MARLIN=1
    # 0.11.2 runs Marlin by its release (no Triton MoE shipped), 0.12 Triton, its default; a
    # row naming no release ran the latest script, which sets Marlin
    assert not any("expert_kernel" in o for o in gpt_oss_h200.overrides(1024, "0.11.2")
                   + gpt_oss_h200.overrides(1024, "0.12.0"))
    assert "model.expert_kernel=marlin" in gpt_oss_h200.overrides(1024)
    assert "model.expert_kernel=marlin" in gpt_oss_h200.overrides(1024, "nightly-abc")  # unparsed: recent
    assert launch_recipe("openai/gpt-oss-120b", "h200_sxm", "fp4", 1000, 1000) is None
    assert "parallelism.expert_parallel=true" in launch_recipe("MiniMaxAI/MiniMax-M2.5", "h200_sxm", "fp8", 1024, 8192).overrides(1024)
    assert launch_recipe("no-such/model", "b200_sxm", "fp8", 1024, 1024) is None


def test_validation_reports_the_flags_it_applied(tmp_path):
    """The flags reach the simulation (an FP8 KV cache holds twice the tokens) and the
    result says which flags it used on how many runs."""
    from simulator.validation import run_validation

    src = tmp_path / "sweep.csv"
    src.write_text(HEAD + "\nb200_sxm,openai/gpt-oss-120b,fp4,1,1024,1024,4,50.0,8.0\n")
    with_flags, out = run_validation([src], BENCH, [], tmp_path / "a", rounds=1)
    assert "Server flags of the harness" in (out / "validation.html").read_text()
    without, _ = run_validation([src], BENCH, [], tmp_path / "b", rounds=1, recipes=False)
    assert with_flags["launch_flags"] == [{"flags": with_flags["launch_flags"][0]["flags"], "runs": 1}]
    assert "model.kv_dtype=fp8" in with_flags["launch_flags"][0]["flags"]
    assert "launch_flags" not in without
    from simulator.api import load
    from simulator.simulation import Simulation

    runs = [read_measured([src], recipes=flag).runs[0] for flag in (True, False)]
    kv_tokens = [Simulation(load(BENCH, run.overrides)).memory.capacity_tokens for run in runs]
    assert kv_tokens[0] > 1.9 * kv_tokens[1]


def test_inferencemax_llama_rows_name_the_release_their_harness_ran(tmp_path):
    """Llama 70B FP8 on H100/H200 on the grid: the Oct 2025 template's v0.10.2 image, with
    the script's FP8 KV cache and async scheduling. Off the grid, no recipe."""
    h200, h100, off_grid = _runs(
        tmp_path,
        "h200_sxm,meta-llama/Llama-3.1-70B,fp8,8,1024,1024,4,50.0,8.0",
        "h100_sxm,nvidia/Llama-3.3-70B-Instruct-FP8,fp8,4,8192,1024,16,50.0,8.0",
        "h200_sxm,meta-llama/Llama-3.1-70B,fp8,8,1000,100,4,50.0,8.0")
    for run in (h200, h100):
        assert run.recipe_version == "0.10.2" and run.engine_version is None
        assert {"model.kv_dtype=fp8", "scheduler.async_scheduling=true"} <= set(run.overrides)
        assert "vLLM 0.10.2" in run.launch_flags
    assert off_grid.recipe_version is None and off_grid.launch_flags is None


def test_aiconfigurator_gap_analysis_rows_run_its_release_and_generator_flags(tmp_path):
    """The sample's aic-auto-gap-analysis rows: vLLM 0.12.0 (Dynamo's vllm-runtime:0.8.0),
    with the FP8 cache aiconfigurator's generator asks for, even of a block-scaled FP8
    checkpoint whose own default is 16-bit; fixed lengths, whatever grid they share."""
    llama, qwen_moe, qwen_bf16, off_grid = _runs(
        tmp_path,
        "h200_sxm,nvidia/Llama-3.1-8B-Instruct-FP8,fp8,1,1000,100,112,50.0,8.0",
        "h200_sxm,Qwen/Qwen3-235B-A22B-FP8,fp8,4,4000,500,20,50.0,8.0",
        "h100_sxm,Qwen/Qwen3-32B,,2,1024,1024,8,50.0,8.0",
        "h200_sxm,nvidia/Llama-3.1-8B-Instruct-FP8,fp8,1,1024,128,8,50.0,8.0")
    for run in (llama, qwen_moe, qwen_bf16):
        assert run.recipe_version == "0.12.0" and "aiconfigurator eval" in run.launch_flags
        assert f"workload.prompt_tokens={{type: fixed, value: {run.isl}}}" in run.overrides
    kv = [o for o in qwen_moe.overrides if o.startswith("model.kv_dtype=")]
    assert kv == ["model.kv_dtype=bf16", "model.kv_dtype=fp8"]  # the recipe wins over the checkpoint
    assert "model.kv_dtype=bf16" in qwen_bf16.overrides and qwen_bf16.launch_flags.startswith("vLLM 0.12.0")
    assert off_grid.recipe_version is None and off_grid.launch_flags is None
    # Without recipes the bf16 row on InferenceMAX's lengths takes that harness's spread.
    plain, = _runs(tmp_path, "h100_sxm,Qwen/Qwen3-32B,,2,1024,1024,8,50.0,8.0", recipes=False)
    assert "workload.prompt_tokens={type: uniform, min: 819, max: 1024}" in plain.overrides


def test_a_recipe_release_turns_async_scheduling_off_and_says_so(tmp_path):
    """The release reaches validate as for a version column: 0.12.0 predates async by default."""
    from simulator.validation import run_validation

    src = tmp_path / "sweep.csv"
    src.write_text(HEAD + "\nh200_sxm,nvidia/Llama-3.1-8B-Instruct-FP8,fp8,1,1000,100,4,50.0,8.0\n")
    result, _ = run_validation([src], BENCH, [], tmp_path / "out", rounds=1)
    note, = [r["note"] for r in result["per_run"]]
    assert "0.12.0" in note and "async" in note

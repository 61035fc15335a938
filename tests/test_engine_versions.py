"""Runs measured with an older vLLM simulate with that release's defaults (versions.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import cli

from simulator.errors import ConfigError
from simulator.validation import run_validation
from simulator.validation.versions import check_version, parse_version, version_overrides

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
HEAD = "system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms"
ROW = "h200_sxm,meta-llama/Llama-3.1-8B-Instruct,bf16,1,256,32,8,40.0,5.0"
FAST = ["cost_model.backend=roofline"]


@pytest.mark.parametrize(("text", "want"), [
    ("0.12.0", (0, 12, 0)), ("v0.19.0-cu130", (0, 19, 0)), ("0.10.1.1", (0, 10, 1)), ("0.8", (0, 8, 0)),
    ("nightly-5b8c30d62b754b57", None), ("", None), (None, None), (float("nan"), None),
])
def test_release_numbers_parse_and_build_names_do_not(text, want):
    assert parse_version(text) == want


def test_only_v1_releases_before_0_14_lose_async_scheduling():
    release = "cost_model.engine_version='0.12.0'"
    chunk = "scheduler.reserve_full_prompt=false"  # before 0.19 admission asks for a chunk's blocks
    assert version_overrides("0.12.0", "vllm-v1")[0] == [release, chunk, "scheduler.async_scheduling=false"]
    assert "0.14" in version_overrides("0.13.0", "vllm-v1")[1]
    assert version_overrides("0.14.0", "vllm-v1") == (["cost_model.engine_version='0.14.0'", chunk], None)
    for recent in ("0.19.0", "v0.19.0-cu130"):
        assert version_overrides(recent, "vllm-v1") == ([f"cost_model.engine_version='{recent}'"], None)
    assert version_overrides(None, "vllm-v1") == ([], None)
    extra, note = version_overrides("nightly-5b8c30d6", "vllm-v1")  # taken as recent, and said
    assert extra == [] and "'nightly-5b8c30d6' is not a release number" in note
    # The user's own settings win; other policies have no such default to change.
    assert version_overrides("0.12.0", "vllm-v1", user_set_async=True) == ([release, chunk], None)
    assert version_overrides("0.12.0", "vllm-v1", user_set_async=True, user_set_release=True) == ([chunk], None)
    assert version_overrides("0.2.3", "vllm-v0") == (["cost_model.engine_version='0.2.3'"], None)
    # A V0-engine release under the V1 policy is said, and runs without the V1 defaults that
    # came later (async scheduling, whole-prompt admission): it must not read faster than 0.13.
    extra, note = version_overrides("0.6.3", "vllm-v1")
    assert extra == ["cost_model.engine_version='0.6.3'", chunk, "scheduler.async_scheduling=false"]
    assert "vllm-v0" in note and "without async scheduling" in note
    assert version_overrides("0.6.3", "vllm-v1", user_set_async=True)[0] == ["cost_model.engine_version='0.6.3'",
                                                                              chunk]
    with pytest.raises(ConfigError, match="not a vLLM release"):
        check_version("latest", "--engine-version")


def test_a_later_v0_release_under_the_0_2_preset_is_said():
    """The vllm-0.2 preset's overheads belong to 0.2.x (fitted to DistServe's Ray launch);
    a 0.3-0.7 release under it is simulated as asked, with a note that says so."""
    extra, note = version_overrides("0.4.2", "vllm-v0", engine="vllm-0.2")
    assert extra == ["cost_model.engine_version='0.4.2'"]
    assert "vllm-0.2 carries vLLM 0.2.x's overheads" in note and "vllm-project/vllm#1926" in note
    assert version_overrides("0.2.3", "vllm-v0", engine="vllm-0.2")[1] is None
    assert version_overrides("0.4.2", "vllm-v0", engine="vllm-v1")[1] is None  # the user chose another preset


def test_a_row_of_an_older_release_runs_without_async_scheduling_and_says_so(tmp_path):
    """Same row twice, one marked 0.12.0: without async scheduling its iterations pay
    GPU + CPU time instead of the larger of the two, so TPOT rises; the version column
    passes through to validation.csv unchanged."""
    src = tmp_path / "sweep.csv"
    src.write_text(f"{HEAD},backend_version\n{ROW},0.12.0\n{ROW},0.19.0\n")
    result, out = run_validation([src], BENCH, FAST, tmp_path / "out", rounds=3)
    table = pd.read_csv(out / "validation.csv")
    assert list(table["backend_version"]) == ["0.12.0", "0.19.0"]
    old, new = table["pred_tpot_ms"]
    assert old > new * 1.02
    notes = [n["note"] for n in json.loads((out / "validation.json").read_text())["notes"]]
    assert len(notes) == 1 and "0.12.0 predates async scheduling" in notes[0]
    assert result["runs"] == 2
    # The user's own setting wins over the release's default.
    result, out = run_validation([src], BENCH, [*FAST, "scheduler.async_scheduling=true"], tmp_path / "own",
                                 rounds=3)
    old, new = pd.read_csv(out / "validation.csv")["pred_tpot_ms"]
    assert old == pytest.approx(new) and not result.get("notes")


def test_the_cli_version_covers_rows_without_one_and_a_bad_one_is_refused(tmp_path, capsys):
    src = tmp_path / "sweep.csv"
    src.write_text(f"{HEAD},vllm_version\n{ROW},\n{ROW},0.19.0\n")
    assert cli("validate", src, "--scenario", BENCH, "--set", FAST[0], "--rounds", "3", "-q",
                "--engine-version", "0.13.0", "-j", "1", "--output-dir", tmp_path / "out") == 0
    older, own = pd.read_csv(tmp_path / "out" / "validation.csv")["pred_tpot_ms"]
    assert older > own * 1.02  # the blank row took 0.13.0; the 0.19.0 row kept its own
    capsys.readouterr()
    assert cli("validate", src, "--scenario", BENCH, "--engine-version", "latest",
                "--output-dir", tmp_path / "bad") == 2
    err = capsys.readouterr().err
    assert "not a vLLM release number" in err and "MAJOR.MINOR" in err and "Traceback" not in err
    assert not (tmp_path / "bad").exists()

"""Inputs of the wrong kind or past what they can describe are named as such, with a fix:
a scenario passed as a measurement, a folder or a table-less file as a profile, an
InferenceX aggregate missing its keys, a shared prefix longer than its prompt, and an
`explain` batch the KV cache cannot hold."""

from __future__ import annotations

import json

import pytest
from conftest import CHATBOT, ROOT

from calibration.profile import load_profile
from simulator import api
from simulator.errors import ServesimError
from simulator.explain import explain
from simulator.simulation import Simulation
from simulator.validation.measured import read_measured

PROFILES = ROOT / "calibration" / "profiles"


def test_a_scenario_passed_as_the_measurement_says_which_argument_it_belongs_to():
    with pytest.raises(ServesimError) as exc:
        read_measured([CHATBOT])
    assert "a YAML file, not a measurement" in exc.value.message and "--scenario" in exc.value.fix


def test_a_folder_passed_as_a_profile_is_named_as_a_folder():
    with pytest.raises(ServesimError, match="is a folder, not a profile file"):
        load_profile(PROFILES)


def test_a_profile_without_tables_is_refused(tmp_path):
    data = json.loads((PROFILES / "h100_sxm-measured.json").read_text())
    del data["tables"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))
    with pytest.raises(ServesimError, match="holds no measured rows"):
        load_profile(bare)


@pytest.mark.parametrize(("entry", "lacks"), [
    ({"hw": "h100", "model": "llama70b"}, "precision, isl, osl, conc, mean_ttft, mean_tpot"),
    ({"hardware": "h100", "model": "llama70b", "conc": 4}, "precision, isl, osl, metrics"),
])
def test_an_incomplete_inferencex_entry_names_the_missing_keys(tmp_path, entry, lacks):
    path = tmp_path / "agg_bmk.json"
    path.write_text(json.dumps([entry]))
    with pytest.raises(ServesimError) as exc:
        read_measured([path])
    assert f"lack {lacks} (entry 1)" in exc.value.message


def test_a_prefix_longer_than_its_prompt_is_refused(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,100,10,1,200\n")
    with pytest.raises(ServesimError) as exc:
        api.run(CHATBOT, [f"workload.arrival={{type: trace, path: {trace}}}", "~workload.prompt_tokens",
                          "~workload.output_tokens"])
    assert exc.value.where.endswith(f"{trace}:2") and "longer than the row's prompt" in exc.value.message


def test_explain_refuses_a_batch_the_kv_cache_cannot_hold():
    loaded = api.load(CHATBOT)
    fits = Simulation(loaded).memory.sequences_at(2049)  # 2,048 tokens of context and the one made
    with pytest.raises(ServesimError) as exc:
        explain(loaded, batch=fits + 1, context=2048)
    assert exc.value.where == "--batch" and "do not fit" in exc.value.message
    assert f"at most --batch {fits} " in exc.value.fix
    explain(loaded, batch=fits, context=2048)  # the largest batch it names runs


def test_explains_default_batch_shrinks_to_what_the_kv_cache_holds():
    """A bare `simulate explain` works on every shipped scenario: where 32 sequences of 2,048
    tokens do not fit (OPT-13B on one A100 holds about 26), the default batch is what fits, and
    the notes say so; an explicit --batch is still refused when it cannot run."""
    loaded = api.load(CHATBOT, ["model.name=opt-13b", "hardware.gpu=a100-80gb-sxm"])
    fits = Simulation(loaded).memory.sequences_at(2048)  # the default context: max_model_len 2048 - 1
    assert 0 < fits < 32
    e = explain(loaded)
    assert e.decode_label.startswith(f"decode: one step of {fits} sequences")
    assert any(f"holds {fits} sequences, not the default 32" in n for n in e.notes)
    assert not any("not the default" in n for n in explain(api.load(CHATBOT)).notes)

"""Scenario loading: `--set` overrides, strict validation, and a helpful ServesimError
(where, what, fix) for every class of bad input. Shipped scenarios must all load."""

from __future__ import annotations

import pytest
from conftest import CHATBOT, SCENARIOS, scenario

from simulator import api
from simulator.config import apply_override
from simulator.errors import (
    CatalogError,
    ConfigError,
    DoesNotFitError,
    ServesimError,
    TraceError,
)
from simulator.simulation import Simulation

SHIPPED = sorted(p for p in SCENARIOS.rglob("*.yaml") if "plans" not in p.relative_to(SCENARIOS).parts)


def error_of(exc_info) -> str:
    """The text a user sees (the CLI prints `render()`), whitespace-normalised."""
    return " ".join(str(exc_info.value).split())


# -- overrides -------------------------------------------------------------------------------
def test_override_value_is_parsed_as_yaml():
    loaded = api.load(CHATBOT, ["workload.arrival.rate=20"])
    rate = loaded.scenario.workload.arrival.rate
    assert isinstance(rate, float) and rate == 20.0
    loaded = api.load(CHATBOT, ["workload.num_requests=50", "model.name=llama-2-7b",
                                "scheduler.enable_chunked_prefill=false",
                                "model.max_model_len=4096"])
    sc = loaded.scenario
    assert sc.workload.num_requests == 50 and isinstance(sc.workload.num_requests, int)
    assert sc.model.name == "llama-2-7b"
    assert sc.scheduler.enable_chunked_prefill is False
    # The effective YAML (for the report) carries the overrides.
    assert "llama-2-7b" in loaded.text


def test_override_creates_nested_new_keys():
    loaded = api.load(CHATBOT, ["scheduler.max_num_seqs=8",
                                "cost_model.efficiency.gemm_compute=0.5"])
    assert loaded.scenario.scheduler.max_num_seqs == 8
    assert loaded.scenario.cost_model.efficiency.gemm_compute == 0.5
    data: dict = {}
    apply_override(data, "a.b.c=[1, 2]")
    apply_override(data, "a.b.d=x=y")  # only the first '=' separates
    apply_override(data, "e=")
    assert data == {"a": {"b": {"c": [1, 2], "d": "x=y"}}, "e": None}


def test_overrides_apply_in_order_and_switch_policy():
    loaded = api.load(CHATBOT, ["workload.arrival.rate=5", "workload.arrival.rate=7.5",
                                "scheduler.policy=dynamic", "scheduler.max_wait_ms=5"])
    assert loaded.scenario.workload.arrival.rate == 7.5
    assert loaded.scenario.scheduler.policy == "dynamic"
    assert loaded.scenario.scheduler.max_wait_ms == 5.0


@pytest.mark.parametrize(("override", "words"), [
    ("workload.arrival.rate", ["no '='", "dotted.path=value"]),
    ("=3", ["empty path"]),
    ("...=3", ["empty path"]),
    ("model.name.x=1", ["model.name is not a section"]),
])
def test_bad_override_forms(override, words):
    with pytest.raises(ConfigError) as exc:
        api.load(CHATBOT, [override])
    text = error_of(exc)
    assert "--set" in text
    for w in words:
        assert w in text


def test_tilde_override_removes_a_field_the_file_sets():
    """Switching policy by --set leaves the file's policy-specific fields behind; `~path`
    removes one, and the error that names such a field says how."""
    base = scenario("vllm-v0")
    base["scheduler"]["max_paddings"] = 256
    with pytest.raises(ConfigError) as exc:
        api.load(data=base, overrides=["scheduler.policy=vllm-v1"])
    assert "--set '~scheduler.max_paddings'" in error_of(exc)
    loaded = api.load(data=base, overrides=["scheduler.policy=vllm-v1", "~scheduler.max_paddings"])
    assert loaded.scenario.scheduler.policy == "vllm-v1"
    assert "max_paddings" not in loaded.text
    with pytest.raises(ConfigError) as exc:
        api.load(data=base, overrides=["~scheduler.nope"])
    assert "sets no field 'scheduler.nope'" in error_of(exc) and "--set" in error_of(exc)


def test_override_does_not_modify_the_callers_dict():
    d = scenario("vllm-v1")
    api.load(data=d, overrides=["workload.arrival.rate=99", "slo.ttft_ms=5"])
    assert d["workload"]["arrival"]["rate"] == 5.0 and "slo" not in d


# -- validation errors -----------------------------------------------------------------------
def load_with(*overrides: str):
    return api.load(CHATBOT, list(overrides))


@pytest.mark.parametrize(("override", "field", "hint"), [
    ("workload.arrival.rat=3", "rat", "did you mean `rate`"),
    ("scheduler.max_num_seq=8", "max_num_seq", "did you mean `max_num_seqs`"),
    ("modle.name=x", "modle", "did you mean `model`"),
    ("memory.blocksize=32", "blocksize", "did you mean `block_size`"),
    ("cost_model.efficiency.gemm_compte=0.5", "gemm_compte", "did you mean `gemm_compute`"),
])
def test_unknown_field_is_named_with_allowed_fields(override, field, hint):
    with pytest.raises(ConfigError) as exc:
        load_with(override)
    text = error_of(exc)
    assert field in text and hint in text
    assert "allowed here:" in text
    assert exc.value.fix


def test_unknown_field_lists_the_sections_fields():
    with pytest.raises(ConfigError) as exc:
        load_with("parallelism.ep=2")
    text = error_of(exc)
    assert "parallelism" in text and "ep" in text
    for allowed in ("dp", "pp", "replicas", "tp"):
        assert allowed in exc.value.fix


def test_knob_of_another_policy_is_rejected():
    with pytest.raises(ConfigError) as exc:
        load_with("scheduler.max_wait_ms=5")  # a dynamic-batching knob under vllm-v1
    assert "max_wait_ms" in error_of(exc)


@pytest.mark.parametrize(("override", "words"), [
    ("parallelism.tp=two", ["parallelism.tp", "'two'", "integer"]),
    ("parallelism.tp=2.5", ["parallelism.tp", "integer"]),
    ("workload.num_requests=many", ["workload.num_requests", "'many'"]),
    ("workload.arrival.rate=-1", ["rate", "greater than 0", "-1"]),
    ("workload.arrival.rate=0", ["rate", "greater than 0"]),
    ("workload.arrival.rate=.inf", ["rate", "finite"]),
    ("memory.gpu_memory_utilization=1.5", ["gpu_memory_utilization", "less than or equal to 1"]),
    ("memory.block_size=0", ["block_size"]),
    ("scheduler.policy=vllm", ["scheduler", "'vllm'", "vllm-v1", "continuous", "static"]),
    ("workload.prompt_tokens.type=zipf", ["prompt_tokens", "zipf", "lognormal"]),
    ("workload.output_tokens.min=0", ["output_tokens", "min"]),
    ("slo.ttft_ms=-5", ["slo.ttft_ms"]),
    # YAML reads these as a number and a mapping: the fix says to quote them.
    ("name=123", ["name", "valid string", "quote the value", "--set \"name='...'\""]),
    ("description=a: b", ["description", "quote the value"]),
    # A field of another variant of the section: that variant is named.
    ("workload.arrival.burstiness=0.5", ["burstiness", "belongs to type: gamma"]),
    # A count written as a decimal number; a section given a value: said in the scenario's terms.
    ("workload.num_requests=1e3", ["workload.num_requests", "write a whole number: 1000"]),
    ("workload.num_requests=2.5", ["workload.num_requests", "write a whole number ("]),
    ("model=3", ["model: expected a section of fields", "--set model.FIELD=VALUE"]),
])
def test_bad_values_name_field_and_value(override, words):
    with pytest.raises(ConfigError) as exc:
        load_with(override)
    text = error_of(exc)
    for w in words:
        assert w in text, (w, text)
    assert exc.value.fix


def test_several_problems_are_reported_together():
    with pytest.raises(ConfigError) as exc:
        load_with("parallelism.tp=two", "memory.block_size=0")
    text = error_of(exc)
    assert "2 problems" in text and "parallelism.tp" in text and "memory.block_size" in text


def test_model_needs_exactly_one_source():
    d = scenario()
    d["model"]["config_json"] = "config.json"
    with pytest.raises(ConfigError) as exc:
        api.load(data=d)
    assert "config_json" in error_of(exc)


def test_a_set_model_source_replaces_the_files_other_one():
    """`--set model.config_json=PATH` on a catalog-named scenario describes the model by that
    file (and `model.name` on a config.json scenario names it from the catalog), instead of
    failing as two sources; a null does not count, and the file's own two still fail."""
    from simulator.config import load_scenario
    d = scenario()
    loaded = load_scenario(data=d, overrides=["model.config_json=config.json"])
    assert loaded.scenario.model.name is None and loaded.scenario.model.config_json == "config.json"
    named = load_scenario(data=d, overrides=["model.config_json=config.json", "model.name=llama-3.1-70b"])
    assert named.scenario.model.name == "llama-3.1-70b" and named.scenario.model.config_json is None
    assert load_scenario(data=d, overrides=["model.config_json=null"]).scenario.model.name == d["model"]["name"]


def test_missing_lengths_for_synthetic_arrivals():
    d = scenario()
    del d["workload"]["output_tokens"]
    with pytest.raises(ConfigError) as exc:
        api.load(data=d)
    assert "output_tokens" in error_of(exc) and exc.value.fix


def test_missing_required_section():
    d = scenario()
    del d["model"]
    with pytest.raises(ConfigError) as exc:
        api.load(data=d)
    assert "model: Field required" in error_of(exc) and "add this field" in exc.value.fix


def test_unknown_model_name():
    with pytest.raises(CatalogError) as exc:
        api.run(scenario(model="llama-3.1-9b"), record_iterations=False)
    text = error_of(exc)
    assert "llama-3.1-9b" in text and "llama-3.1-8b" in text  # suggests known names


def test_unknown_gpu():
    with pytest.raises(CatalogError) as exc:
        api.run(scenario(gpu="h900"))
    text = error_of(exc)
    assert "h900" in text and "h100-sxm" in text


def test_model_that_does_not_fit():
    with pytest.raises(DoesNotFitError) as exc:
        api.run(scenario(model="llama-3.1-70b", gpu="l4"))
    text = error_of(exc)
    assert "weights" in text and "KV" in text
    assert "l4" in text and "llama-3.1-70b" in text
    assert "tp" in exc.value.fix  # tells how to make it fit


def test_kv_cache_smaller_than_max_model_len_does_not_fit():
    with pytest.raises(DoesNotFitError) as exc:
        api.run(scenario(kv_tokens=1024, max_model_len=4096))
    assert "max_model_len" in error_of(exc)


@pytest.mark.parametrize(("kw", "words"), [
    ({"tp": 3}, ["tp=3", "32 attention heads", "[1, 2, 4, 8, 16, 32]"]),
    ({"pp": 64}, ["pp=64", "32 layers"]),
])
def test_parallelism_that_does_not_divide_the_model(kw, words):
    with pytest.raises(ConfigError) as exc:
        api.run(scenario(**kw))
    text = error_of(exc)
    for w in words:
        assert w in text
    assert exc.value.where == ("parallelism.tp" if "tp" in kw else "parallelism.pp")


def trace_scenario(path) -> dict:
    d = scenario()
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
    return d


def test_missing_trace_file(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(TraceError) as exc:
        api.run(trace_scenario(missing))
    assert "nope.csv" in error_of(exc) and "not found" in error_of(exc)


@pytest.mark.parametrize(("rows", "line", "word"), [
    ("0,10,10\n0.5,abc,3\n", 3, "prompt_tokens"),
    ("0,10,10\n1,10,10\nx,10,10\n", 4, "arrival_s"),
    ("0,10,10\n1,10,-4\n", 3, "output_tokens"),
])
def test_malformed_trace_row_names_its_line(tmp_path, rows, line, word):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    with pytest.raises(TraceError) as exc:
        api.run(trace_scenario(trace))
    text = error_of(exc)
    assert f"t.csv:{line}" in text and word in text


def test_trace_with_lengths_is_rejected(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,10\n")
    d = trace_scenario(trace)
    d["workload"]["prompt_tokens"] = {"type": "fixed", "value": 3}
    with pytest.raises(ConfigError) as exc:
        api.load(data=d)
    assert "length_scale" in exc.value.fix


def test_scenario_file_problems(tmp_path):
    with pytest.raises(ConfigError) as exc:
        api.load(tmp_path / "missing.yaml")
    assert "not found" in error_of(exc)
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  name: llama-3.1-8b\n workload: [\n")
    with pytest.raises(ConfigError) as exc:
        api.load(bad)
    assert "bad.yaml:" in error_of(exc) and "YAML" in error_of(exc)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(ConfigError) as exc:
        api.load(listing)
    assert "mapping" in error_of(exc)


def test_every_error_class_is_a_servesim_error():
    for cls in (ConfigError, CatalogError, TraceError, DoesNotFitError):
        assert issubclass(cls, ServesimError)
    e = ConfigError("bad thing", where="a.b", fix="do this")
    assert str(e) == "a.b: bad thing\n  fix: do this"


# -- shipped scenarios ---------------------------------------------------------------------
def test_scenarios_are_shipped():
    assert CHATBOT in SHIPPED and len(SHIPPED) >= 2


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(SCENARIOS)) for p in SHIPPED])
def test_shipped_scenario_loads_and_builds(path):
    loaded = api.load(path)
    assert loaded.name
    sim = Simulation(loaded)  # catalogs, parallelism checks, memory plan, workload
    assert sim.memory.capacity_tokens >= sim.max_model_len


def test_a_fleet_too_large_to_simulate_is_refused_before_it_is_built(tmp_path, capsys):
    """Ten million replicas took minutes and all memory to build before the first event
    (session-56 fuzz); the field now says how many one run simulates."""
    from conftest import CHATBOT, cli

    assert cli(CHATBOT, "--set", "parallelism.replicas=10000000", "-q", "--no-report", "-o", tmp_path / "o") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "parallelism.replicas" in err and "100000" in err and "Traceback" not in err

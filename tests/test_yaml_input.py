"""Scenario YAML: exponent-only floats are numbers, and a key given twice is an error."""

from __future__ import annotations

import pytest
import yaml
from conftest import CHATBOT
from hypothesis import given
from hypothesis import strategies as st

from simulator.config import load_scenario
from simulator.errors import ConfigError
from simulator.yaml_input import DuplicateKeyError, load_yaml


@given(st.integers(1, 999), st.integers(-12, 12))
def test_exponent_floats_are_numbers(mantissa, exponent):
    """YAML 1.1 reads `1e3` as a string; scenario authors mean the number."""
    text = f"{mantissa}e{exponent}"
    assert load_yaml(f"x: {text}") == {"x": float(text)}


def test_other_scalars_keep_their_yaml_types():
    got = load_yaml("a: 12\nb: 1.5\nc: .inf\nd: '1e3'\ne: abc\nf: true\ng: null\nh: 1_000")
    assert got == {"a": 12, "b": 1.5, "c": float("inf"), "d": "1e3", "e": "abc", "f": True, "g": None, "h": 1000}


def test_a_key_given_twice_is_refused_with_both_lines():
    with pytest.raises(DuplicateKeyError) as err:
        load_yaml("model:\n  name: a\nhardware: {}\nmodel:\n  name: b\n")
    assert "'model' is given twice (first at line 1)" in err.value.problem
    assert err.value.problem_mark.line == 3
    assert isinstance(err.value, yaml.YAMLError)


def test_scenario_with_a_repeated_block_names_the_file_and_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("model:\n  name: llama-3.1-8b\nmodel:\n  name: qwen3-8b\n")
    with pytest.raises(ConfigError) as err:
        load_scenario(path)
    assert err.value.where == f"{path}:3" and "given twice" in err.value.message


def test_set_accepts_scientific_notation():
    loaded = load_scenario(CHATBOT, ["workload.arrival.rate=1e1"])
    assert loaded.scenario.workload.arrival.rate == 10.0


@pytest.mark.parametrize("override", ["slo.ttft_ms=.inf", "workload.arrival.rate=.inf", "hardware.cost_per_gpu_hour=.inf"])
def test_infinite_values_are_refused_at_load(override):
    """An infinite limit passes every `> 0` bound and used to break the run after it ran."""
    with pytest.raises(ConfigError, match="finite"):
        load_scenario(CHATBOT, [override])


def test_a_key_without_its_colon_is_named_at_its_own_line(tmp_path):
    """The parser finds a missing ':' on the line after the key; the error names the key's."""
    lines = CHATBOT.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("num_requests:"))
    lines[at] = lines[at].replace("num_requests:", "num_requests")
    bad = tmp_path / "bad.yaml"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as exc:
        load_scenario(bad)
    assert exc.value.where == f"{bad}:{at + 1}" and "expected ':'" in exc.value.message

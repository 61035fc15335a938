"""The scenario reference gives sections (unions, optional ones) rows of their own, and a
union section written without its tag is an error that names the tag and its values."""

from __future__ import annotations

import pytest
from conftest import CHATBOT, scenario

from simulator import api
from simulator.errors import ConfigError
from simulator.reference import render
from simulator.scheduler import POLICIES


def row(path: str) -> str:
    """The reference row of `path`, whitespace-normalised."""
    for line in render().splitlines():
        if line.startswith(f"| `{path}` |"):
            return " ".join(line.split())
    raise AssertionError(f"no row for {path}")


def test_scheduler_row_names_the_default_policy_and_the_tag():
    text = row("scheduler")
    assert "`policy: vllm-v1`" in text and "picked by `policy`" in text
    assert "(section defaults)" not in render()


def test_optional_sections_have_their_own_rows():
    text = row("disaggregation")
    assert "optional section" in text and "absent" in text
    assert "separate pools" in text  # the field's description, not an empty cell
    text = row("workload.shared_prefix")
    assert "optional section" in text and "absent" in text
    assert "**required** within the section" in row("workload.shared_prefix.tokens")


def test_required_fields_outside_optional_sections_read_plainly_required():
    assert "| **required** |" in row("workload.arrival")
    assert "| **required** |" in row("workload.arrival.rate")


@pytest.mark.parametrize("overrides", [["~scheduler.policy"], ["scheduler={max_num_seqs: 64}"]])
def test_scheduler_section_without_policy_names_policy_and_lists_policies(overrides):
    with pytest.raises(ConfigError) as exc:
        api.load(CHATBOT, overrides)
    text = " ".join(str(exc.value).split())
    assert "Unable to extract tag" not in text
    assert "`policy`" in text and "policy: vllm-v1" in text
    assert all(name in exc.value.fix for name in POLICIES)


@pytest.mark.parametrize(("section", "tags"), [
    ("arrival", ["poisson", "gamma", "constant", "closed_loop", "trace"]),
    ("prompt_tokens", ["fixed", "uniform", "normal", "lognormal", "empirical"]),
])
def test_every_union_without_its_tag_names_the_tag(section, tags):
    d = scenario()
    del d["workload"][section]["type"]
    with pytest.raises(ConfigError) as exc:
        api.load(data=d)
    assert f"workload.{section}" in str(exc.value) and "add `type`" in exc.value.fix
    assert all(tag in exc.value.fix for tag in tags)

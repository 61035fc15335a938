"""Docs that must match the code."""

from __future__ import annotations

from pathlib import Path

from simulator.reference import BEGIN, END, render

ROOT = Path(__file__).resolve().parent.parent


def test_readme_scenario_reference_matches_the_config_models():
    text = (ROOT / "README.md").read_text()
    section = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert section == render().strip(), "README is stale: run `python -m simulator.reference`"


def test_reference_lists_every_policy_and_arrival_type():
    from simulator.scheduler import POLICIES

    table = render()
    for name in POLICIES:
        assert f"scheduler.policy: {name}" in table
    for kind in ("poisson", "gamma", "constant", "closed_loop", "trace"):
        assert f"workload.arrival.type: {kind}" in table

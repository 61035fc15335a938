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


def _common_questions() -> list[list[str]]:
    """The `$ simulate ...` lines of README's "Common questions" section, as argv lists."""
    import shlex

    text = (ROOT / "README.md").read_text()
    section = text.split("### Common questions", 1)[1].split("```console", 1)[1].split("```", 1)[0]
    lines = [line.removeprefix("$ simulate ").split("   #", 1)[0] for line in section.splitlines()
             if line.startswith("$ simulate ")]
    return [shlex.split(line) for line in lines]


def test_readme_common_questions_all_run(tmp_path):
    """Every command of the section runs as written (shortened: fewer requests, a quick plan
    search, no report), so the guide cannot drift from the code."""
    from conftest import cli

    commands = _common_questions()
    assert len(commands) >= 6
    for i, argv in enumerate(commands):
        if argv[0] == "plan":
            quick = ["--set", "search.tolerance=0.3", "--set", "search.verify=false",
                     "--set", "search.requests_per_point=100", "--set", "search.max_requests_per_point=300"]
            args = [*argv, *quick, "-q", "-o", tmp_path / f"q{i}"]
        elif argv[0] == "explain":
            args = argv
        elif argv[0] == "compare":
            args = [*argv, "--set", "workload.num_requests=60", "-q", "-o", tmp_path / f"q{i}"]
        else:
            args = [*argv, "--set", "workload.num_requests=60", "--no-report", "-q", "-o", tmp_path / f"q{i}"]
        assert cli(*(str(a).replace("scenarios/", str(ROOT / "scenarios") + "/", 1) for a in args)) == 0, argv

"""The Python API, for notebooks and scripts; the CLI is a thin layer over it.

    >>> from simulator import api
    >>> result = api.run("scenarios/chatbot.yaml", overrides=["workload.arrival.rate=5"])
    >>> result.summary["ttft_ms"]["p99"]                 # doctest: +SKIP
    >>> result.requests.head()                          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from simulator.config import LoadedScenario, blamed, load_scenario, override_behind
from simulator.errors import ServesimError
from simulator.output import write_outputs
from simulator.simulation import Simulation, SimulationResult
from simulator.yaml_input import load_yaml


def load(path: str | Path | dict | None = None, overrides: list[str] | None = None, *,
         data: dict | None = None) -> LoadedScenario:
    """Load and validate a scenario file (or a dict, as `data` or in place of the path),
    with `dotted.path=value` overrides."""
    if isinstance(path, dict):
        path, data = None, path
    return load_scenario(path, overrides, data=data)


def run(scenario: LoadedScenario | str | Path | dict, overrides: list[str] | None = None, *,
        record_iterations: bool = True, fast_forward: bool = True,
        progress: Callable[[int, int], None] | None = None) -> SimulationResult:
    """Simulate a scenario; returns the summary dict and the requests/iterations frames.

    `record_iterations=False` keeps no per-iteration rows (the summary is the same; the
    iterations frame is empty), as compare, plan and validate run; `fast_forward=False`
    steps every decode iteration instead of advancing decode-only stretches at once (the
    same result, slower: for equivalence tests); `progress(done, total)` is called as
    requests settle. A bad scenario raises ServesimError (ConfigError, CatalogError) with
    the field and a fix, before anything runs."""
    if isinstance(scenario, dict):
        loaded = load(data=scenario, overrides=overrides)
    elif isinstance(scenario, LoadedScenario):
        # Overrides apply on top of what was loaded (its own overrides included), not on a
        # fresh read of its file; a scenario loaded from a dict has no file to re-read.
        loaded = scenario if not overrides else load_scenario(scenario.path, overrides, data=load_yaml(scenario.text))
    else:
        loaded = load(scenario, overrides)
    try:
        sim = Simulation(loaded)
    except ServesimError as exc:
        raise naming_the_file(exc, loaded) from None
    return sim.run(record_iterations=record_iterations, fast_forward=fast_forward, progress=progress)


def naming_the_file(exc: ServesimError, loaded: LoadedScenario) -> ServesimError:
    """A problem found while building the run (an unknown model, a model that does not fit)
    names its field; prefix the scenario file, so the message says where to look, and name
    the `--set` that wrote the field, as a validation error would."""
    return blamed(exc, loaded.path, override_behind(str(exc.where or ""), loaded.overrides))


__all__ = ["LoadedScenario", "SimulationResult", "load", "run", "write_outputs"]

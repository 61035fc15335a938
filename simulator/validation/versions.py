"""Defaults that changed between vLLM releases, applied to runs measured with an older one.

A measurement names its vLLM version in a sweep column (`engine_version`, `vllm_version`,
or aiconfigurator's `backend_version`) or through `simulate validate --engine-version`.
The base scenarios follow today's vLLM; a run measured with a release whose defaults
differ is simulated with that release's defaults instead. Two defaults differ within the
V1 engine the `vllm-v1` policy models:

- From vLLM 0.19 the scheduler admits a waiting request only when blocks for its whole
  prompt are free (`scheduler_reserve_full_isl`, on by default); before, the first chunk's
  were enough and a request that did not fit later preempted itself or others.
- Async scheduling is on by default from vLLM 0.14 (vllm-project/vllm#27614, tracked in
  #27679; InferenceX's PR 789 dropped `--async-scheduling` from its scripts as "enabled by
  default since v0.14.0"). Before it, each iteration's CPU work (scheduling, input
  preparation, output processing) adds to the GPU time instead of overlapping it, which
  matters most where iterations are short (small models, many GPUs).

The release also reaches the cost model (`cost_model.engine_version`), for the kernels that
release ran where they differ from those the kernel tables time (simulator/cost/releases.py).
Versions that do not parse (a nightly build's hash) are taken as recent.
"""

from __future__ import annotations

from simulator.cost.releases import RELEASE_FORMAT, parse_version
from simulator.errors import ConfigError

VERSION_COLUMNS = ("engine_version", "vllm_version", "backend_version")
ASYNC_DEFAULT_SINCE = (0, 14)
FULL_PROMPT_RESERVED_SINCE = (0, 19)  # SchedulerConfig.scheduler_reserve_full_isl, on by default
V1_ENGINE_SINCE = (0, 8)  # older releases ran the V0 engine: the `vllm-v0` policy models it
LATER_V0_SINCE = (0, 3)  # after the 0.2.x releases the `vllm-0.2` engine preset was fitted to


def check_version(text: str | None, where: str) -> str | None:
    """The CLI's --engine-version, refused when it is not a release number."""
    if text is None:
        return None
    if parse_version(text) is None:
        raise ConfigError(f"engine version {text!r} is not a vLLM release number", where=where,
                          fix=f"give it as {RELEASE_FORMAT}")
    return text


def version_overrides(version: str | None, policy: str, user_set_async: bool = False,
                      user_set_release: bool = False, engine: str = "vllm-v1",
                      user_set_reserve: bool = False) -> tuple[list[str], str | None]:
    """The assignments a run measured with `version` needs under a base scenario whose
    scheduler is `policy`, and a note that says so; none where the user set the field.
    Every parsed release is passed to the cost model, for the kernels it ran (cost/releases.py)."""
    parsed = parse_version(version)
    if parsed is None:  # a nightly build's hash: no release to take defaults from
        return [], (f"vLLM version {version!r} is not a release number: simulated with the newest "
                    "release's defaults" if version and str(version).strip() else None)
    out = [] if user_set_release else [f"cost_model.engine_version='{version}'"]
    if policy == "vllm-v0" and engine == "vllm-0.2" and parsed[:2] >= LATER_V0_SINCE:
        return out, (f"the base's engine preset vllm-0.2 carries vLLM 0.2.x's overheads (eager kernels, a "
                     f"Python sampler, DistServe's Ray-launched workers); vLLM {version} captured CUDA graphs "
                     "for decode (vllm-project/vllm#1926) and ran TP1 without Ray: the preset's per-step costs "
                     "overstate it")
    if policy != "vllm-v1":
        return out, None
    note = None
    if parsed[:2] < FULL_PROMPT_RESERVED_SINCE and not user_set_reserve:
        out.append("scheduler.reserve_full_prompt=false")
    if parsed[:2] < ASYNC_DEFAULT_SINCE and not user_set_async:
        out.append("scheduler.async_scheduling=false")
        note = f"vLLM {version} predates async scheduling by default (0.14): simulated without it"
    if parsed[:2] < V1_ENGINE_SINCE:  # neither rule existed in the V0 engine either
        note = (f"vLLM {version} ran the V0 engine, which the base scenario's vllm-v1 policy does not "
                "model (simulated with V1's scheduler, without async scheduling): use a scenario with "
                "scheduler.policy vllm-v0")
    return out, note

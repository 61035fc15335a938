"""Prompt and output lengths of a closed-loop sweep row, as the harness behind it drew them."""

from __future__ import annotations

# The harness behind the published closed-loop sweeps (InferenceMAX/InferenceX, whose
# vLLM rows aiconfigurator's silicon sample and the dev set carry) runs its
# benchmark_serving.py with `--random-range-ratio 0.8`: every prompt and output length is a
# uniform integer in [int(0.8 x len), len], so isl/osl are maxima and the means are 0.9x.
# `--length-ratio 1` simulates exactly fixed lengths instead. See docs/fidelity.md.
HARNESS_LENGTH_RATIO = 0.8
# Its sweep grid: rows with these (isl, osl) come from that harness. Other rows are taken
# as the fixed-length closed loop most clients run by default (vLLM bench serve's random
# range ratio 0, AIPerf/genai-perf with zero length spread), unless --length-ratio says.
INFERENCEMAX_GRID = frozenset({(1024, 1024), (1024, 8192), (8192, 1024)})


def harness_length_ratio(isl: int, osl: int, harness_ratio: float | None = None) -> float:
    """`--length-ratio auto`: the ratio of the row's harness where its launch recipe names one
    (recipes.py), else the InferenceMAX ratio on its grid and fixed lengths elsewhere."""
    if harness_ratio is not None:
        return harness_ratio
    return HARNESS_LENGTH_RATIO if (isl, osl) in INFERENCEMAX_GRID else 1.0


def length_overrides(isl: int, osl: int, ratio: float) -> list[str]:
    """Prompt and output length distributions of one sweep row (see HARNESS_LENGTH_RATIO)."""
    if ratio >= 1.0:
        # Exactly fixed: clients that start together finish together and send together, so a
        # closed loop keeps its groups (lockstep), as measured fixed-length sweeps show.
        return [f"workload.prompt_tokens={{type: fixed, value: {isl}}}",
                f"workload.output_tokens={{type: fixed, value: {osl}}}"]
    return [f"workload.{field}={{type: uniform, min: {max(1, int(n * ratio))}, max: {n}}}"
            for field, n in (("prompt_tokens", isl), ("output_tokens", osl))]

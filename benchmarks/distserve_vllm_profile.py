"""servesim's vLLM 0.2 iteration times against DistServe's offline profile of that vLLM.

    python benchmarks/distserve_vllm_profile.py

DistServe published the per-iteration times it measured of its vLLM baseline (vLLM 0.2.3,
offline, A100-80GB SXM) as fitted coefficients per model and TP
(LLMServe/DistServe, `simdistserve/estimators/profile_data/profiler-a100-80g.vllm.json`,
Apache-2.0; the formulas are those of `simdistserve/estimators/time_estimator.py`):

    prefill = a + b x prompt tokens + c x sum of squared prompt lengths      (ms)
    decode  = a + b x context tokens in the batch + c x sequences            (ms)

This prints them beside servesim's step under
`scenarios/validation/distserve-opt13b-a100-vllm.yaml` with the model and TP changed,
both with and without the engine's per-iteration CPU work (framework overhead and the
online server's per-sequence cost, which an offline profile does not carry). It is a
check of the cost model's TP scaling in an eager engine, measured per iteration, not
end to end; nothing is fitted to it (docs/fidelity.md, Known gaps).
"""

from __future__ import annotations

from pathlib import Path

from simulator.config import load_scenario
from simulator.errors import ConfigError
from simulator.explain import explain

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "validation" / "distserve-opt13b-a100-vllm.yaml"

# (model, TP) -> (prefill a, b, c), (decode a, b, c) for batches under 95 sequences.
PROFILE = {
    ("opt-13b", 1): ((23.62736227, 0.15054561, 8.65348374e-06), (19.562534173678987, 0.0004941120550644942, 0.05060571771697455)),
    ("opt-13b", 2): ((19.600575891293346, 0.06467523343305222, 6.037181652318591e-06), (20.450486868259052, 0.0001870012118669617, 0.072631560578732484)),
    ("opt-13b", 4): ((21.811658992892433, 0.03679032097721533, 3.0231950949588526e-07), (21.584287035694526, 6.461362045192257e-05, 0.04606739300723169)),
    ("opt-66b", 2): ((41.7015733105815, 0.27331485930584765, -5.081534767692464e-06), (47.5612011433094, 0.0030384282314622714, 0.18744780287493518)),
    ("opt-66b", 4): ((30.68963525855282, 0.15204703019896387, 3.286440997304907e-05), (32.98482446677012, 0.000578810141033908, 0.11317390154663971)),
}
DECODE_POINTS = ((1, 500), (4, 500), (16, 500))  # (sequences, context each)
PREFILL_POINTS = (256, 1000)
CPU_WORK = "framework_overhead"


def _step_ms(parts: dict[str, float]) -> tuple[float, float]:
    """(the whole step, the step without the engine's CPU work), ms."""
    total = sum(parts.values()) * 1e3
    return total, total - parts[CPU_WORK] * 1e3


def main() -> None:
    print(f"{'model':8} {'TP':>2}  {'step':26} {'DistServe':>9} {'servesim':>9} {'w/o CPU work':>12}")
    for (model, tp), (pre, dec) in PROFILE.items():
        loaded = load_scenario(SCENARIO, [f"model.name={model}", f"parallelism.tp={tp}"])
        for batch, context in DECODE_POINTS:
            try:
                e = explain(loaded, batch=batch, context=context, prefill=PREFILL_POINTS[0])
            except ConfigError:  # OPT-66B at TP2 holds only 6 such sequences
                continue
            total, gpu = _step_ms(e.decode)
            measured = dec[0] + dec[1] * batch * context + dec[2] * batch
            print(f"{model:8} {tp:>2}  decode {batch:>2} x {context} tokens     {measured:9.1f} {total:9.1f} {gpu:12.1f}")
        for prefill in PREFILL_POINTS:
            total, gpu = _step_ms(explain(loaded, batch=1, context=DECODE_POINTS[0][1], prefill=prefill).prefill)
            measured = pre[0] + pre[1] * prefill + pre[2] * prefill ** 2
            print(f"{model:8} {tp:>2}  prefill {prefill:>4} tokens          {measured:9.1f} {total:9.1f} {gpu:12.1f}")


if __name__ == "__main__":
    main()

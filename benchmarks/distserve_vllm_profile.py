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
end to end (docs/fidelity.md, Known gaps).

The last column times the same steps with the kernels issued from Python and overlapped
with the GPU kernel by kernel (`cost_model.dispatch_us_per_kernel`, simulator/cost/dispatch.py)
under the offline constants in EAGER, which `--fit` least-squares fits to the decode rows
(the one place this profile is fitted to; the shipped `vllm-0.2` preset does not use them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

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
# Offline constants of vLLM 0.2 with overlapped dispatch: µs to issue a kernel, ms per iteration,
# µs per sequence (`--fit` prints them; docs/fidelity.md, Known gaps).
EAGER = (42.0, 2.9, 120.0)
FIT_DISPATCH_US = (36.0, 38.0, 40.0, 42.0, 44.0, 46.0, 48.0)
FIT_POINTS = ((1, 200), (1, 900), (4, 200), (4, 900), (16, 200), (16, 900))


def _eager(dispatch_us: float, framework_ms: float = 0.0, per_sequence_us: float = 0.0) -> list[str]:
    return ["cost_model.kernel_latency_us=3.5", f"cost_model.dispatch_us_per_kernel={dispatch_us}",
            f"cost_model.framework_overhead_ms={framework_ms}", f"cost_model.per_sequence_overhead_us={per_sequence_us}"]


def _decode_ms(model: str, tp: int, extra: list[str], batch: int, context: int) -> float | None:
    loaded = load_scenario(SCENARIO, [f"model.name={model}", f"parallelism.tp={tp}", *extra])
    try:
        return sum(explain(loaded, batch=batch, context=context, prefill=PREFILL_POINTS[0]).decode.values()) * 1e3
    except ConfigError:  # more sequences than the KV cache holds
        return None


def fit() -> None:
    """Least-squares fit of the eager constants to every layout's decode rows."""
    for dispatch in FIT_DISPATCH_US:
        rows = []
        for (model, tp), (_, dec) in PROFILE.items():
            for batch, context in FIT_POINTS:
                gpu = _decode_ms(model, tp, _eager(dispatch), batch, context)
                if gpu is not None:
                    rows.append((dec[0] + dec[1] * batch * context + dec[2] * batch, batch, gpu))
        measured, batch, gpu = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
        # Minimise the relative error of gpu + framework + per-sequence x batch.
        design = np.stack([1 / measured, batch / measured], axis=1)
        (framework, per_seq), *_ = np.linalg.lstsq(design, 1 - gpu / measured, rcond=None)
        err = (gpu + framework + per_seq * batch) / measured - 1
        print(f"{dispatch:4.0f} µs per kernel: {framework:5.2f} ms + {per_seq * 1e3:4.0f} µs per sequence, "
              f"mean |error| {np.abs(err).mean():.1%}, worst {np.abs(err).max():.1%}")


def _step_ms(parts: dict[str, float]) -> tuple[float, float]:
    """(the whole step, the step without the engine's CPU work), ms."""
    total = sum(parts.values()) * 1e3
    return total, total - parts[CPU_WORK] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="fit the overlapped-dispatch constants instead")
    if parser.parse_args().fit:
        fit()
        return
    eager = _eager(EAGER[0], EAGER[1], EAGER[2])
    print(f"{'model':8} {'TP':>2}  {'step':26} {'DistServe':>9} {'servesim':>9} {'w/o CPU work':>12} {'overlapped':>10}")
    for (model, tp), (pre, dec) in PROFILE.items():
        loaded = load_scenario(SCENARIO, [f"model.name={model}", f"parallelism.tp={tp}"])
        overlapped = load_scenario(SCENARIO, [f"model.name={model}", f"parallelism.tp={tp}", *eager])
        for batch, context in DECODE_POINTS:
            try:
                e = explain(loaded, batch=batch, context=context, prefill=PREFILL_POINTS[0])
            except ConfigError:  # OPT-66B at TP2 holds only 6 such sequences
                continue
            total, gpu = _step_ms(e.decode)
            o = sum(explain(overlapped, batch=batch, context=context, prefill=PREFILL_POINTS[0]).decode.values()) * 1e3
            measured = dec[0] + dec[1] * batch * context + dec[2] * batch
            print(f"{model:8} {tp:>2}  decode {batch:>2} x {context} tokens     {measured:9.1f} {total:9.1f} {gpu:12.1f} "
                  f"{o:10.1f}")
        for prefill in PREFILL_POINTS:
            total, gpu = _step_ms(explain(loaded, batch=1, context=DECODE_POINTS[0][1], prefill=prefill).prefill)
            o = sum(explain(overlapped, batch=1, context=DECODE_POINTS[0][1], prefill=prefill).prefill.values()) * 1e3
            measured = pre[0] + pre[1] * prefill + pre[2] * prefill ** 2
            print(f"{model:8} {tp:>2}  prefill {prefill:>4} tokens          {measured:9.1f} {total:9.1f} {gpu:12.1f} "
                  f"{o:10.1f}")


if __name__ == "__main__":
    main()

"""Set a `moe_triton_mxfp4.py` measurement beside the fused-MoE time servesim predicts for
the same layer (gpt-oss-120b's experts, MXFP4 weights, bf16 activations).

    python benchmarks/moe_against_tables.py benchmarks/logs/2026-11-26-h200-moe-triton-vllm0.13.csv

The prediction is one layer of the `fused_moe` op of a lone prefill of that many tokens
under `cost_model.backend: auto` (the GPU's shipped kernel tables), with the sustained
tensor rate off: the measurement times short bursts, as the tables do. It reads the tables'
power-law 1.01 rows, the flattest routing they ship, nearest to the measurement's random
router logits (skew 0; skew 1 is a power law of exponent 1), not gpt-oss's own 1.2. The measured time
is the CUDA-graph one (no Python launch cost), the eager one where graphs were off.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from simulator import api
from simulator.explain import explain

# GPU names torch reports -> servesim's catalog.
GPU_NAMES = {"NVIDIA H200": "h200", "NVIDIA H100 80GB HBM3": "h100-sxm"}
SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "benchmark-concurrency.yaml"
GPT_OSS_LAYERS = 36


def predicted_layer_us(gpu: str, tp: int, tokens: int) -> float:
    """servesim's fused-MoE time for one gpt-oss-120b layer on `tokens` rows."""
    overrides = ["model.name=openai/gpt-oss-120b", f"hardware.gpu={gpu}", f"parallelism.tp={tp}",
                 "model.weight_dtype=bf16", "model.activation_dtype=bf16", "model.kv_dtype=bf16",
                 "model.expert_weight_dtype=fp4", "model.moe_routing=power_law_1.01",
                 "cost_model.sustained_tensor_rate=false"]
    e = explain(api.load(SCENARIO, overrides), batch=1, context=1024, prefill=tokens)
    return e.prefill["fused_moe"] / GPT_OSS_LAYERS * 1e6


def measured_layer_us(row: dict) -> float:
    graphed = float(row["graph_layer_us"])
    return float(row["layer_us"]) if math.isnan(graphed) else graphed


def compare(path: Path) -> list[dict]:
    """One dict per measured row: its key, measured and predicted µs, and their ratio."""
    out = []
    with path.open() as handle:
        for row in csv.DictReader(handle):
            gpu, tp, tokens = GPU_NAMES[row["gpu"]], int(row["tp"]), int(row["tokens"])
            measured, predicted = measured_layer_us(row), predicted_layer_us(gpu, tp, tokens)
            out.append({"label": row["label"], "gpu": gpu, "tp": tp, "skew": float(row["skew"]), "tokens": tokens,
                        "measured_us": measured, "predicted_us": predicted, "ratio": measured / predicted})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, nargs="+")
    args = parser.parse_args()
    print(f"{'kernels':<12} {'gpu':<9} {'tp':>2} {'skew':>4} {'tokens':>6} {'measured':>9} {'tables':>9} {'ratio':>6}")
    for path in args.csv:
        for r in compare(path):
            print(f"{r['label']:<12} {r['gpu']:<9} {r['tp']:>2} {r['skew']:>4g} {r['tokens']:>6} "
                  f"{r['measured_us']:>9.0f} {r['predicted_us']:>9.0f} {r['ratio']:>6.2f}")


if __name__ == "__main__":
    main()

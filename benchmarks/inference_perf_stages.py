"""Replay the stages of inference-perf runs from their summary figures (docs/fidelity.md,
"BLIS's vLLM runs on H100").

    python benchmarks/inference_perf_stages.py stages.csv [--prompt-pool 100] [--set a.b=c ...]

inference-perf's per-stage `stage_N_lifecycle_metrics.json` gives each stage's request rate,
prompt and output lengths and mean latencies, not the requests themselves. Each row of
`stages.csv` (one per stage, transcribed from those files) is simulated as a Poisson stream
at the stage's rate with its mean prompt length and configured output length (the runs set
ignore_eos), under `scenarios/benchmark-concurrency.yaml` with the row's model, GPU and TP
and the server's flags given by the columns below. inference-perf's `shared_prefix` data
draws every prompt from `num_groups x num_prompts_per_group` fixed prompts, so each prompt
recurs and vLLM's prefix cache serves it: `--prompt-pool` is that count, and 0 shares only
the system prompt (`sys_prompt_len` tokens, `num_groups` of them).

Columns: experiment, stage, model (a catalog name or Hugging Face id), gpu, tp, rate,
prompt_len_mean, output_len_cfg, sys_prompt_len, num_groups, max_num_seqs,
max_num_batched_tokens, max_model_len, count, ttft_mean_ms, e2e_mean_ms. Prints each
stage's measured and predicted mean TTFT and E2E and the MAPE over the stages.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from simulator import api

BASE = Path(__file__).resolve().parent.parent / "scenarios" / "benchmark-concurrency.yaml"
MAX_REQUESTS = 3000  # per stage: enough for stable means, a few seconds each


def stage_overrides(row, prompt_pool: int) -> list[str]:
    """The base scenario's overrides for one stage (dotted paths keep the base's other
    settings: async scheduling, the API server's costs, the kernel tables)."""
    prompt = round(row.prompt_len_mean)
    shared = (f"{{tokens: {prompt}, groups: {prompt_pool}}}" if prompt_pool
              else f"{{tokens: {int(row.sys_prompt_len)}, groups: {int(row.num_groups)}}}")
    workload = (f"{{arrival: {{type: poisson, rate: {float(row.rate)}}}, "
                f"prompt_tokens: {{type: fixed, value: {prompt}}}, "
                f"output_tokens: {{type: fixed, value: {int(row.output_len_cfg)}}}, "
                f"shared_prefix: {shared}, num_requests: {int(min(row.count, MAX_REQUESTS))}, seed: 0}}")
    return [f"model.name={row.model}", "model.weight_dtype=bf16", "model.activation_dtype=bf16",
            "model.kv_dtype=bf16", f"model.max_model_len={int(row.max_model_len)}", f"hardware.gpu={row.gpu}",
            f"parallelism.tp={int(row.tp)}", f"scheduler.max_num_seqs={int(row.max_num_seqs)}",
            f"scheduler.max_num_batched_tokens={int(row.max_num_batched_tokens)}", f"workload={workload}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", type=Path)
    ap.add_argument("--prompt-pool", type=int, default=100,
                    help="fixed prompts the client cycles through (num_groups x num_prompts_per_group); "
                         "0: only the system prompt is shared")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="extra override, dotted.path=value")
    args = ap.parse_args()
    rows = []
    for row in pd.read_csv(args.stages).itertuples():
        summary = api.run(BASE, [*stage_overrides(row, args.prompt_pool), *args.sets],
                          record_iterations=False).summary
        rows.append({"experiment": row.experiment, "stage": row.stage, "rate": row.rate,
                         "ttft_ms": row.ttft_mean_ms, "pred_ttft_ms": summary["ttft_ms"]["mean"],
                         "e2e_ms": row.e2e_mean_ms, "pred_e2e_ms": summary["e2e_ms"]["mean"]})
    out = pd.DataFrame(rows)
    for metric in ("ttft_ms", "e2e_ms"):
        out[f"{metric}_err_pct"] = (out[f"pred_{metric}"] / out[metric] - 1) * 100
    pd.set_option("display.width", 200)
    print(out.round(1).to_string(index=False))
    for metric in ("ttft_ms", "e2e_ms"):
        err = out[f"{metric}_err_pct"]
        print(f"{metric}: MAPE {err.abs().mean():.1f}%, mean signed {err.mean():+.1f}% over {len(out)} stages")


if __name__ == "__main__":
    main()

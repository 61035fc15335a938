"""servesim's predictions against aiconfigurator's static estimate, row by row.

    python benchmarks/aic_static_crosscheck.py VALIDATION.csv [-o merged.csv]

VALIDATION.csv is the `validation.csv` that `simulate validate` wrote for a sweep (e.g.
the structure rows of benchmarks/structure_rows.py). For each row this runs
aiconfigurator-core's `EngineHandle.run_static` (vLLM backend: `concurrency` requests
prefilled together, then decoded together; no queueing, no mixed steps, no framework
overhead) and prints servesim's TPOT over the static one, per model, GPU and precision.
Two predictions, no measurement: a large ratio points at a difference in what the two
model, to be explained (docs/fidelity.md), not at which one is right.
Needs `pip install -e '.[aiconfigurator]'`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
from pathlib import Path

import pandas as pd

QUANT = {"fp8": ("fp8", "fp8"), "fp4": ("nvfp4", "nvfp4"), "int4": ("int4_wo", "int4_wo")}
# aiconfigurator's bundled configs name these models differently.
ALIASES = {"meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
           "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama/Meta-Llama-3.1-8B"}


def _engine(handle_cls, model: str, system: str, tp: int, precision: str):
    gemm, moe = QUANT.get(precision, (None, None))
    if "gpt-oss" in model:  # its native MXFP4 experts, inferred from the checkpoint
        gemm, moe = None, None
    kwargs = {"tp_size": tp, "moe_tp_size": tp}
    if gemm:
        kwargs.update(gemm_quant_mode=gemm, moe_quant_mode=moe)
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        return handle_cls.compile(ALIASES.get(model, model), system, "vllm", **kwargs)


def static_estimates(rows: pd.DataFrame) -> pd.DataFrame:
    from aiconfigurator_core.sdk import EngineHandle

    logging.disable(logging.CRITICAL)
    engines: dict = {}
    out = []
    for r in rows.itertuples():
        precision = r.precision if isinstance(r.precision, str) else ""
        key = (r.model, r.system, int(r.tp_size), precision)
        if key not in engines:
            try:
                engines[key] = _engine(EngineHandle, *key)
            except Exception as exc:  # a model or table it lacks
                print(f"no engine for {key}: {str(exc).splitlines()[0][:120]}")
                engines[key] = None
        handle = engines[key]
        if handle is None:
            continue
        try:
            _, gen_ms, _ = handle.run_static(batch_size=int(r.concurrency), isl=int(r.isl), osl=int(r.osl))
        except Exception:  # a kernel table it lacks for this row
            continue
        out.append({"row": r.Index, "aic_static_tpot_ms": gen_ms / max(1, int(r.osl) - 1)})
    return pd.DataFrame(out).set_index("row")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("validation_csv", type=Path)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    rows = pd.read_csv(args.validation_csv)
    merged = rows.join(static_estimates(rows), how="inner")
    merged = merged[merged["pred_tpot_ms"].notna()].copy()
    merged["tpot_ratio"] = merged["pred_tpot_ms"] / merged["aic_static_tpot_ms"]
    merged["precision"] = merged["precision"].fillna("")
    summary = merged.groupby(["model", "system", "precision"])["tpot_ratio"].agg(["size", "median", "min", "max"])
    print(f"{len(merged)} of {len(rows)} rows in both\n" + summary.round(2).to_string())
    if args.output:
        merged.to_csv(args.output, index=False)


if __name__ == "__main__":
    main()

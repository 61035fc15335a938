#!/usr/bin/env bash
# How the measured profile in calibration/profiles/*-measured.json was made: one GPU,
# one command. Usage: bash benchmarks/gpu_calibration_run.sh OUT_DIR [NAME] [BUDGET_S]
# 1. a --quick smoke run (fails fast if this torch/GPU cannot run the benchmarks);
# 2. the full grid for the models servesim's validation sets use, at TP 1, 2, 4, 8
#    (per-GPU shapes, measured on this one GPU), and since calibrate gained --sustained-s
#    its sustained-rate runs (~35 s; the shipped h200_sxm-measured predates them), and since
#    calibration/power.py its layer-power runs (prefill attention's fraction and the
#    collective wait's power: two 6 s layer runs; smoked first, as --quick skips them);
# 3. benchmarks/sustained_gemm.py: the same GEMM alone and back to back (docs/fidelity.md
#    item 16's power-limit question), with the time series of the slow-down; then prefill
#    attention alone and a whole Llama-3.1-70B prefill layer, each kernel timed at the start
#    and after seconds of back-to-back load (does attention slow down with the GEMMs?).
#    SERIES=all adds the bf16 and mid-size FP8 GEMM series of the first (2026-11-26) runs.
#    DUTY=1 adds the duty-cycle question (docs/fidelity.md, Known gaps: 8k TTFT grows too fast
#    with TP): a TP8 prefill layer of 8,192 tokens, cold each time, without and with an idle
#    kernel standing in for each all-reduce (~560 µs on an H200 at that size).
# ONLY_PROFILE=1 stops after step 2.
set -uo pipefail
out=${1:?OUT_DIR}; name=${2:-gpu}; budget=${3:-300}
mkdir -p "$out"
sim() { python3 -m simulator.cli "$@"; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,clocks.max.mem,memory.total --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
sim calibrate --model llama-3.1-8b --quick --out /tmp/smoke.json || { echo "smoke run failed"; exit 1; }
# --quick skips the layer-power runs: smoke them alone (1 s each).
python3 -c "
import torch
from calibration.bench import clock_and_power
from calibration.power import measure_layer_power
f = measure_layer_power(torch, torch.device('cuda'), 'bf16', seconds=1, rest_s=0.5, tokens=2048, clocks=clock_and_power)
print(f.note, f.missing)" || { echo "layer-power smoke failed"; exit 1; }
method() { python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['metadata']; print(m['method'], m['notes'])" "$1"; }
method /tmp/smoke.json
sim calibrate --model llama-3.1-70b,llama-3.1-8b,gpt-oss-120b --tp 1,2,4,8 --budget-s "$budget" \
    --out "$out/$name.json" || echo "full run failed: rc $?"
method "$out/$name.json"
python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['metadata']; print({k: m.get(k) for k in ('sustained_fraction', 'sustained_attention_fraction', 'collective_wait_power_fraction')})" "$out/$name.json"
[ -n "${ONLY_PROFILE:-}" ] && exit 0
# Alone vs back to back for 8 s, after 3 s idle, with the per-call time every 50 ms.
python3 benchmarks/sustained_gemm.py --dtype fp8 --seconds 8 --rest 3 --window 0.05 --series || true
if [ "${SERIES:-}" = all ]; then
    python3 benchmarks/sustained_gemm.py --dtype bf16 --seconds 8 --rest 3 --window 0.05 --series || true
    python3 benchmarks/sustained_gemm.py --dtype fp8 --shape 2048,10240,8192 --seconds 8 --rest 3 --window 0.05 --series || true
fi
python3 benchmarks/sustained_gemm.py --op attention --tokens 8192 --seconds 8 --rest 3 --window 0.25 || true
python3 benchmarks/sustained_gemm.py --op layer --dtype fp8 --tokens 8192 --seconds 8 --rest 3 --window 0.25 || true
python3 benchmarks/sustained_gemm.py --op layer --dtype fp8 --tokens 2048 --tp 4 --seconds 8 --rest 3 --window 0.25 || true
if [ "${DUTY:-}" = 1 ]; then
    python3 benchmarks/sustained_gemm.py --op layer --dtype fp8 --tokens 8192 --tp 8 --seconds 8 --rest 10 --window 0.25 || true
    python3 benchmarks/sustained_gemm.py --op layer --dtype fp8 --tokens 8192 --tp 8 --seconds 8 --rest 10 --window 0.25 --idle-us 560 || true
fi

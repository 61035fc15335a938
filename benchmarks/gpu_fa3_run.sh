#!/usr/bin/env bash
# The device run behind docs/fidelity.md's FlashAttention-3 check: benchmarks/fa3_attention.py
# with the FA3 extension of the vLLM 0.18.0 wheel (vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so,
# xz-compressed into KERNELS/fa3/fa3_018.so.xz, with the CUDA 12 runtime it links,
# libcudart.so.12 from nvidia-cuda-runtime-cu12, in KERNELS/fa3/lib; not shipped), then
# benchmarks/gptoss_layer_sustained.py (needs KERNELS/v013 as gpu_moe_triton_run.sh does).
# On 2026-11-26 these steps ran on an H200 in three calls (the sinks' dtype fixed between the
# first two) and the sustained step again on an H100. Writes to OUT.
set -u
KERNELS=${KERNELS:-.tk}
OUT=${OUT:-/tmp/fa3-run}
mkdir -p "$OUT" /tmp/fa3/v018
export PYTHONUNBUFFERED=1
xz -dc "$KERNELS/fa3/fa3_018.so.xz" > /tmp/fa3/v018/_vllm_fa3_C.abi3.so
TORCH_LIB=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$PWD/$KERNELS/fa3/lib:$TORCH_LIB:${LD_LIBRARY_PATH:-}"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  date -u +%Y-%m-%dT%H:%M:%SZ; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout 60 python3 benchmarks/fa3_attention.py --fa3 /tmp/fa3/v018/_vllm_fa3_C.abi3.so --label smoke \
  -o /tmp/fa3-smoke.csv --heads 8:1 --tokens 1024 --variants plain,sinks --repeats 1 2>&1 | tee "$OUT/smoke.log" | tail -25
[ "$(grep -c "TFLOP/s" "$OUT/smoke.log")" -ge 2 ] || { echo "smoke run failed"; exit 1; }
timeout 200 python3 benchmarks/fa3_attention.py --fa3 /tmp/fa3/v018/_vllm_fa3_C.abi3.so --label vllm-0.18.0 \
  -o "$OUT/fa3_v018.csv" --budget-s 170 2>&1 | tee "$OUT/v018.log" | tail -70
# The 0.13.0 extension does not load beside torch 2.11 (undefined c10 symbol), so only
# 0.18.0's is timed. Then two gpt-oss layers of these kernels under sustained load:
for tp in 1 2; do
  timeout 100 python3 benchmarks/gptoss_layer_sustained.py --kernels "$KERNELS/v013" \
    --fa3 /tmp/fa3/v018/_vllm_fa3_C.abi3.so --tokens 8192 --tp $tp --seconds 6 2>&1 | tee "$OUT/sustained_tp$tp.log" | tail -22
done

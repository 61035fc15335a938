#!/usr/bin/env bash
# The device run behind docs/fidelity.md's "OpenAI's Triton MoE kernel on an H200" check:
# benchmarks/moe_triton_mxfp4.py with the triton_kernels that vLLM 0.18.0 and 0.13.0 vendor
# (copied out of their wheels into KERNELS/v018 and KERNELS/v013; not shipped). Writes to OUT.
# On 2026-11-26 the H200 ran these steps in two calls (the v0.13 grid in the second); the
# H100 ran the v0.13 grid at --tp 2,8,4 and the v0.18 one at --tp 2,8 --tokens 64,1024,8192.
# Get the kernels with: pip download --no-deps vllm==0.18.0 (and 0.13.0), then
#   unzip -q vllm-0.18.0-*.whl 'vllm/third_party/triton_kernels/*' and move that folder to KERNELS/v018.
set -u
KERNELS=${KERNELS:-.tk}
OUT=${OUT:-/tmp/moe-run}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  date -u +%Y-%m-%dT%H:%M:%SZ; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# a smoke point first: a broken setup stops here, before the long grid
timeout 90 python3 benchmarks/moe_triton_mxfp4.py --kernels "$KERNELS/v018" --label smoke -o /tmp/smoke.csv --tp 8 --tokens 16,2048 --repeats 1 2>&1 \
  | tee "$OUT/smoke.log" | tail -30
grep -q "tokens:" "$OUT/smoke.log" || { echo "smoke run failed"; exit 1; }
timeout 200 python3 benchmarks/moe_triton_mxfp4.py --kernels "$KERNELS/v018" --label vllm-0.18.0 \
  -o "$OUT/moe_v018.csv" --tp 1,8,4,2 --tokens 1,16,64,256,1024,2048,4096,8192,16384 --budget-s 170 2>&1 | tee "$OUT/v018.log" | grep -v "^\s*$" | tail -50
timeout 220 python3 benchmarks/moe_triton_mxfp4.py --kernels "$KERNELS/v013" --label vllm-0.13.0 \
  -o "$OUT/moe_v013.csv" --tp 1,2,4,8 --tokens 1,16,64,256,1024,2048,4096,8192,16384 --budget-s 190 2>&1 \
  | tee "$OUT/v013.log" | tail -40
timeout 50 python3 benchmarks/moe_triton_mxfp4.py --kernels "$KERNELS/v018" --label vllm-0.18.0 \
  -o "$OUT/moe_v018_skew.csv" --tp 1,8 --tokens 1024,8192 --skew 1.0 --budget-s 30 2>&1 | tee "$OUT/skew.log" | tail -5

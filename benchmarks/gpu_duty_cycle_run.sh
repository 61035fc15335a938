#!/usr/bin/env bash
# The device run behind docs/fidelity.md's duty-cycle check (Known gaps: "Silicon TTFT of
# 8k-token prompts grows too fast with TP"). Does a TP prefill's wait on NVLink, during which
# the tensor cores idle, let the GEMMs and attention keep a higher clock than the sustained
# fractions (measured with the tensor cores always busy) allow?
# One Llama-3.1-70B FP8 prefill layer per GPU on 8,192 tokens at TP1, 2, 4, 8, each TP>1
# without and with an idle kernel at each of the layer's two all-reduces, as long as the H200
# collective table's all-reduce of that layer's 134 MB output (`simulate explain
# scenarios/benchmark-concurrency.yaml --set parallelism.tp=N --prefill 8192`: 74.0, 97.4,
# 90.0 ms over 160 all-reduces = 462, 609, 562 µs). The TP8 pair runs again in reverse order.
# Usage: [SWEEP=1 | COPY=1 | COPY=2] bash benchmarks/gpu_duty_cycle_run.sh OUT_DIR (needs pydantic
# and simpy importable: carry their wheels). Plain: the first call below; each variable runs
# one later call's runs alone. On 2026-11-27 the four calls ran in that order on an H200
# (benchmarks/logs/2026-11-27-h200-duty-cycle-run1..4.log), 3.4, 1.9, 1.9 and 2.6 minutes;
# python benchmarks/duty_cycle_fit.py fits docs/fidelity.md item 30's power balance to them.
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  date -u +%Y-%m-%dT%H:%M:%SZ; } 2>&1 | tee "$out/env.txt"
layer() {
    echo "=== --tp $*"
    timeout 90 python3 benchmarks/sustained_gemm.py --op layer --dtype fp8 --tokens 8192 \
        --seconds "${SECONDS_ON:-8}" --rest "${REST:-8}" --window 0.25 --tp "$@" 2>&1
}
[ -n "${SWEEP:-}${COPY:-}" ] || { layer 1
  layer 2; layer 2 --idle-us 462
  layer 4; layer 4 --idle-us 609
  layer 8; layer 8 --idle-us 562
  layer 8 --idle-us 562; layer 8
} | tee "$out/duty.log"
# Second call (the idle kernel's probe now warmed; the first call's TP2 idle ran 38 µs, not
# 462): where between no idle and a quarter idle do the clocks stop throttling?
if [ "${SWEEP:-}" = 1 ]; then
    { layer 2 --idle-us 462
      for us in 100 200 300; do layer 8 --idle-us $us; done
      layer 4 --idle-us 200
    } | tee "$out/duty_sweep.log"
fi
# Third call: the wait is not idle in a real all-reduce. Each ring step writes what arrives,
# reads it and the local chunk and writes the sum: ~3 x 2(p-1)/p x the 134 MB message of HBM
# traffic per all-reduce (402, 604, 704 MB at TP2, 4, 8), here a copy at the wait's start.
if [ "${COPY:-}" = 1 ]; then
    { layer 8
      layer 2 --idle-us 462 --idle-copy-mb 402
      layer 4 --idle-us 609 --idle-copy-mb 604
      layer 8 --idle-us 562 --idle-copy-mb 704
      layer 8 --idle-us 281 --idle-copy-mb 352
    } | tee "$out/duty_copy.log"
fi
# Fourth call: the copy stand-in again, each TP beside its own no-wait baseline on the same
# machine (the third call's TP2 and TP4 had none).
if [ "${COPY:-}" = 2 ]; then
    { layer 2; layer 2 --idle-us 462 --idle-copy-mb 402
      layer 4; layer 4 --idle-us 609 --idle-copy-mb 604
      layer 8 --idle-us 281 --idle-copy-mb 352; layer 8; layer 8 --idle-us 562 --idle-copy-mb 704
    } | tee "$out/duty_copy2.log"
fi

"""Do gpt-oss-120b's prefill kernels slow down under seconds of load as servesim assumes?

    python benchmarks/gptoss_layer_sustained.py --kernels DIR --fa3 PATH [--tokens 8192] [--tp 1]

Two consecutive gpt-oss-120b layers on one of `--tp` GPUs (a full-attention one, then a
128-token sliding-window one), with the kernels vLLM runs on Hopper where they can be had
outside vLLM: OpenAI's Triton MoE (`triton_kernels` from a vLLM wheel, `--kernels`, as in
moe_triton_mxfp4.py) and vLLM's FlashAttention-3 with sinks (`--fa3`, as in
fa3_attention.py); the dense projections and norms are torch's. calibration/sustained.py's
measure_sequence times each kernel right after an idle rest (boost clocks) and after
`--seconds` of the two layers back to back (the power limit reached), the way
benchmarks/sustained_gemm.py --op layer measured Llama-3.1-70B's layer (docs/fidelity.md
item 16). servesim slows long prefills' compute by the GPU's sustained fractions (H200:
BF16 GEMMs and experts 0.85, prefill attention 0.71); this says what gpt-oss's own kernels
keep. Eager launches: meaningful where the GPU, not Python, is the bottleneck (TP1-2 at
thousands of tokens).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, TOPK, INTER, WINDOW = 2880, 64, 8, 64, 128, 4, 2880, 128


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clocks() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return out or "nvidia-smi: no output"
    except (OSError, subprocess.SubprocessError):
        return "nvidia-smi unavailable"


def layer_parts(torch, moe_mod, fa3_mod, kernels_dir: Path, fa3_path: Path, tokens: int, tp: int) -> list:
    sys.path.insert(0, str(kernels_dir.resolve()))
    dev = torch.device("cuda")
    heads, kv_heads = HEADS // tp, max(1, KV_HEADS // tp)
    inter = moe_mod.triton_width(INTER, tp)
    kernels = moe_mod.Kernels(True)
    fa3 = fa3_mod.Fa3(fa3_path)
    gen = torch.Generator(device=dev).manual_seed(0)

    def rand(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device=dev, dtype=torch.float32, generator=gen).to(dtype) * 0.02

    x = rand(tokens, HIDDEN)
    norm_w = torch.ones(HIDDEN, device=dev, dtype=torch.bfloat16)
    block = 16
    blocks = -(-tokens // block)
    block_table = torch.randperm(blocks, device=dev, generator=gen).to(torch.int32).view(1, blocks)
    cu_q = torch.tensor([0, tokens], dtype=torch.int32, device=dev)
    seqused = torch.tensor([tokens], dtype=torch.int32, device=dev)
    sinks = rand(heads)
    parts = []
    for name, window in (("full", 0), ("window", WINDOW)):
        w_qkv, b_qkv = rand(HIDDEN, (heads + 2 * kv_heads) * HEAD_DIM), rand((heads + 2 * kv_heads) * HEAD_DIM)
        w_o = rand(heads * HEAD_DIM, HIDDEN)
        w_router = rand(HIDDEN, EXPERTS)
        k_cache = rand(blocks, block, kv_heads, HEAD_DIM)
        v_cache = rand(blocks, block, kv_heads, HEAD_DIM)
        q = rand(tokens, heads, HEAD_DIM)
        attn_out = torch.empty_like(q)
        span = (window - 1, 0) if window else (-1, -1)
        moe = moe_mod.MoeLayer(kernels, dev, HIDDEN, inter, EXPERTS, TOPK)
        moe_x, moe_logits = moe.inputs(tokens, 0.0)
        moe_inter, moe_out = moe.buffers(tokens)

        def attention(q=q, k=k_cache, v=v_cache, out=attn_out, span=span):
            fa3(q, k, v, out, cu_q, seqused, tokens, tokens, block_table, HEAD_DIM ** -0.5, span, sinks)

        parts += [
            (f"{name}:input_norm", lambda: torch.nn.functional.rms_norm(x, (HIDDEN,), norm_w)),
            (f"{name}:qkv_proj", lambda w=w_qkv, b=b_qkv: torch.addmm(b, x, w)),
            (f"{name}:attention", attention),
            (f"{name}:o_proj", lambda w=w_o, a=attn_out: a.view(tokens, -1) @ w),
            (f"{name}:post_norm", lambda: torch.nn.functional.rms_norm(x, (HIDDEN,), norm_w)),
            (f"{name}:router", lambda w=w_router: x @ w),
            (f"{name}:experts", lambda m=moe, a=moe_x, g=moe_logits, i=moe_inter, o=moe_out: m.forward(a, g, i, o)),
        ]
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=Path, required=True, help="folder holding triton_kernels/")
    parser.add_argument("--fa3", type=Path, required=True, help="path to _vllm_fa3_C.abi3.so")
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rest", type=float, default=2.0)
    args = parser.parse_args()

    import torch

    from calibration.sustained import measure_sequence

    moe_mod, fa3_mod = _load("moe_triton_mxfp4"), _load("fa3_attention")
    parts = layer_parts(torch, moe_mod, fa3_mod, args.kernels, args.fa3, args.tokens, args.tp)
    run = measure_sequence(torch, torch.device("cuda"), parts, seconds=args.seconds, rest_s=args.rest, clocks=clocks)
    print(f"{torch.cuda.get_device_name()}: gpt-oss-120b, TP{args.tp}, {args.tokens} tokens, "
          f"{args.seconds:g} s back to back")
    print(f"clocks (SM, power) before: {run.clocks_before}; after: {run.clocks_after}")
    print(f"{'kernel':<20} {'burst us':>10} {'steady us':>10} {'fraction':>8}")
    for label, b, s, f in zip(run.labels, run.burst_us, run.steady_us, run.fractions, strict=True):
        print(f"{label:<20} {b:>10.1f} {s:>10.1f} {f:>8.3f}")
    burst, steady = sum(run.burst_us), sum(run.steady_us)
    print(f"{'two layers':<20} {burst:>10.1f} {steady:>10.1f} {burst / steady:>8.3f}")
    if run.windows:
        first, last = run.windows[0], run.windows[-1]
        print(f"pass time: {first[1]:.1f} us at {first[0]:.2f} s, {last[1]:.1f} us at {last[0]:.2f} s")


if __name__ == "__main__":
    main()

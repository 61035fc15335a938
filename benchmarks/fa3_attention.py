"""Time vLLM's FlashAttention-3 prefill kernel on this GPU at a model's attention shapes,
with and without attention sinks and sliding windows, over a paged KV cache as vLLM's
FlashAttention backend reads it.

Why: gpt-oss on Hopper reads TTFT about a third low at 8k-token prompts (docs/fidelity.md,
Known gaps) while its experts time as the tables say (item 23). Its attention is the
other kernel servesim times from aiconfigurator's rows, which were collected without
sinks or windows. This script times the kernel vLLM runs for gpt-oss on Hopper (FA3 with
`s_aux` sinks) against those rows. It needs a Hopper GPU, torch, and the compiled FA3
extension from a vLLM wheel (`vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so`), passed with
`--fa3 PATH`; that extension links the CUDA 12 runtime (`libcudart.so.12`, from the
nvidia-cuda-runtime-cu12 wheel), which must be on LD_LIBRARY_PATH.

    python benchmarks/fa3_attention.py --fa3 _vllm_fa3_C.abi3.so -o fa3.csv

Each point: one sequence of `tokens` prompt tokens attending causally to itself (a lone
prefill), the keys and values already in a paged cache of `--block-size` blocks, as vLLM
writes them before attention. Times are CUDA events around back-to-back calls (a CUDA
graph where capture works), median of `--repeats`.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_timing import graph_median_us, time_calls


def parse_ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def parse_heads(text: str) -> list[tuple[int, int]]:
    """'64:8,8:1' -> [(64, 8), (8, 1)]: query heads and KV heads per GPU."""
    return [tuple(int(x) for x in pair.split(":")) for pair in text.split(",") if pair]


class Fa3:
    """The extension's forward op, called the way vLLM's backend calls it for prefill."""

    def __init__(self, path: Path):
        import torch

        torch.ops.load_library(str(path))
        self.op = torch.ops._vllm_fa3_C.fwd
        self.schema = str(self.op.default._schema)
        self.arity = len(self.op.default._schema.arguments)

    def __call__(self, q, k_cache, v_cache, out, cu_q, seqused_k, max_q, max_k, block_table, scale, window, sinks):
        args = [q, k_cache, v_cache, None, None, None, out, cu_q, None, None, None, seqused_k, max_q, max_k,
                block_table, None, None, None, None, None, None, None, None, scale, True, window[0], window[1],
                0.0, True, None, 0, None, 0, sinks]
        args += [1, 0, None][: self.arity - len(args)]  # context-parallel arguments of newer builds
        return self.op(*args)


def graphed_us(fn, calls: int, repeats: int) -> float | None:
    try:
        return graph_median_us(fn, calls, repeats)
    except Exception as exc:  # capture not possible: fall back to eager timing
        import torch

        print(f"graph capture failed ({type(exc).__name__}: {str(exc)[:120]}); eager timing", flush=True)
        torch.cuda.synchronize()
        return None


def measure(fa3: Fa3, heads: int, kv_heads: int, tokens: int, head_dim: int, block_size: int, window: int,
            sinks: bool, repeats: int) -> dict:
    import torch

    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(tokens)
    blocks = math.ceil(tokens / block_size)
    q = torch.randn(tokens, heads, head_dim, dtype=torch.bfloat16, device=dev, generator=gen)
    k_cache = torch.randn(blocks, block_size, kv_heads, head_dim, dtype=torch.bfloat16, device=dev, generator=gen)
    v_cache = torch.randn_like(k_cache)
    out = torch.empty_like(q)
    # blocks in a shuffled order, as a cache that has served other requests hands them out
    block_table = torch.randperm(blocks, device=dev, generator=gen).to(torch.int32).view(1, blocks)
    cu_q = torch.tensor([0, tokens], dtype=torch.int32, device=dev)
    seqused_k = torch.tensor([tokens], dtype=torch.int32, device=dev)
    s_aux = torch.randn(heads, dtype=torch.float32, device=dev, generator=gen).to(torch.bfloat16) if sinks else None
    span = (window - 1, 0) if window > 0 else (-1, -1)
    scale = head_dim ** -0.5

    def call():
        fa3(q, k_cache, v_cache, out, cu_q, seqused_k, tokens, tokens, block_table, scale, span, s_aux)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    calls = 50 if tokens <= 2048 else 10
    us = graphed_us(call, calls, repeats)
    method = "graph"
    if us is None:
        times = sorted(time_calls(call, calls) for _ in range(repeats))
        us, method = times[len(times) // 2], "eager"
    attended = tokens * (tokens + 1) / 2 if window <= 0 else sum(min(i + 1, window) for i in range(tokens))
    flops = 4 * heads * head_dim * attended
    return {"us": round(us, 2), "tflops": round(flops / us / 1e6, 1), "method": method}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fa3", type=Path, required=True, help="path to _vllm_fa3_C.abi3.so")
    parser.add_argument("--label", default="", help="which release's extension (written to each row)")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--heads", type=parse_heads, default=parse_heads("64:8,32:4,16:2,8:1"),
                        help="query:kv heads per GPU (gpt-oss-120b at TP1,2,4,8 by default)")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--tokens", type=parse_ints, default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--block-size", type=parse_ints, default=[16])
    parser.add_argument("--variants", default="plain,sinks,window128-sinks",
                        help="plain | sinks | window<N> | window<N>-sinks, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=300.0)
    args = parser.parse_args()

    import torch

    fa3 = Fa3(args.fa3)
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}: {fa3.schema[:160]}...", flush=True)
    fields = ["label", "gpu", "heads", "kv_heads", "head_dim", "tokens", "block_size", "variant", "window", "sinks",
              "us", "tflops", "method"]
    start = time.perf_counter()
    with args.output.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for heads, kv_heads in args.heads:
            for block_size in args.block_size:
                for tokens in args.tokens:
                    for variant in args.variants.split(","):
                        if time.perf_counter() - start > args.budget_s:
                            print("budget reached", flush=True)
                            return
                        sinks = variant.endswith("sinks")
                        window = int(variant[6:].split("-")[0]) if variant.startswith("window") else 0
                        row = measure(fa3, heads, kv_heads, tokens, args.head_dim, block_size, window, sinks,
                                      args.repeats)
                        row.update(label=args.label, gpu=gpu, heads=heads, kv_heads=kv_heads, head_dim=args.head_dim,
                                   tokens=tokens, block_size=block_size, variant=variant, window=window,
                                   sinks=int(sinks))
                        writer.writerow(row)
                        handle.flush()
                        print(f"{heads}:{kv_heads} bs{block_size} {tokens:>6} {variant:<16} {row['us']:>9.1f} us "
                              f"{row['tflops']:>6} TFLOP/s ({row['method']})", flush=True)


if __name__ == "__main__":
    main()

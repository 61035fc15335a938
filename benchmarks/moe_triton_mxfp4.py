"""Time OpenAI's Triton MoE kernels (`triton_kernels.matmul_ogs`) at gpt-oss-120b's expert
shapes on this GPU, as vLLM runs them for MXFP4 experts on Hopper.

Why: on H100/H200, InferenceMAX's gpt-oss TTFT reads about a third low at 8k-token prompts
(docs/fidelity.md), and the fused-MoE rows servesim reads there come from aiconfigurator's
vLLM 0.24 collector, a newer kernel build than the 0.11-0.18 releases that ran the
measurements. This script times the kernel of a given release, one MoE layer at a time,
so the tables can be checked against it. It needs a GPU, torch and triton, plus the
`triton_kernels` package that release vendors (`vllm/third_party/triton_kernels` in its
wheel), passed with `--kernels DIR` (the folder that holds `triton_kernels/`):

    python benchmarks/moe_triton_mxfp4.py --kernels /path/to/v018 --label vllm-0.18.0 -o moe.csv

One layer = routing (top-k of the router logits, expert histogram, gather/scatter indices)
+ the gate/up grouped GEMM with the fused SwiGLU (gpt-oss's alpha 1.702, limit 7) + the
down grouped GEMM that scatters back and weights by the gates, on MXFP4 weights in the
Hopper-swizzled layout. Weights and scales are random (timing does not depend on their
values); the intermediate width per GPU is padded to a multiple of 64 as vLLM's Triton
path pads it. Times are per layer: CUDA events around `--calls` back-to-back layers
(weights are hundreds of MB per layer set, far beyond L2), after warm-up calls that
also compile the kernels.
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

SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0  # gpt-oss's clamped SwiGLU


def triton_width(inter: int, tp: int) -> int:
    """The expert width per GPU vLLM's Triton MXFP4 path allocates: padded to 64."""
    return -(-math.ceil(inter / tp) // 64) * 64


def parse_ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


class Kernels:
    """The two triton_kernels API generations vLLM has vendored (0.11-0.13, and 0.14 on)."""

    def __init__(self, on_gpu: bool):
        import triton_kernels.swiglu as swiglu
        from triton_kernels import matmul_ogs as mo
        from triton_kernels.numerics import InFlexData
        from triton_kernels.tensor import FP4, convert_layout, wrap_torch_tensor
        from triton_kernels.tensor_details import layout

        self.mo, self.swiglu, self.InFlexData = mo, swiglu, InFlexData
        self.FP4, self.convert_layout, self.wrap = FP4, convert_layout, wrap_torch_tensor
        self.layout, self.on_gpu = layout, on_gpu
        try:
            from triton_kernels.tensor import SparseMatrix, make_ragged_tensor_metadata
            from triton_kernels.topk import topk

            self.api = "sparse-matrix"
            self.SparseMatrix, self.ragged, self.topk = SparseMatrix, make_ragged_tensor_metadata, topk
        except ImportError:
            from triton_kernels.routing import routing

            self.api = "routing"
            self.routing_fn = routing
        if on_gpu:
            import torch

            if torch.cuda.get_device_capability() == (9, 0):
                # vLLM pins split-K to 1 on Hopper for these kernels
                from triton_kernels.matmul_ogs_details import opt_flags

                opt_flags.update_opt_flags_constraints({"split_k": 1})

    def activation(self):
        mo, fn = self.mo, self.swiglu.swiglu_fn
        if self.api == "sparse-matrix":
            spec = mo.FnSpecs("swiglu", fn, ("alpha", "limit"), reduction_n=2)
            return mo.FusedActivation(spec, (SWIGLU_ALPHA, SWIGLU_LIMIT))
        return mo.FusedActivation(mo.FnSpecs("swiglu", fn, ("alpha", "limit")), (SWIGLU_ALPHA, SWIGLU_LIMIT), 2)

    def weight(self, packed, scale, num_warps: int = 8):
        """Packed (E, N, K/2) uint8 + (E, N, K/32) scales -> the kernel's (E, K, N) operand."""
        packed, scale = packed.transpose(-2, -1), scale.transpose(-2, -1)
        if self.on_gpu:
            value_layout, value_opts = self.layout.make_default_matmul_mxfp4_w_layout(mx_axis=1)
            scale_layout, scale_opts = self.layout.make_default_matmul_mxfp4_w_scale_layout(
                mx_axis=1, num_warps=num_warps)
        else:
            value_layout = scale_layout = self.layout.StridedLayout
            value_opts = scale_opts = {}
        w = self.convert_layout(self.wrap(packed, dtype=self.FP4), value_layout, **value_opts)
        s = self.convert_layout(self.wrap(scale), scale_layout, **scale_opts)
        pc = self.mo.PrecisionConfig(weight_scale=s, flex_ctx=self.mo.FlexCtx(rhs_data=self.InFlexData()))
        return w, pc

    def route(self, logits, topk: int):
        """Top-k with softmax over the chosen logits (gpt-oss renormalises), then the indices."""
        if self.api == "routing":
            return self.routing_fn(logits, topk, sm_first=False)
        mo = self.mo
        if self.on_gpu:
            sparse = self.topk(logits, topk, apply_softmax=True)
            meta = self.SparseMatrix(indx=sparse.indx, vals=sparse.vals, mask=sparse.mask).mask_metadata
            ragged_fn = self.ragged
            dispatch, combine, counts = meta.row_sorted_indx, meta.col_sorted_indx, meta.col_sum
            vals = sparse.vals
        else:  # the interpreter cannot run the routing kernels: the same indices in torch
            import torch
            from triton_kernels.tensor import make_ragged_tensor_metadata_torch as ragged_fn

            top = torch.topk(logits.float(), topk, dim=1)
            order = torch.argsort(top.indices, dim=1)
            indx = torch.gather(top.indices, 1, order).int()
            vals = torch.softmax(torch.gather(top.values, 1, order), dim=1).to(logits.dtype)
            combine = torch.argsort(indx.flatten(), stable=True).int()
            dispatch = torch.argsort(combine, stable=True).int()
            counts = torch.bincount(indx.flatten().long(), minlength=logits.shape[-1]).int()
        ragged = ragged_fn(counts, dispatch.shape[0])
        gates = vals.flatten()[combine]
        data = mo.RoutingData(gates, ragged.block_sizes, logits.shape[-1], topk, ragged)
        return data, mo.GatherIndx(combine, dispatch), mo.ScatterIndx(dispatch, combine)


class MoeLayer:
    """One gpt-oss MoE layer's experts at one TP shard, ready to run on `tokens` rows."""

    def __init__(self, k: Kernels, device, hidden: int, inter: int, experts: int, topk: int):
        import torch

        self.k, self.device, self.hidden, self.inter, self.experts, self.topk = k, device, hidden, inter, experts, topk
        gen = torch.Generator(device=device).manual_seed(0)

        def packed(e, n, kdim):
            return torch.randint(0, 256, (e, n, kdim // 2), dtype=torch.uint8, device=device, generator=gen)

        def scales(e, n, kdim):  # E8M0 exponents near 1.0: finite, never NaN (255)
            return torch.randint(120, 128, (e, n, kdim // 32), dtype=torch.uint8, device=device, generator=gen)

        self.w13, self.pc13 = k.weight(packed(experts, 2 * inter, hidden), scales(experts, 2 * inter, hidden))
        self.w2, self.pc2 = k.weight(packed(experts, hidden, inter), scales(experts, hidden, inter))
        self.b13 = torch.zeros(experts, 2 * inter, dtype=torch.float32, device=device)
        self.b2 = torch.zeros(experts, hidden, dtype=torch.float32, device=device)
        self.act = k.activation()

    def inputs(self, tokens: int, skew: float):
        import torch

        gen = torch.Generator(device=self.device).manual_seed(tokens)
        x = torch.randn(tokens, self.hidden, dtype=torch.bfloat16, device=self.device, generator=gen)
        logits = torch.randn(tokens, self.experts, dtype=torch.float32, device=self.device, generator=gen)
        if skew > 0:  # power-law expert popularity: expert e favoured by -skew * log(e + 1)
            ranks = torch.arange(1, self.experts + 1, device=self.device, dtype=torch.float32)
            logits = logits - skew * torch.log(ranks)
        return x, logits.to(torch.bfloat16)

    def buffers(self, tokens: int):
        import torch

        inter = torch.empty(1, tokens * self.topk, self.inter, dtype=torch.bfloat16, device=self.device)
        out = torch.empty(1, tokens, self.hidden, dtype=torch.bfloat16, device=self.device)
        return inter, out

    def gemm1(self, x, routing, inter):
        data, gather, _ = routing
        self.k.mo.matmul_ogs(x, self.w13, self.b13, data, gather_indx=gather, precision_config=self.pc13,
                             fused_activation=self.act, y=inter)

    def gemm2(self, inter, routing, out, tokens: int):
        data, _, scatter = routing
        self.k.mo.matmul_ogs(inter.view(tokens * self.topk, self.inter), self.w2, self.b2, data,
                             scatter_indx=scatter, precision_config=self.pc2, gammas=data.gate_scal, y=out)

    def forward(self, x, logits, inter, out):
        routing = self.k.route(logits, self.topk)
        self.gemm1(x, routing, inter)
        self.gemm2(inter, routing, out, x.shape[0])
        return out


class GraphTimer:
    """Per-layer time of `calls` layers captured in one CUDA graph (no Python launch cost),
    as vLLM's decode steps replay them; switched off for the run after a capture fails."""

    def __init__(self, enabled: bool):
        self.enabled, self.error = enabled, ""

    def __call__(self, fn, calls: int, repeats: int) -> float | None:
        if not self.enabled:
            return None
        import torch

        try:
            return graph_median_us(fn, calls, repeats)
        except Exception as exc:  # any capture failure ends graph timing
            self.enabled, self.error = False, f"{type(exc).__name__}: {exc}"[:300]
            print(f"CUDA graph timing off: {self.error}", flush=True)
            torch.cuda.synchronize()
            return None


def calls_for(tokens: int) -> int:
    return 50 if tokens <= 256 else 20 if tokens <= 2048 else 8


def measure(layer: MoeLayer, tokens: int, skew: float, warmup: int, repeats: int, on_gpu: bool,
            graph: GraphTimer) -> dict:
    x, logits = layer.inputs(tokens, skew)
    inter, out = layer.buffers(tokens)
    for _ in range(warmup):
        layer.forward(x, logits, inter, out)
    calls = calls_for(tokens) if on_gpu else 1
    layer_us = sorted(time_calls(lambda: layer.forward(x, logits, inter, out), calls, on_gpu) for _ in range(repeats))
    routing = layer.k.route(logits, layer.topk)
    parts = {
        "routing_us": time_calls(lambda: layer.k.route(logits, layer.topk), calls, on_gpu),
        "gemm1_us": time_calls(lambda: layer.gemm1(x, routing, inter), calls, on_gpu),
        "gemm2_us": time_calls(lambda: layer.gemm2(inter, routing, out, tokens), calls, on_gpu),
    }
    graphed = graph(lambda: layer.forward(x, logits, inter, out), calls, repeats) if on_gpu else None
    parts["graph_layer_us"] = graphed if graphed is not None else float("nan")
    flops = 2 * tokens * layer.topk * layer.hidden * 3 * layer.inter
    median = layer_us[len(layer_us) // 2]
    return {"layer_us": round(median, 2), "layer_p10_us": round(layer_us[0], 2),
            "layer_p90_us": round(layer_us[-1], 2), **{k: round(v, 2) for k, v in parts.items()},
            "tflops": round(flops / median / 1e6, 1), "calls": calls, "repeats": repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=Path, required=True, help="folder holding triton_kernels/")
    parser.add_argument("--label", default="", help="which release's kernels (written to each row)")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--tp", type=parse_ints, default=[1, 2, 4, 8])
    parser.add_argument("--tokens", type=parse_ints,
                        default=[1, 4, 16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--skew", type=float, nargs="*", default=[0.0],
                        help="power-law exponents of expert popularity (0 = uniform routing)")
    parser.add_argument("--hidden", type=int, default=2880)
    parser.add_argument("--inter", type=int, default=2880, help="unsharded expert intermediate width")
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--topk", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=400.0, help="stop starting new points after this")
    parser.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph timing")
    parser.add_argument("--cpu", action="store_true", help="dry run on the CPU (TRITON_INTERPRET=1, strided layouts)")
    args = parser.parse_args()
    sys.path.insert(0, str(args.kernels.resolve()))

    import torch

    on_gpu = not args.cpu
    device = torch.device("cuda" if on_gpu else "cpu")
    kernels = Kernels(on_gpu)
    gpu = torch.cuda.get_device_name() if on_gpu else "cpu"
    print(f"{gpu}: triton_kernels API '{kernels.api}' from {args.kernels}", flush=True)
    fields = ["label", "gpu", "api", "tp", "hidden", "inter_per_gpu", "experts", "topk", "skew", "tokens",
              "layer_us", "layer_p10_us", "layer_p90_us", "graph_layer_us", "routing_us", "gemm1_us", "gemm2_us", "tflops",
              "calls", "repeats"]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    graph = GraphTimer(on_gpu and not args.no_graph)
    start = time.perf_counter()
    with args.output.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for tp in args.tp:
            inter = triton_width(args.inter, tp)
            layer = MoeLayer(kernels, device, args.hidden, inter, args.experts, args.topk)
            for skew in args.skew:
                for tokens in args.tokens:
                    if time.perf_counter() - start > args.budget_s:
                        print(f"budget reached: stopped before TP{tp} {tokens} tokens", flush=True)
                        return
                    row = measure(layer, tokens, skew, args.warmup, args.repeats, on_gpu, graph)
                    row.update(label=args.label, gpu=gpu, api=kernels.api, tp=tp, hidden=args.hidden,
                               inter_per_gpu=inter, experts=args.experts, topk=args.topk, skew=skew,
                               tokens=tokens)
                    writer.writerow(row)
                    handle.flush()
                    print(f"TP{tp} skew {skew} {tokens:>6} tokens: {row['layer_us']:>10.1f} us/layer "
                          f"(graph {row['graph_layer_us']}; {row['tflops']} TFLOP/s; routing {row['routing_us']}, gemm1 {row['gemm1_us']}, "
                          f"gemm2 {row['gemm2_us']})", flush=True)
            del layer
            if on_gpu:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

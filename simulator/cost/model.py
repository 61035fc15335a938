"""Iteration time = Σ op times of the shared decomposition + explicit framework overhead.

Op times that depend only on the token count or the emitting-sequence count are
memoised: in steady state almost every iteration hits the cache, and only the
attention terms (which depend on context lengths) are evaluated afresh.
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

import numpy as np

from simulator.cost.config import CostModelConfig
from simulator.cost.dispatch import Segment, dispatch_stall
from simulator.cost.ops import (
    IterationShape,
    Op,
    ShardedModel,
    attn_decode_cost,
    decode_attention_ops,
    emit_ops,
    iteration_ops,
    prefill_attention_ops,
    token_ops,
)
from simulator.cost.sustained import power_relief

# Table-driven decode attention is evaluated exactly at 2**CONTEXT_KNOT_BITS context knots
# per octave of the batch's total context and linearly in between (the tables are piecewise
# linear or log-linear between grid points that lie much further apart, so the error is
# < 0.03%); the knots recur across iterations where exact context sums rarely do.
CONTEXT_KNOT_BITS = 6
# Decode stretches longer than this read their attention knots as arrays (same numbers).
LONG_STRETCH = 64
# Op families during which a GPU waits on its peers rather than computing.
COLLECTIVE_FAMILIES = ("allreduce", "allgather", "p2p")
# power_relief is rounded to this step (0.1%), so the relieved times memoise.
RELIEF_STEP = 1e-3


class OpTimer(Protocol):
    """A source of kernel times: roofline formulas or a calibrated profile."""

    name: str

    def op_time(self, op: Op) -> float: ...


class IterationCostModel:
    """Predicts the duration of one scheduler iteration of one (virtual) engine."""

    def __init__(self, sharded: ShardedModel, timer: OpTimer, config: CostModelConfig,
                 overlap_cpu: bool = False, decode_sharded: ShardedModel | None = None):
        self.sharded = sharded
        # Decode attention's dimensions: the model's own, or those of the kernel an older
        # release ran (cost/releases.py).
        self.decode_sharded = decode_sharded or sharded
        self.timer = timer
        engine = config.overheads()
        self.overhead = engine.framework_overhead_ms * 1e-3
        self.per_seq = engine.per_sequence_overhead_us * 1e-6
        # Eager dispatch (cost/dispatch.py): the CPU time to issue each kernel; 0: none.
        self.dispatch = engine.dispatch_us * 1e-6
        self._segment_cache: dict = {}
        # Async scheduling (vLLM --async-scheduling, with its model runner overlapped since
        # vllm-project/vllm#23569): the CPU work of the next iteration (scheduling, input
        # preparation, output processing) runs while this one's kernels do, so back-to-back
        # iterations last max(GPU, CPU). An iteration that starts an idle engine pays both.
        self.overlap_cpu = overlap_cpu
        self._token_cache: dict = {}
        self._emit_cache: dict[int, float] = {}
        # Exact memo: batches recur with the same (size, total context), e.g. in closed loops.
        self._attn_cache: dict[tuple[int, int], float] = {}
        # Prefill attention by its chunks: a lone new prompt's (length, 0) recurs often.
        self._prefill_cache: dict[tuple, float] = {}
        # Formula timers evaluate decode attention directly, vectorised over stretches;
        # table-driven ones (no vector form) are read at context knots.
        self._attn_vector = getattr(timer, "attn_decode_times", None)
        # Hybrid linear attention's state step, DSA's indexer and a second attention geometry
        # (Gemma 4) ride on the attention memos
        # (decode_attention_ops, prefill_attention_ops), so their decode stretches take the
        # memoised path rather than the attention-only vector form.
        if sharded.linear_passes or sharded.index_passes or sharded.global_head_dim or sharded.compressed:
            self._attn_vector = None
        self._knotted = self._attn_vector is None
        # The share of the power limit a collective's wait draws (GPUSpec), for a timer that
        # applies sustained fractions: the waits then let the rest of the iteration run at a
        # higher clock (power_relief). Only a sharded model has waits to give.
        self.wait_power: float | None = getattr(timer, "collective_wait_power", None)
        self._collective_cache: dict = {}
        self._relieved_cache: dict = {}

    def _sum(self, ops: list[Op], relief: float = 1.0) -> float:
        """Σ op times; `relief` > 1 times them at raised sustained fractions (power_relief)."""
        t = self.timer.op_time if relief == 1.0 else partial(self.timer.op_time, relief=relief)
        v = 0.0
        for op in ops:  # a loop: summing a generator cost more on the memo misses (BENCHMARKS.md)
            v += t(op) * op.count
        return v

    def token_time(self, num_tokens: int, moe_others: int = 0) -> float:
        """moe_others: tokens other attention-DP ranks add to this step's MoE layers."""
        key = (num_tokens, moe_others) if moe_others else num_tokens
        v = self._token_cache.get(key)
        if v is None:
            if len(self._token_cache) > 200_000:  # bound memory on very long DP runs
                self._token_cache.clear()
            ops = token_ops(num_tokens, self.sharded, num_tokens + moe_others)
            v = self._token_cache[key] = self._sum(ops)
        return v

    def emit_time(self, num_emit: int) -> float:
        v = self._emit_cache.get(num_emit)
        if v is None:
            v = self._emit_cache[num_emit] = self._sum(emit_ops(num_emit, self.sharded))
        return v

    def decode_attention_time(self, num_seqs: int, context_sum: int) -> float:
        if self._knotted:
            shift = max(0, context_sum.bit_length() - 1 - CONTEXT_KNOT_BITS)
            lo = context_sum >> shift << shift  # the knot at or below; knots are 2**shift apart
            if lo != context_sum:
                step = 1 << shift
                w = (context_sum - lo) / step
                return ((1.0 - w) * self._decode_attention_exact(num_seqs, lo)
                        + w * self._decode_attention_exact(num_seqs, lo + step))
        return self._decode_attention_exact(num_seqs, context_sum)

    def _decode_attention_run(self, num_seqs: int, context_sum: int, steps: int) -> list[float]:
        """decode_attention_time at context_sum + j * num_seqs for j < steps: the same
        numbers, bit for bit (a fast-forwarded stretch then times each step exactly as
        stepping would), with each knot looked up once for the whole stretch."""
        if steps > LONG_STRETCH:
            return self._decode_attention_run_long(num_seqs, context_sum, steps)
        last = context_sum + (steps - 1) * num_seqs
        shift = max(0, context_sum.bit_length() - 1 - CONTEXT_KNOT_BITS)  # as decode_attention_time
        if shift != max(0, last.bit_length() - 1 - CONTEXT_KNOT_BITS):  # the stretch crosses an octave
            attn = self.decode_attention_time
            return [attn(num_seqs, context_sum + j * num_seqs) for j in range(steps)]
        exact = self._decode_attention_exact
        step = 1 << shift
        out = []
        lo_at = -1
        t_lo = t_hi = 0.0
        for c in range(context_sum, last + 1, num_seqs):
            lo = c >> shift << shift
            if lo != lo_at:
                lo_at, t_lo, t_hi = lo, exact(num_seqs, lo), -1.0
            if lo == c:
                out.append(t_lo)
                continue
            if t_hi < 0.0:
                t_hi = exact(num_seqs, lo + step)
            w = (c - lo) / step
            out.append((1.0 - w) * t_lo + w * t_hi)
        return out

    def _decode_attention_run_long(self, num_seqs: int, context_sum: int, steps: int) -> list[float]:
        """_decode_attention_run for long stretches, vectorised: the same arithmetic on arrays.
        Contexts only grow along a stretch, so each knot interval is one run of steps."""
        c = context_sum + num_seqs * np.arange(steps, dtype=np.int64)
        last = context_sum + (steps - 1) * num_seqs
        shift = max(0, context_sum.bit_length() - 1 - CONTEXT_KNOT_BITS)
        if shift == max(0, last.bit_length() - 1 - CONTEXT_KNOT_BITS):
            spacing = 1 << shift  # one octave: one spacing
        else:  # each context's own (its bit_length, exact below 2**53)
            spacing = np.int64(1) << np.maximum(np.frexp(c.astype(np.float64))[1] - 1 - CONTEXT_KNOT_BITS, 0)
        lo = c - c % spacing
        hi = lo + spacing
        new = np.empty(steps, dtype=bool)
        new[0] = True
        np.not_equal(lo[1:], lo[:-1], out=new[1:])
        run = np.cumsum(new) - 1
        exact = self._decode_attention_exact
        t_lo = np.array([exact(num_seqs, k) for k in lo[new].tolist()])[run]
        t_hi = np.array([exact(num_seqs, k) for k in hi[new].tolist()])[run]
        w = (c - lo) / spacing
        # On a knot w is 0 and this is t_lo exactly, as decode_attention_time returns there.
        return ((1.0 - w) * t_lo + w * t_hi).tolist()

    def _decode_attention_exact(self, num_seqs: int, context_sum: int) -> float:
        key = (num_seqs, context_sum)
        v = self._attn_cache.get(key)
        if v is None:
            if len(self._attn_cache) > 500_000:  # bound memory on very long runs
                self._attn_cache.clear()
            v = self._attn_cache[key] = self._sum(
                decode_attention_ops(num_seqs, context_sum, self.sharded, self.decode_sharded))
        return v

    def prefill_attention_time(self, chunks: tuple[tuple[int, int], ...]) -> float:
        """One iteration's prefill attention over all layers, for its (new, prior) chunks."""
        v = self._prefill_cache.get(chunks)
        if v is None:
            if len(self._prefill_cache) > 200_000:  # bound memory on very long runs
                self._prefill_cache.clear()
            v = self._prefill_cache[chunks] = self._sum(prefill_attention_ops(chunks, self.sharded))
        return v

    def collective_time(self, num_tokens: int, moe_others: int = 0) -> float:
        """The collectives' share of token_time: the waits of a sharded model's layers."""
        key = (num_tokens, moe_others)
        v = self._collective_cache.get(key)
        if v is None:
            if len(self._collective_cache) > 200_000:
                self._collective_cache.clear()
            ops = token_ops(num_tokens, self.sharded, num_tokens + moe_others)
            v = self._collective_cache[key] = self._sum([op for op in ops if op.family in COLLECTIVE_FAMILIES])
        return v

    def relief(self, num_tokens: int, busy_s: float, moe_others: int = 0) -> float:
        """power_relief for an iteration of `num_tokens` whose token, emit and prefill
        attention ops take `busy_s` at the sustained fractions (1.0: no relief).

        The share is of that time, without decode attention: a decode stretch then keeps
        one relief over all its steps (fast-forwarding stays exact), and decode attention
        is memory-bound work, which the relieved fractions leave as it is."""
        if self.wait_power is None or busy_s <= 0.0:
            return 1.0
        waits = self.collective_time(num_tokens, moe_others)
        if waits <= 0.0:
            return 1.0
        r = power_relief(waits / busy_s, self.wait_power)
        return round(r / RELIEF_STEP) * RELIEF_STEP

    def _busy_time(self, num_tokens: int, num_emit: int, chunks: tuple[tuple[int, int], ...],
                   moe_others: int = 0) -> float:
        """Token, emit and prefill-attention time of one iteration at the sustained fractions
        (everything but decode attention)."""
        t = self.token_time(num_tokens, moe_others) + self.emit_time(num_emit)
        if chunks:
            t += self.prefill_attention_time(chunks)
        return t

    def gpu_busy_time(self, num_tokens: int, num_emit: int, chunks: tuple[tuple[int, int], ...] = (),
                      moe_others: int = 0) -> float:
        """_busy_time with the sustained fractions relieved by the iteration's collective waits."""
        t = self._busy_time(num_tokens, num_emit, chunks, moe_others)
        return t if self.wait_power is None else self._relieve(t, num_tokens, num_emit, chunks, moe_others)

    def _relieve(self, busy_s: float, num_tokens: int, num_emit: int, chunks: tuple[tuple[int, int], ...],
                 moe_others: int) -> float:
        """The same ops' time as `busy_s` at the relief their collective waits give."""
        r = self.relief(num_tokens, busy_s, moe_others)
        if r <= 1.0:
            return busy_s
        t = (self._relieved(("tokens", num_tokens, moe_others), r,
                            lambda: token_ops(num_tokens, self.sharded, num_tokens + moe_others))
             + self._relieved(("emit", num_emit), r, lambda: emit_ops(num_emit, self.sharded)))
        if chunks:
            t += self._relieved(("prefill", chunks), r, lambda: prefill_attention_ops(chunks, self.sharded))
        return t

    def _relieved(self, what: tuple, relief: float, ops) -> float:
        """Memoised time of the ops `ops()` builds, at `relief`."""
        key = (what, relief)
        v = self._relieved_cache.get(key)
        if v is None:
            if len(self._relieved_cache) > 200_000:  # bound memory on very long runs
                self._relieved_cache.clear()
            v = self._relieved_cache[key] = self._sum(ops(), relief)
        return v

    def cpu_time(self, num_seqs: int) -> float:
        """The engine's per-iteration CPU work for `num_seqs` scheduled sequences."""
        return self.overhead + self.per_seq * num_seqs

    def iteration_time(self, shape: IterationShape, moe_others: int = 0, from_idle: bool = False) -> float:
        """from_idle: the engine was idle, so no earlier iteration hides this one's CPU work."""
        # gpu_busy_time, inlined: its two calls cost +0.15-0.3% instructions on this path.
        t = self.token_time(shape.num_tokens, moe_others) + self.emit_time(shape.num_emit)
        if shape.prefill_chunks:
            t += self.prefill_attention_time(shape.prefill_chunks)
        if self.wait_power is not None:
            t = self._relieve(t, shape.num_tokens, shape.num_emit, shape.prefill_chunks, moe_others)
        if shape.num_decode:
            t += self.decode_attention_time(shape.num_decode, shape.decode_context)
        if self.dispatch:  # off the default path: the attention is memoised, read again
            t += self._shape_stall(shape)
        cpu = self.cpu_time(shape.num_seqs)
        if self.overlap_cpu and not from_idle:
            return t if t > cpu else cpu
        return t + cpu

    def decode_step_times(self, num_seqs: int, context_sum: int, steps: int,
                          from_idle: bool = False) -> list[float]:
        """Durations of `steps` consecutive identical decode iterations.

        Each step every sequence gains one token of context; nothing else changes, which
        is what makes fast-forwarding a decode stretch exact: each step is timed as
        iteration_time would time it, to the last bit.
        from_idle: the first step starts an idle engine (a disaggregated decode pool's
        first request), so under async scheduling it alone pays GPU + CPU.
        """
        cpu = self.cpu_time(num_seqs)
        base = self.gpu_busy_time(num_seqs, num_seqs)
        vector = self._attn_vector
        if vector is None:
            gpu = [base + a for a in self._decode_attention_run(num_seqs, context_sum, steps)]
        elif steps < 4:
            attn = self.decode_attention_time
            gpu = [base + attn(num_seqs, context_sum + j * num_seqs) for j in range(steps)]
        else:
            gpu = (base + self._decode_attention_array(num_seqs, context_sum, steps)).tolist()
        if self.dispatch:  # each step as iteration_time adds its stall, from the same attention time
            attn = self._decode_attention_steps(num_seqs, context_sum, steps)
            stall = self.dispatch_stall
            gpu = [g + stall(num_seqs, num_seqs, (), a) for g, a in zip(gpu, attn, strict=True)]
        # The CPU work as iteration_time adds it, step by step.
        if not self.overlap_cpu:
            return [g + cpu for g in gpu]
        out = [g if g > cpu else cpu for g in gpu]
        if from_idle and out:
            out[0] = gpu[0] + cpu
        return out

    def _decode_attention_steps(self, num_seqs: int, context_sum: int, steps: int) -> list[float]:
        """The decode attention of `steps` consecutive steps, as decode_step_times adds it."""
        if self._attn_vector is None:
            return self._decode_attention_run(num_seqs, context_sum, steps)
        if steps < 4:
            return [self.decode_attention_time(num_seqs, context_sum + j * num_seqs) for j in range(steps)]
        return self._decode_attention_array(num_seqs, context_sum, steps).tolist()

    def _decode_attention_array(self, num_seqs: int, context_sum: int, steps: int) -> np.ndarray:
        """A formula timer's decode attention of all the stretch's steps at once."""
        kv_len = context_sum + num_seqs * (1.0 + np.arange(steps, dtype=np.float64))
        flops, nbytes = attn_decode_cost(num_seqs, kv_len, self.decode_sharded)
        return self._attn_vector(flops, nbytes) * self.decode_sharded.attn_layer_passes

    def _shape_stall(self, shape: IterationShape) -> float:
        attn = self.decode_attention_time(shape.num_decode, shape.decode_context) if shape.num_decode else 0.0
        return self.dispatch_stall(shape.num_tokens, shape.num_emit, shape.prefill_chunks, attn)

    def dispatch_stall(self, num_tokens: int, num_emit: int, chunks: tuple[tuple[int, int], ...],
                       decode_attention_s: float) -> float:
        """The GPU's idle time while an eager engine's CPU issues this iteration's kernels
        (cost/dispatch.py). Ops run in every layer are spread over the layers; attention
        closes each layer; the rest sit before the first layer or after the last. Kernels are
        timed at the sustained fractions without power relief (collective_power_relief)."""
        head, layer, tail = self._token_segments(num_tokens)
        layers = self.sharded.total_layer_passes
        extra = []
        if chunks:
            extra.append(Segment(self._attention_kernels("prefill"), self.prefill_attention_time(chunks) / layers))
        if decode_attention_s:
            extra.append(Segment(self._attention_kernels("decode"), decode_attention_s / layers))
        return dispatch_stall(head, layer + tuple(extra), layers, tail + self._emit_segments(num_emit),
                              self.dispatch, self.sharded.pp)

    def _token_segments(self, num_tokens: int) -> tuple[tuple[Segment, ...], ...]:
        """token_ops as (head, one layer, tail) kernel segments, memoised per token count."""
        v = self._segment_cache.get(num_tokens)
        if v is None:
            if len(self._segment_cache) > 200_000:
                self._segment_cache.clear()
            layers = self.sharded.total_layer_passes
            head, layer, tail = [], [], []
            for op in token_ops(num_tokens, self.sharded):
                t = self.timer.op_time(op) * op.count
                if 2 * op.count >= layers:  # an op of (almost) every layer
                    layer.append(Segment(op.kernels * op.count / layers, t / layers))
                else:
                    (tail if layer else head).append(Segment(op.kernels * op.count, t))
            v = self._segment_cache[num_tokens] = (tuple(head), tuple(layer), tuple(tail))
        return v

    def _emit_segments(self, num_emit: int) -> tuple[Segment, ...]:
        key = ("emit", num_emit)
        v = self._segment_cache.get(key)
        if v is None:
            v = self._segment_cache[key] = tuple(
                Segment(op.kernels * op.count, self.timer.op_time(op) * op.count) for op in emit_ops(num_emit, self.sharded))
        return v

    def _attention_kernels(self, kind: str) -> float:
        """Attention kernels per layer (their count does not depend on the sizes)."""
        key = ("kernels", kind)
        v = self._segment_cache.get(key)
        if v is None:
            ops = (prefill_attention_ops(((1, 0),), self.sharded) if kind == "prefill"
                   else decode_attention_ops(1, 1, self.sharded, self.decode_sharded))
            v = self._segment_cache[key] = sum(op.kernels * op.count for op in ops) / self.sharded.total_layer_passes
        return v

    def iteration_relief(self, shape: IterationShape, moe_others: int = 0) -> float:
        """The power_relief one iteration of `shape` runs at (1.0: none)."""
        if self.wait_power is None:
            return 1.0
        busy = self._busy_time(shape.num_tokens, shape.num_emit, shape.prefill_chunks, moe_others)
        return self.relief(shape.num_tokens, busy, moe_others)

    @property
    def older_decode_kernel(self) -> bool:
        """Whether decode attention is timed as an older release's kernel (cost/releases.py)."""
        return self.decode_sharded is not self.sharded

    def ops(self, shape: IterationShape, moe_others: int = 0) -> list[Op]:
        """The ops of one iteration, as this model times them."""
        return iteration_ops(shape, self.sharded, shape.num_tokens + moe_others, self.decode_sharded)

    def breakdown(self, shape: IterationShape, moe_others: int = 0, from_idle: bool = False) -> dict[str, float]:
        """Seconds per op name for one iteration, plus the framework overhead: under async
        scheduling only the part of it the GPU work does not hide, so the parts add up to
        iteration_time."""
        out: dict[str, float] = {}
        relief = self.iteration_relief(shape, moe_others)
        for op in self.ops(shape, moe_others):
            out[op.name] = out.get(op.name, 0.0) + self._sum([op], relief)
        if self.dispatch:
            out["kernel_dispatch"] = self._shape_stall(shape)
        cpu = self.cpu_time(shape.num_seqs)
        if self.overlap_cpu and not from_idle:
            cpu = max(0.0, cpu - sum(out.values()))
        out["framework_overhead"] = cpu
        return out


def quantised_tokens(n: int) -> int:
    """n rounded to 1/32 of its power of two (within ~3%): other DP ranks' token counts
    vary step to step, and the MoE time is smooth in them, so rounding keeps the memo hot."""
    if n < 64:
        return n
    step = 1 << (n.bit_length() - 6)
    return (n + step // 2) // step * step


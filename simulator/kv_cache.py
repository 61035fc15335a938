"""Paged KV-cache accounting: a pool of fixed-size blocks per engine.

Only counts are tracked (which block holds which token does not affect timing), so
allocation is O(1). The invariants the tests pin: used never exceeds total, never goes
negative, and returns to zero when every request has finished.

With prefix caching (`simulator.prefix_cache`), `cached` blocks hold KV no request
references: free for admission, but evicted (forgotten by the cache) only when an
allocation finds no empty block. used + cached never exceeds total.

With swap preemption (vLLM v0's `--preemption-mode swap`), a preempted sequence's blocks
move to host memory: `swap_used` of the `swap_total` host blocks, never counted in `used`.

Beside its KV blocks a running sequence holds `beside(req)` blocks of the same pool, which
a policy allocates with its first KV blocks at admission and frees with its last
(Scheduler._release): a hybrid linear-attention model's fixed recurrent state
(`state_blocks`), and a sliding-window model's last window in each group of windowed
layers (vLLM's hybrid KV manager gives those layers blocks of the pool too, freeing those
that fall out of the window; held here at the most the request reaches, from admission).
"""

from __future__ import annotations


def blocks_beside(state_blocks: int, window: tuple[int, int], block_size: int, tokens: int) -> int:
    """Blocks a sequence reaching `tokens` tokens holds besides its KV blocks: its recurrent
    state, and in each group of windowed layers the blocks of its last window (all of its
    tokens, if fewer). `window` is (groups, blocks a window spans)."""
    groups, span = window
    if not groups:
        return state_blocks
    return state_blocks + groups * min(span, -(-tokens // block_size))


class BlockManager:
    """Counts free and used KV blocks of one engine, with a peak-usage watermark."""

    __slots__ = ("block_size", "cached", "peak_used", "prefix_cache", "state_blocks", "swap_moved", "swap_peak",
                 "swap_s_per_block", "swap_total", "swap_used", "total", "used", "watermark_blocks", "window_blocks",
                 "window_groups")

    def __init__(self, total_blocks: int, block_size: int, watermark: float = 0.0, state_blocks: int = 0,
                 swap_blocks: int = 0, swap_s_per_block: float = 0.0, window: tuple[int, int] = (0, 0)):
        if total_blocks <= 0:
            raise ValueError("a KV cache needs at least one block")
        self.total = total_blocks
        self.block_size = block_size
        self.used = 0
        self.peak_used = 0
        self.watermark_blocks = int(watermark * total_blocks)
        self.cached = 0
        self.prefix_cache = None  # a PrefixCache registers itself here
        self.state_blocks = state_blocks  # held by each running sequence besides its KV
        self.window_groups, self.window_blocks = window  # groups of sliding-window layers, blocks a window spans
        self.swap_total = swap_blocks  # host-memory blocks for swapped-out sequences
        self.swap_used = 0
        self.swap_peak = 0
        self.swap_moved = 0  # blocks copied either way so far
        self.swap_s_per_block = swap_s_per_block  # one block's copy over the host link (kv_swap.py)

    @property
    def free(self) -> int:
        return self.total - self.used

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def can_allocate(self, blocks: int, *, keep_watermark: bool = False) -> bool:
        reserve = self.watermark_blocks if keep_watermark else 0
        return self.free - blocks >= reserve

    def beside(self, req) -> int:
        """Blocks a running request holds besides its KV blocks (module docstring)."""
        if not self.window_groups:  # most models: no call on the admission path
            return self.state_blocks
        return blocks_beside(self.state_blocks, (self.window_groups, self.window_blocks), self.block_size,
                             req.prompt_tokens + req.output_tokens - 1)

    def can_admit(self, blocks: int, req, *, keep_watermark: bool = False) -> bool:
        """can_allocate for a sequence starting to run: its KV blocks and what it holds beside them."""
        return self.can_allocate(blocks + self.beside(req), keep_watermark=keep_watermark)

    def admit(self, blocks: int, req) -> None:
        """Allocate a sequence's first KV blocks and what it holds beside them."""
        self.allocate(blocks + self.beside(req))

    def allocate(self, blocks: int) -> None:
        empty = self.total - self.used - self.cached
        if blocks > empty:
            if blocks > self.free:
                raise RuntimeError(f"KV over-allocation: {blocks} requested, {self.free} free")
            self.prefix_cache.evict(blocks - empty)
        self.used += blocks
        if self.used > self.peak_used:
            self.peak_used = self.used

    def release(self, blocks: int) -> None:
        self.used -= blocks
        if self.used < 0:
            raise RuntimeError("KV blocks released twice")

    def park(self, blocks: int) -> None:
        """Blocks no request uses any more whose KV stays cached (free, but evictable)."""
        self.release(blocks)
        self.cached += blocks

    def revive(self, blocks: int) -> None:
        """Cached blocks a request uses again."""
        self.cached -= blocks
        self.allocate(blocks)

    def can_swap_out(self, blocks: int) -> bool:
        return self.swap_used + blocks <= self.swap_total

    def swap_out(self, blocks: int) -> None:
        """A preempted sequence's blocks move to host memory (its GPU blocks are freed)."""
        if not self.can_swap_out(blocks):
            raise RuntimeError(f"swap over-allocation: {blocks} requested, {self.swap_total - self.swap_used} free")
        self.release(blocks)
        self.swap_used += blocks
        self.swap_moved += blocks
        if self.swap_used > self.swap_peak:
            self.swap_peak = self.swap_used

    def swap_in(self, blocks: int) -> None:
        """A swapped sequence's blocks come back to the GPU."""
        self.allocate(blocks)
        self.swap_moved += blocks
        self.swap_used -= blocks
        if self.swap_used < 0:
            raise RuntimeError("host blocks swapped in twice")

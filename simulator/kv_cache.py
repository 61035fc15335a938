"""Paged KV-cache accounting: a pool of fixed-size blocks per engine.

Only counts are tracked (which block holds which token does not affect timing), so
allocation is O(1). The invariants the tests pin: used never exceeds total, never goes
negative, and returns to zero when every request has finished.
"""

from __future__ import annotations


class BlockManager:
    """Counts free and used KV blocks of one engine, with a peak-usage watermark."""

    __slots__ = ("block_size", "peak_used", "total", "used", "watermark_blocks")

    def __init__(self, total_blocks: int, block_size: int, watermark: float = 0.0):
        if total_blocks <= 0:
            raise ValueError("a KV cache needs at least one block")
        self.total = total_blocks
        self.block_size = block_size
        self.used = 0
        self.peak_used = 0
        self.watermark_blocks = int(watermark * total_blocks)

    @property
    def free(self) -> int:
        return self.total - self.used

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def can_allocate(self, blocks: int, *, keep_watermark: bool = False) -> bool:
        reserve = self.watermark_blocks if keep_watermark else 0
        return self.free - blocks >= reserve

    def allocate(self, blocks: int) -> None:
        if blocks > self.free:
            raise RuntimeError(f"KV over-allocation: {blocks} requested, {self.free} free")
        self.used += blocks
        if self.used > self.peak_used:
            self.peak_used = self.used

    def release(self, blocks: int) -> None:
        self.used -= blocks
        if self.used < 0:
            raise RuntimeError("KV blocks released twice")

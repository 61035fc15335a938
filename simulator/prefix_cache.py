"""Automatic prefix caching (vLLM v1, on by default): KV blocks outlive their request.

A prompt's known content comes as *segments*: runs of tokens with one identity (a shared
system prompt, one hash block of a Mooncake trace), given as ``(segment id, end token)``
pairs. Keys are chained (a segment's key covers every segment before it), as vLLM chains
its block hashes, so a hit is always a prefix. Only whole KV blocks are cached; a block
that straddles two segments belongs to the later one.

Blocks of a cached segment are shared: counted once in the block manager's ``used`` while
any running request references them. When the last reference goes, they stay cached but
count as free (``BlockManager.cached``) and are evicted least-recently-released first
(the deepest segment of a request first, as vLLM frees a request's blocks tail first)
when an allocation needs them. Counts stay O(segments) per request, never per token.
"""

from __future__ import annotations

from collections import OrderedDict

from simulator.kv_cache import BlockManager
from simulator.request import Request


class _Segment:
    __slots__ = ("blocks", "refs")

    def __init__(self, blocks: int):
        self.blocks = blocks
        self.refs = 1


class PrefixCache:
    """The cached segments of one engine's KV pool."""

    __slots__ = ("hit_tokens", "idle", "kv", "segments")

    def __init__(self, kv: BlockManager):
        self.kv = kv
        self.segments: dict[int, _Segment] = {}
        self.idle: OrderedDict[int, None] = OrderedDict()  # unreferenced keys, oldest first
        self.hit_tokens = 0  # tokens read from the cache, over every admission (resumptions too)
        kv.prefix_cache = self

    # -- per request ----------------------------------------------------------------
    def _layout(self, req: Request) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """(chained keys, end tokens, whole blocks) per segment, computed once per request."""
        if req.prefix_layout is None:
            bs = self.kv.block_size
            keys, ends, blocks = [], [], []
            key = 0
            prev_blocks = 0
            for seg, end in req.prefix:
                end = min(end, req.prompt_tokens)
                key = hash((key, seg))
                full = end // bs
                keys.append(key)
                ends.append(end)
                blocks.append(max(full - prev_blocks, 0))
                prev_blocks = max(prev_blocks, full)
            req.prefix_layout = (tuple(keys), tuple(ends), tuple(blocks))
        return req.prefix_layout

    def match(self, req: Request) -> tuple[list[int], int, int, int]:
        """The longest cached prefix of a request about to be admitted with no KV.

        Returns (keys to reference, hit blocks, idle blocks that referencing them takes out
        of the free pool, segments matched). At least one token is always left to compute
        (vLLM needs the last position's logits), so the hit stops before the sequence's
        last token.
        """
        keys, _, blocks = self._layout(req)
        limit = (req.prompt_tokens + req.num_generated - 1) // self.kv.block_size
        segments = self.segments
        hit = revived = i = 0
        out: list[int] = []
        for i, (key, nb) in enumerate(zip(keys, blocks, strict=True)):  # noqa: B007
            if hit >= limit:
                break
            if nb == 0:
                continue
            seg = segments.get(key)
            if seg is None:
                break
            out.append(key)
            hit += nb
            if seg.refs == 0:
                revived += seg.blocks
        else:
            i = len(keys)
        return out, min(hit, limit), revived, i

    def acquire(self, req: Request, keys: list[int], hit_blocks: int, matched: int) -> None:
        """Reference the matched segments: `req` starts with `hit_blocks` blocks computed
        and `matched` segments looked up (the next to publish)."""
        kv = self.kv
        segments, idle = self.segments, self.idle
        for key in keys:
            seg = segments[key]
            if seg.refs == 0:
                del idle[key]
                kv.cached -= seg.blocks
                kv.allocate(seg.blocks)
            seg.refs += 1
        req.prefix_refs = keys if keys else None
        req.shared_blocks = hit_blocks
        req.block_count = hit_blocks
        req.num_computed = hit_blocks * kv.block_size
        req.prefix_published = matched
        self.hit_tokens += req.num_computed

    def publish(self, req: Request, computed: int) -> None:
        """Cache the segments `req` will have computed once `computed` tokens are in KV.

        Called when the chunk is scheduled, as vLLM registers a block's hash when it
        allocates the block: a request admitted later in the same iteration can hit it
        (each layer writes the batch's KV before its attention reads it). A segment
        someone else already cached stays this request's own (a duplicate block).
        """
        keys, ends, blocks = self._layout(req)
        i = req.prefix_published
        segments = self.segments
        while i < len(keys) and ends[i] <= computed:
            nb = blocks[i]
            if nb and keys[i] not in segments:
                segments[keys[i]] = _Segment(nb)
                if req.prefix_refs is None:
                    req.prefix_refs = []
                req.prefix_refs.append(keys[i])
                req.shared_blocks += nb
            i += 1
        req.prefix_published = i

    def release(self, req: Request) -> int:
        """Drop `req`'s references; returns how many of its blocks were its own."""
        kv = self.kv
        segments, idle = self.segments, self.idle
        for key in reversed(req.prefix_refs):
            seg = segments[key]
            seg.refs -= 1
            if seg.refs == 0:
                idle[key] = None
                kv.release(seg.blocks)
                kv.cached += seg.blocks
        own = req.block_count - req.shared_blocks
        req.prefix_refs = None
        req.shared_blocks = 0
        req.prefix_published = 0
        return own

    def evict(self, blocks: int) -> None:
        """Free at least `blocks` cached blocks, least recently released first."""
        kv = self.kv
        segments, idle = self.segments, self.idle
        while blocks > 0 and idle:
            key, _ = idle.popitem(last=False)
            n = segments.pop(key).blocks
            kv.cached -= n
            blocks -= n

"""Automatic prefix caching (vLLM v1, on by default): KV blocks outlive their request.

A prompt's known content comes as *segments*: runs of tokens with one identity (a shared
system prompt, one hash block of a Mooncake trace), given as ``(segment id, end token)``
pairs. Keys are chained (a segment's key covers every segment before it), as vLLM chains
its block hashes, so a hit is always a prefix. Only whole KV blocks are cached; a block
that straddles two segments belongs to the later one.

Blocks of a cached segment are shared: counted once in the block manager's ``used`` while
any running request references them. When the last reference goes, they stay cached but
count as free (``BlockManager.cached``) and are evicted least-recently-released first,
tail blocks first (vLLM frees a request's blocks in reverse order), when an allocation
finds no empty block. A partly evicted segment still serves its leading blocks.

vLLM caches every full block, not only shared text, so a request preempted by recompute
finds its own blocks again when it is readmitted, and a conversation's next turn finds the
previous turn's prompt and answer, unless they were evicted meanwhile. A request's computed
blocks after its shared prefix become one more segment for that purpose.
Counts stay O(segments) per request, never per token.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from simulator.kv_cache import BlockManager
from simulator.request import Request


class _Segment:
    __slots__ = ("blocks", "refs", "size")

    def __init__(self, blocks: int, refs: int = 1):
        self.blocks = blocks  # still cached: fewer than the segment's blocks once its tail was evicted
        self.refs = refs
        # Its blocks when whole. A request whose layout gives the same key another size (a
        # prompt that stops inside the shared prefix, rows naming one prefix id with
        # different lengths, a turn whose context ends past the last computed block) may
        # read a smaller segment as a prefix of its own, but never references a larger one
        # (it would hold more shared blocks than its prompt has) nor grows another's.
        self.size = blocks


class Match(NamedTuple):
    """What a waiting request would find in the cache."""

    keys: list[int]  # shared segments to reference
    shared_blocks: int  # blocks they provide (up to the hit limit)
    own_blocks: int  # blocks of its own private segment (a preempted request's KV)
    revived: int  # idle blocks that admission takes out of the free pool
    matched: int  # segments looked up: the next one the request may publish
    trim: int = 0  # tail blocks of the last, idle segment past the hit limit: freed, not revived

    @property
    def blocks(self) -> int:
        return self.shared_blocks + self.own_blocks


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
    def _layout(self, req: Request) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int]:
        """(chained keys, end tokens and whole blocks per segment; the key of the request's
        private segment), computed once per request."""
        if req.prefix_layout is None:
            bs = self.kv.block_size
            keys, ends, blocks = [], [], []
            key = 0
            prev_blocks = 0
            for seg, end in req.prefix or ():
                cut = end > req.prompt_tokens
                end = min(end, req.prompt_tokens)
                full = end // bs
                # A prompt that stops inside the segment holds only its first `full` blocks:
                # cached under a key of its own, so a short prompt neither caps the segment at
                # its size for the longer prompts that follow (a segment never grows) nor
                # finds one larger than it can reference; short prompts of one length share.
                key = hash((key, seg, full)) if cut else hash((key, seg))
                keys.append(key)
                ends.append(end)
                blocks.append(max(full - prev_blocks, 0))
                prev_blocks = max(prev_blocks, full)
            own = hash((key, req.prefix_tail)) if req.prefix_tail is not None else hash((key, -1, req.id))
            req.prefix_layout = (tuple(keys), tuple(ends), tuple(blocks), own)
        return req.prefix_layout

    def match(self, req: Request) -> Match:
        """The longest cached prefix of a request about to be admitted with no KV.

        At least one token is always left to compute (vLLM needs the last position's
        logits), so the hit stops before the sequence's last token.
        """
        keys, _, blocks, own_key = self._layout(req)
        limit = (req.prompt_tokens + req.num_generated - 1) // self.kv.block_size
        segments = self.segments
        hit = revived = 0
        i, n = 0, len(keys)
        out: list[int] = []
        while i < n and hit < limit:
            nb = blocks[i]
            if nb:
                seg = segments.get(keys[i])
                if seg is None or seg.size > nb:
                    break
                out.append(keys[i])
                hit += seg.blocks
                if seg.refs == 0:
                    revived += seg.blocks
                if seg.blocks < nb:  # its tail was evicted: the chain stops here (and is repaired)
                    break
            i += 1
        whole = i == n
        # The hit stops before the last token: vLLM references the blocks up to there, and a
        # cached block past it stays free. An idle last segment is cut back to the limit
        # (its tail freed, as an eviction would), so admission holds no block it cannot use.
        trim = 0
        if hit > limit and segments[out[-1]].refs == 0:
            trim = hit - limit
            revived -= trim
        hit = min(hit, limit)
        own = 0
        if whole and req.preemptions:
            seg = segments.get(own_key)
            if seg is not None:
                own = min(seg.blocks, limit - hit)
                revived += own
        return Match(out, hit, own, revived, i, trim)

    def acquire(self, req: Request, m: Match) -> None:
        """Admit `req` with what `m` found: its KV starts with those blocks computed."""
        kv = self.kv
        segments, idle = self.segments, self.idle
        if m.trim:
            last = segments[m.keys[-1]]
            last.blocks -= m.trim
            kv.cached -= m.trim
        for key in m.keys:
            seg = segments[key]
            if seg.refs == 0:
                del idle[key]
                kv.revive(seg.blocks)
            seg.refs += 1
        if m.own_blocks:
            own_key = req.prefix_layout[3]
            del idle[own_key]
            kv.cached -= segments.pop(own_key).blocks - m.own_blocks  # those beyond the hit limit are freed
            kv.revive(m.own_blocks)
        req.prefix_refs = m.keys if m.keys else None
        req.shared_blocks = m.shared_blocks
        req.block_count = m.blocks
        req.num_computed = m.blocks * kv.block_size
        req.prefix_published = m.matched
        self.hit_tokens += req.num_computed

    def publish(self, req: Request, computed: int) -> None:
        """Cache the segments `req` will have computed once `computed` tokens are in KV.

        Called when the chunk is scheduled, as vLLM registers a block's hash when it
        allocates the block: a request admitted later in the same iteration can hit it
        (each layer writes the batch's KV before its attention reads it). A segment
        someone else already cached stays this request's own (a duplicate block); one whose
        evicted tail this request recomputed gets it back.
        """
        keys, ends, blocks, _ = self._layout(req)
        i = req.prefix_published
        segments = self.segments
        refs = req.prefix_refs
        while i < len(keys) and ends[i] <= computed:
            nb = blocks[i]
            seg = segments.get(keys[i]) if nb else None
            if nb and seg is None:
                segments[keys[i]] = _Segment(nb)
                if refs is None:
                    refs = req.prefix_refs = []
                refs.append(keys[i])
                req.shared_blocks += nb
            elif seg is not None and seg.blocks < nb and refs and refs[-1] == keys[i]:
                # Its evicted tail, or a conversation turn's last block that the turn before
                # never computed (its last token's KV is never written): this request
                # computed it, so the segment holds it from now on, as vLLM's block hash
                # chain goes on through it.
                req.shared_blocks += nb - seg.blocks
                seg.blocks = seg.size = nb
            i += 1
        req.prefix_published = i

    def keep_own(self, req: Request) -> None:
        """Before a recompute preemption, or when a conversation turn finishes: keep the
        request's computed blocks after its shared prefix cached, as one segment, for when
        it is readmitted or the session's next turn extends it."""
        keys, ends, blocks, own_key = self._layout(req)
        if keys and req.num_computed < ends[-1]:
            return  # preempted inside its shared prefix
        n = req.num_computed // self.kv.block_size - sum(blocks)
        if n <= 0:
            return
        kv = self.kv
        cached = self.segments.get(own_key)
        if cached is not None:
            # The same content is cached already (a later turn computed it too, or what is
            # left of an earlier preemption): keep the larger copy.
            if cached.refs or cached.blocks >= n:
                return
            del self.segments[own_key]
            del self.idle[own_key]
            kv.cached -= cached.blocks
        self.segments[own_key] = _Segment(n, refs=0)
        self.idle[own_key] = None
        kv.park(n)
        req.block_count -= n

    def release(self, req: Request) -> int:
        """Drop `req`'s references; returns how many of its blocks were its own."""
        self.drop(req.prefix_refs)
        own = req.block_count - req.shared_blocks
        req.prefix_refs = None
        req.shared_blocks = 0
        return own

    def drop(self, refs: list[int]) -> None:
        """Drop one reference to each of these segments: one no one references any more
        stays cached as free blocks, the tail of the list first (evicted first)."""
        kv = self.kv
        segments, idle = self.segments, self.idle
        for key in reversed(refs):
            seg = segments[key]
            seg.refs -= 1
            if seg.refs == 0:
                idle[key] = None
                kv.park(seg.blocks)

    def evict(self, blocks: int) -> None:
        """Free at least `blocks` cached blocks: least recently released first, and of a
        segment its tail first."""
        kv = self.kv
        segments, idle = self.segments, self.idle
        while blocks > 0 and idle:
            key = next(iter(idle))
            seg = segments[key]
            if seg.blocks > blocks:
                seg.blocks -= blocks
                kv.cached -= blocks
                return
            del idle[key]
            del segments[key]
            kv.cached -= seg.blocks
            blocks -= seg.blocks

"""How reports write one disaggregated pool's instance layout, from a summary's pool block."""

from __future__ import annotations

from collections.abc import Mapping


def pool_layout(pool: Mapping, gpu: str | None = None) -> str:
    """'TP4·PP1', 'TP1·PP1·DP8·EP8', 'TP4·PP1 on a100-80gb-sxm': the layout of one instance
    of a pool (its `dp` and `ep` shown when above 1; summaries written before pools had
    them show TP·PP only), and its GPU where it is not `gpu`, the run's."""
    text = f"TP{pool.get('tp')}·PP{pool.get('pp')}"
    for key in ("dp", "ep"):
        value = pool.get(key)
        if isinstance(value, int | float) and value > 1:
            text += f"·{key.upper()}{value:g}"
    own = pool.get("gpu")
    return text + (f" on {own}" if own is not None and own != gpu else "")

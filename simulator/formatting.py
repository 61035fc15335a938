"""How numbers read on screen and in the reports: one rule for the terminal, the HTML pages
and the comparison tables, so one value never reads two ways, a fraction below 1 never
reads as 100% (nor one above 0 as 0%), and no value reads in exponent form."""

from __future__ import annotations

import math
import re

#: Extra decimals a percentage may take to tell 99.95% from 100%.
_MORE_DECIMALS = 3


def significant(x: float, digits: int = 3) -> str:
    """`x` with `digits` significant figures below 10, trailing zeros kept (8.00, 8.30,
    8.42 in one column), one decimal from 10 up, thousands separated."""
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 10:
        return f"{x:,.1f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:,.{decimals}f}"
    if abs(float(text.replace(",", ""))) >= 10:  # 9.996 rounds up into the next decade's format
        return f"{x:,.1f}"
    return text


def percent(fraction: float, decimals: int = 1, *, apart_from: float | None = None) -> str:
    """A 0-1 fraction as a percentage with `decimals` places, or as many more as it takes
    not to read 100% below 1 or 0% above 0 (0.9995: 99.95%, not 100.0%), nor the same as
    `apart_from` where it differs (a verdict's 98.95% < 99%, not 99.0% < 99.0%)."""
    if not math.isfinite(fraction):
        return str(fraction)
    for places in range(decimals, decimals + _MORE_DECIMALS + 1):
        text = f"{fraction * 100:.{places}f}"
        value = float(text)
        if (value >= 100 and fraction < 1) or (value == 0 and fraction > 0):
            continue
        if apart_from is not None and apart_from != fraction and text == f"{apart_from * 100:.{places}f}":
            continue
        return f"{text}%"
    return "<100%" if fraction < 1 else ">0%"


def natural_key(text: str) -> list:
    """Sort key that reads numbers as numbers: llama-3-8b before llama-3.1-8b, tp2 before
    tp16, 1024/8192 before 8192/1024."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part]

"""One number format for the terminal, the HTML pages and comparison tables."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from simulator.formatting import percent, significant


def test_significant_keeps_three_figures_and_never_an_exponent():
    assert [significant(x) for x in (8, 8.3, 8.42)] == ["8.00", "8.30", "8.42"]  # one column, one look
    assert significant(0.00005) == "0.0000500" and significant(0.0123) == "0.0123"
    assert significant(9.996) == significant(10.0) == "10.0"  # rounds into the next decade's format
    assert significant(1234.56) == "1,234.6" and significant(0) == "0" and significant(-3.2) == "-3.20"


def test_percent_says_when_a_fraction_is_not_whole_or_not_nothing():
    assert percent(0.9995) == "99.95%" and percent(1.0) == "100.0%"
    assert percent(0.0043, 0) == "0.4%" and percent(0.0) == "0.0%"
    assert percent(0.9895, apart_from=0.99) == "98.95%"  # a verdict's two sides read apart


@given(st.floats(min_value=1e-9, max_value=1 - 1e-9))
def test_a_fraction_strictly_between_0_and_1_never_reads_as_either(fraction):
    text = percent(fraction)
    assert text not in ("100.0%", "0.0%")
    if text[0].isdigit():
        assert 0 < float(text.rstrip("%")) < 100


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_significant_reads_back_within_its_rounding(x):
    text = significant(x)
    assert "e" not in text
    back = float(text.replace(",", ""))
    assert abs(back - x) <= max(0.05, 0.005 * abs(x))

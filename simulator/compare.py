"""`simulate compare`: one scenario and its variants, side by side.

The questions a serving team asks before renting GPUs are mostly comparisons: TP8 x 1 or
TP4 x 2, FP8 or BF16, a smaller prefill chunk or the default. Each variant is the base
scenario with its own `--set` edits (or another scenario file); all run with the same
workload seed, so they see the same requests, and every metric is shown with its change
against the first column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from simulator.config import LoadedScenario, load_scenario
from simulator.errors import ConfigError, ServesimError
from simulator.formatting import percent, significant
from simulator.metrics import slo_set
from simulator.output import staged, write_json

#: (label, summary path, unit, lower is better) of each compared metric, in table order.
METRICS: tuple[tuple[str, tuple[str, ...], str, bool | None], ...] = (
    ("TTFT p50", ("ttft_ms", "p50"), "ms", True),
    ("TTFT p99", ("ttft_ms", "p99"), "ms", True),
    ("TPOT p50", ("tpot_ms", "p50"), "ms", True),
    ("TPOT p99", ("tpot_ms", "p99"), "ms", True),
    ("E2E p99", ("e2e_ms", "p99"), "ms", True),
    ("throughput", ("throughput", "requests_per_s"), "req/s", False),
    ("output tokens", ("throughput", "output_tokens_per_s"), "tok/s", False),
    ("goodput", ("goodput", "requests_per_s"), "req/s", False),
    ("SLO attainment", ("goodput", "slo_attainment"), "fraction", False),
    ("KV peak", ("kv_cache", "peak_utilization"), "fraction", None),  # neither better nor worse
    ("preemptions", ("preemptions",), "", True),
    ("GPUs", ("cost", "gpus"), "", True),
    ("cost", ("cost", "usd_per_hour"), "$/h", True),
    ("cost per M output tokens", ("cost", "usd_per_million_output_tokens"), "$", True),
)


# Metrics that exist only where the scenario sets an SLO.
SLO_METRICS = ("goodput", "SLO attainment")


def shown(value: float | None, unit: str) -> str:
    """A metric's value as the terminal and the page show it (fractions as percentages,
    counts as whole numbers)."""
    if value is None:
        return "—"
    if unit == "fraction":
        return percent(value)
    if not unit and float(value).is_integer():
        return f"{int(value):,}"
    if unit in ("$/h", "$"):  # money to the cent
        return f"{value:,.2f}"
    return significant(value)


def unit_label(unit: str) -> str:
    """The unit after a metric's name: none for fractions, which show as percentages."""
    return f" ({unit})" if unit and unit != "fraction" else ""


def verdict(change: float | None, lower_is_better: bool | None) -> str | None:
    """Whether a change against the base is `better` or `worse` (`changed` for a metric that
    is neither: a lower KV peak may be a slower server); None for no change worth showing
    (under 0.05%)."""
    if change is None or abs(change) < 0.05:
        return None
    if lower_is_better is None:
        return "changed"
    return "better" if (change < 0) == lower_is_better else "worse"


def marked_change(change: float | None, base: float | None, value: float | None,
                  lower_is_better: bool | None, unit: str = "") -> tuple[str | None, str]:
    """(verdict, text) of a variant's value against the base's: the relative change (for a
    fraction, the difference in percentage points), or "from 0" where the base is zero and
    a relative change does not exist (0 -> 124 preemptions is worse, not unchanged)."""
    if change is None and base == 0 and value:
        text = f"{value * 100:+.1f} pts" if unit == "fraction" else "from 0"  # a fraction's points exist
        if lower_is_better is None:
            return "changed", text
        return ("worse" if (value > 0) == lower_is_better else "better"), text
    judged = verdict(change, lower_is_better)
    if not judged:
        return judged, ""
    if unit == "fraction" and base is not None and value is not None:
        return judged, f"{(value - base) * 100:+.1f} pts"
    return judged, f"{change:+.1f}%"


@dataclass(frozen=True)
class Variant:
    """One column: a name, the scenario it runs, and its own edits (an edit variant's,
    after the base's; a file variant's are the base's `--set`s)."""

    name: str
    loaded: LoadedScenario
    sets: tuple[str, ...] = ()

    def changes(self, base: Variant) -> str:
        """What this variant changes from `base`: its edits, or its own scenario file."""
        return "; ".join(self.sets) if self.loaded.path == base.loaded.path else str(self.loaded.path)

    def unlike(self, base: Variant) -> str | None:
        """What makes this column no like-for-like comparison with `base`: another workload
        (other requests) or another SLO (other verdicts), which a scenario-file variant may
        carry; None where both match. Edits that change them are the user's own choice."""
        if self.loaded.path == base.loaded.path:
            return None
        ours, theirs = self.loaded.scenario, base.loaded.scenario
        differ = [name for name in ("workload", "slo")
                  if getattr(ours, name).model_dump() != getattr(theirs, name).model_dump()]
        if not differ:
            return None
        what = {"workload": "its own workload (other requests)", "slo": "its own SLO (other goodput verdicts)"}
        return (f"{self.name} runs {' and '.join(what[d] for d in differ)}: its column is not the base's "
                f"conditions; --variant '{self.name}: ...' edits of the base keep them")


@dataclass
class Comparison:
    variants: list[Variant]
    summaries: list[dict] = field(default_factory=list)

    def value(self, i: int, path: tuple[str, ...]) -> float | None:
        node = self.summaries[i]
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return float(node) if isinstance(node, (int, float)) and math.isfinite(node) else None

    def rows(self) -> list[dict]:
        """Every metric for every variant, with the change against the first variant."""
        out = []
        slo = any(slo_set(s) for s in self.summaries)
        for label, path, unit, lower_better in METRICS:
            if label in SLO_METRICS and not slo:  # no SLO: every request 'meets' it
                continue
            values = [self.value(i, path) for i in range(len(self.variants))]
            base = values[0]
            changes = [None if v is None or not base else (v - base) / base * 100.0 for v in values]
            # A fraction's change is shown in percentage points; the files carry that figure too.
            points = [None if unit != "fraction" or v is None or base is None else (v - base) * 100.0
                      for v in values]
            out.append({"metric": label, "unit": unit, "lower_is_better": lower_better,
                        "values": values, "change_pct": changes, "change_pts": points})
        return out


def parse_variant(text: str, base_path: Path, base_sets: list[str]) -> Variant:
    """`NAME: a.b=1; c.d=2` (the base with these edits), or a scenario file's path."""
    name, sep, edits = text.partition(":")
    name = name.strip()
    if not text.strip():
        raise ConfigError("an empty variant", where="--variant",
                          fix="write e.g. --variant 'tp8: parallelism.tp=8; parallelism.replicas=1', or a scenario file")
    if not sep:
        path = Path(text)
        if path.suffix in (".yaml", ".yml") or path.exists():
            loaded = load_scenario(path, base_sets)
            return Variant(path.stem, loaded, tuple(base_sets))
        raise ConfigError(f"variant {text!r} is neither `NAME: path=value; ...` nor a scenario file",
                          where="--variant", fix="write e.g. --variant 'tp8: parallelism.tp=8; parallelism.replicas=1'")
    if not name:
        raise ConfigError(f"variant {text!r} has no name before the colon", where="--variant",
                          fix="name it, e.g. --variant 'fp8: model.weight_dtype=fp8'")
    sets = [s.strip() for s in edits.split(";") if s.strip()]
    if not sets:
        raise ConfigError(f"variant {name!r} changes nothing", where="--variant",
                          fix="list its edits after the colon, separated by `;`")
    try:
        loaded = load_scenario(base_path, [*base_sets, *sets])
    except ServesimError as exc:
        raise in_variant(exc, name, sets) from None
    return Variant(name, loaded, tuple(sets))


def in_variant(exc: ServesimError, name: str, sets: tuple[str, ...] | list[str]) -> ServesimError:
    """An error one variant's edits caused, named as the variant the user wrote, not as the
    `--set` it is applied through."""
    for edit in sets:
        exc.message = exc.message.replace(f"--set '{edit}'", f"its edit '{edit}'")
        if exc.fix:
            exc.fix = exc.fix.replace(f"--set '{edit}'", f"the edit '{edit}'")
    if exc.where == "--set":
        exc.where = f"--variant {name!r}"
        if exc.fix:
            exc.fix = exc.fix.replace("--set ", "")
    else:
        exc.where = f"variant {name!r}: {exc.where}" if exc.where else f"variant {name!r}"
    exc.args = (exc.render(),)
    return exc


def build_variants(base_path: Path, base_sets: list[str], variant_texts: list[str]) -> list[Variant]:
    base = Variant("base", load_scenario(base_path, base_sets), tuple(base_sets))
    variants = [base, *(parse_variant(t, base_path, base_sets) for t in variant_texts)]
    if len(variants) < 2:
        raise ConfigError("nothing to compare the base with", where="--variant",
                          fix="add --variant 'NAME: path=value; ...' (or a second scenario file) at least once")
    names = [v.name for v in variants]
    if "base" in names[1:]:
        raise ConfigError("a variant is named `base`, the name of the first column (the base scenario)",
                          where="--variant", fix="give the variant another name")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"variant name(s) used twice: {', '.join(repeated)}", where="--variant",
                          fix="give every variant its own name")
    return variants


def run_comparison(variants: list[Variant], *, progress: Callable[[int, int], None] | None = None) -> Comparison:
    """Simulate every variant (the same workload seed: the same requests where the
    workload is the same)."""
    from simulator import api

    comparison = Comparison(variants)
    for i, v in enumerate(variants):
        if progress is not None:
            progress(i, len(variants))
        try:
            comparison.summaries.append(api.run(v.loaded, record_iterations=False).summary)
        except ServesimError as exc:
            if i == 0:
                raise
            edits = v.sets if v.loaded.path == variants[0].loaded.path else ()  # a file variant's are the base's
            raise in_variant(exc, v.name, edits) from None
    if progress is not None:
        progress(len(variants), len(variants))
    return comparison


def write_comparison(comparison: Comparison, final: Path, unique: bool = False) -> Path:
    """compare.json (every summary, and the table), compare.csv (the table), compare.html
    and compare.png, atomically."""
    from simulator.report.compare_page import write_compare_page

    names = [v.name for v in comparison.variants]
    table = comparison.rows()
    base = comparison.variants[0]
    warnings = [w for v in comparison.variants[1:] if (w := v.unlike(base))]
    with staged(final, unique) as (tmp, final):
        write_json(tmp / "compare.json", {
            "variants": [{"name": v.name, "scenario": str(v.loaded.path) if v.loaded.path else None,
                          "sets": list(v.sets), "summary": s}
                         for v, s in zip(comparison.variants, comparison.summaries, strict=True)],
            "table": table,
            "warnings": warnings})
        with open(tmp / "compare.csv", "w", newline="") as f:
            out = csv.writer(f, lineterminator="\n")
            out.writerow(["metric", "unit", *names, *(f"{n} change %" for n in names[1:]),
                          *(f"{n} change pts" for n in names[1:])])
            for r in table:
                out.writerow([r["metric"], r["unit"], *("" if v is None else repr(v) for v in r["values"]),
                              *("" if c is None else repr(c) for c in r["change_pct"][1:]),
                              *("" if c is None else repr(c) for c in r["change_pts"][1:])])
        write_compare_page(tmp, f"servesim compare: {base.loaded.name}", names, table,
                           [(base.name, str(base.loaded.path or "the base scenario")),
                            *((v.name, v.changes(base)) for v in comparison.variants[1:])], warnings)
    return final

"""Why configurations were infeasible, in a few terminal lines.

plan.csv and plan.html keep each configuration's full reason (the memory breakdown
included); the terminal groups them by what went wrong, so a sweep in which nothing could
even run says so instead of reading as an SLO miss.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Reason groups printed before "… N more"; labels named per group before "+N more".
MAX_GROUPS = 3
MAX_LABELS = 3
#: Scenario fields a plan varies under `space` (the rest live in its base scenario).
_SPACE_FIELD = re.compile(r"\b(?:parallelism|hardware|model)\.(tp|pp|dp|expert_parallel|gpu|weight_dtype|kv_dtype): "
                          r"([\w.-]+)")
_POOL_FIELD = re.compile(r"\bdisaggregation\.(prefill|decode)\.(tp|pp|dp|replicas|expert_parallel|gpu): ([\w.-]+)")
#: The same fields named without a value ("set parallelism.tp to one that divides 32").
_SPACE_NAMED = re.compile(r"(?<![\w.])parallelism\.(tp|pp|dp|expert_parallel)\b")
_POOL_NAMED = re.compile(r"(?<![\w.])disaggregation\.(prefill|decode)\.(tp|pp|dp|replicas|expert_parallel|gpu)\b")
#: Any other scenario field: the plan sets it in its base scenario.
_BASE_FIELD = re.compile(r"(?<![\w.])((?:memory|scheduler|cost_model|workload|model|hardware|parallelism)\.\w[\w.]*)")


@dataclass
class ReasonGroup:
    """Infeasible configurations that failed the same way."""

    message: str
    fix: str | None
    labels: list[str] = field(default_factory=list)


def reason_groups(rows: list[dict], records: dict[str, dict]) -> list[ReasonGroup]:
    """Infeasible rows grouped by their error's message, the largest group first."""
    groups: dict[str, ReasonGroup] = {}
    for row in rows:
        if row["status"] != "infeasible":
            continue
        message, fix = _parts(records.get(row["key"], {}), row.get("reason") or "no reason recorded")
        groups.setdefault(message, ReasonGroup(message, fix)).labels.append(row["label"])
    return sorted(groups.values(), key=lambda g: -len(g.labels))


def _parts(rec: dict, reason: str) -> tuple[str, str | None]:
    """The one-line message and the fix; a record from before they were stored separately
    gives its reason's first line, and the fix its rendering appended."""
    if rec.get("message"):
        return rec["message"], rec.get("fix")
    head, _, fix = reason.partition("\n  fix: ")
    return head.splitlines()[0], fix or None


def summary_lines(groups: list[ReasonGroup]) -> list[str]:
    """'2 × tp=3 does not divide the 32 attention heads of … (h100-sxm TP3, l4 TP3)', one per group."""
    lines = [f"{_count(g)}{g.message} ({_labels(g.labels)})" for g in groups[:MAX_GROUPS]]
    rest = sum(len(g.labels) for g in groups[MAX_GROUPS:])
    if rest:
        lines.append(f"… {rest} more configurations for other reasons (plan.csv)")
    return lines


def _count(g: ReasonGroup) -> str:
    return f"{len(g.labels)} × " if len(g.labels) > 1 else ""


def _labels(labels: list[str]) -> str:
    more = len(labels) - MAX_LABELS
    return ", ".join(labels[:MAX_LABELS]) + (f", +{more} more" if more > 0 else "")


def none_feasible(groups: list[ReasonGroup]) -> str:
    """The 'recommended: none' explanation when every configuration was infeasible: the
    space, not the SLO, is what to change, as the largest group's fix says."""
    text = "no configuration was feasible (none could run, so the SLO was not tested)"
    fixed = next((g for g in groups if g.fix), None)
    if fixed is None:
        return text + "; change the plan's space (reasons in plan.csv)"
    which = f" ({_labels(fixed.labels)})" if len(groups) > 1 else ""
    return text + f"; fix{which}: {plan_fix(fixed.fix)}"


def plan_fix(fix: str) -> str:
    """A scenario fix in plan terms: 'parallelism.tp: 4' is the plan's 'space.tp: [4]',
    'disaggregation.prefill.tp: 4' its 'space.disaggregation.prefill.tp: [4]', a layout
    field named without a value its space list, and any other scenario field (the memory
    budget, a scheduler knob) one of the plan's `base`."""
    fix = _POOL_FIELD.sub(lambda m: f"space.disaggregation.{m[1]}.{m[2]}: [{m[3]}]", fix)
    fix = _SPACE_FIELD.sub(lambda m: f"space.{m[1]}: [{m[2]}]", fix)
    fix = _POOL_NAMED.sub(lambda m: f"space.disaggregation.{m[1]}.{m[2]}", fix)
    fix = _SPACE_NAMED.sub(lambda m: f"space.{m[1]}", fix)
    return _BASE_FIELD.sub(lambda m: f"base.{m[1]}", fix)

"""Renders the scenario reference (every field, default, meaning) from the config models.

README's reference section is this output verbatim; a test keeps the two identical, so
the docs cannot drift from the code. Regenerate with `python -m simulator.reference`.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

BEGIN = "<!-- scenario-reference:begin -->"
END = "<!-- scenario-reference:end -->"


def _type_name(ann: Any) -> str:
    origin = get_origin(ann)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(ann))
    if origin is typing.Annotated:
        return _type_name(get_args(ann)[0])
    if origin in (typing.Union, types.UnionType):
        parts = [_type_name(a) for a in get_args(ann) if a is not type(None)]
        return " \\| ".join(parts)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return "section"
    if origin in (list, tuple):
        return f"list of {_type_name(get_args(ann)[0])}" if get_args(ann) else "list"
    return getattr(ann, "__name__", str(ann))


def _default(field: FieldInfo, within: bool) -> str:
    """`within`: the field sits in an optional section, so it is required only there."""
    if field.default is PydanticUndefined:
        if field.default_factory is not None:
            return f"`{field.get_default(call_default_factory=True)}`"
        return "**required** within the section" if within else "**required**"
    if field.default is None:
        return "—"
    return f"`{field.default}`"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _rows(model: type[BaseModel], prefix: str, out: list[str], skip: str = "", within: bool = False) -> None:
    """One row per field; sections recurse, and unions and optional sections get a row of
    their own, as that row is where the reader learns what leaving them out means."""
    from simulator.config import default_variant, models_in, variants

    for name, field in model.model_fields.items():
        if name == skip:  # a variant's tag: its heading row already names it
            continue
        path = f"{prefix}{name}"
        desc = _cell(field.description)
        union = variants(field)
        subs = models_in(field.annotation)
        if union is not None:
            tag, by_tag = union
            default = default_variant(field, tag)
            shown = f"`{tag}: {default}`" if default else _default(field, within)
            out.append(f"| `{path}` | one of the variants below, picked by `{tag}` "
                       f"(which the section must set) | {shown} | {desc} |")
            for value, sub in by_tag.items():
                out.append(f"| `{path}.{tag}: {value}` | variant | | {_cell(_summary(sub.__doc__))} |")
                _rows(sub, f"{path}.", out, skip=tag)
        elif len(subs) == 1 and _type_name(field.annotation) == "section":
            optional = field.default is None
            if optional:
                out.append(f"| `{path}` | optional section | absent: off | {desc} |")
            _rows(subs[0], f"{path}.", out, within=within or optional)
        else:
            out.append(f"| `{path}` | {_type_name(field.annotation)} | {_default(field, within)} | {desc} |")


def _summary(doc: str | None) -> str:
    """A docstring's first paragraph on one line: a sentence may wrap."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def render() -> str:
    from simulator.config import Scenario

    out = ["| field | type | default | meaning |", "|---|---|---|---|"]
    _rows(Scenario, "", out)
    return "\n".join(out)


def update_readme(path: str = "README.md") -> None:
    readme = Path(path)
    head, _, rest = readme.read_text().partition(BEGIN)
    _, _, tail = rest.partition(END)
    readme.write_text(f"{head}{BEGIN}\n{render()}\n{END}{tail}")


if __name__ == "__main__":
    update_readme()

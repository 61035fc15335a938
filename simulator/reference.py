"""Renders the scenario reference (every field, default, meaning) from the config models.

README's reference section is this output verbatim; a test keeps the two identical, so
the docs cannot drift from the code. Regenerate with `python -m simulator.reference`.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

BEGIN = "<!-- scenario-reference:begin -->"
END = "<!-- scenario-reference:end -->"


def _models_in(ann: Any) -> list[type[BaseModel]]:
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    out: list[type[BaseModel]] = []
    for arg in get_args(ann):
        out.extend(_models_in(arg))
    return out


def _type_name(ann: Any) -> str:
    origin = get_origin(ann)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(ann))
    if origin is typing.Annotated:
        return _type_name(get_args(ann)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        parts = [_type_name(a) for a in get_args(ann) if a is not type(None)]
        return " \\| ".join(parts)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return "section"
    if origin in (list, tuple):
        return f"list of {_type_name(get_args(ann)[0])}" if get_args(ann) else "list"
    return getattr(ann, "__name__", str(ann))


def _default(field) -> str:
    if field.default is PydanticUndefined:
        if field.default_factory is not None:
            return "(section defaults)"
        return "**required**"
    if field.default is None:
        return "—"
    return f"`{field.default}`"


def _rows(model: type[BaseModel], prefix: str, out: list[str], seen_variant: str = "") -> None:
    for name, field in model.model_fields.items():
        if seen_variant and name in ("type", "policy"):
            continue
        path = f"{prefix}{name}"
        subs = _models_in(field.annotation)
        desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
        if len(subs) > 1:
            out.append(f"| `{path}` | one of the variants below | {_default(field)} | {desc} |")
            for sub in subs:
                tag_field = sub.model_fields.get("type") or sub.model_fields.get("policy")
                tag_name = "type" if "type" in sub.model_fields else "policy"
                tag = tag_field.default if tag_field is not None else sub.__name__
                out.append(f"| `{path}.{tag_name}: {tag}` | variant | | {(sub.__doc__ or '').strip().splitlines()[0] if sub.__doc__ else ''} |")
                _rows(sub, f"{path}.", out, seen_variant=str(tag))
        elif len(subs) == 1 and _type_name(field.annotation) == "section":
            _rows(subs[0], f"{path}.", out)
        else:
            out.append(f"| `{path}` | {_type_name(field.annotation)} | {_default(field)} | {desc} |")


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

"""YAML as scenario and plan authors expect it: `1e3` is a number, and a key given twice
is an error rather than a silent overwrite.

PyYAML follows YAML 1.1, where a float needs a dot (`1e3` is the string "1e3", which the
strict configs then refuse as "not a number"), and a repeated key keeps its last value,
so a second `model:` block silently replaces the first.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from simulator.errors import ConfigError, not_utf8

# YAML 1.2's core-schema floats that YAML 1.1 reads as strings: an exponent with no dot.
_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$")


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping names the same key twice."""


class _ScenarioLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise DuplicateKeyError(
                    None, None, f"the key {key!r} is given twice (first at line {seen[key] + 1}); "
                    "the second would silently replace the first", key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


_ScenarioLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))


def read_yaml_text(path: Path, source: str) -> str:
    """A scenario or plan file's text. One that is not UTF-8 (an editor's UTF-16 or Latin-1
    save, a picture passed by mistake) is named as such rather than ending in a traceback."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(not_utf8(exc), where=source,
                          fix="save the file as UTF-8 (or pass the YAML file you meant)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", where=source,
                          fix="check the path and its permissions") from None


def load_yaml(text: str):
    """Parse scenario/plan YAML; raises yaml.YAMLError (with a line mark) on bad input."""
    return yaml.load(text, Loader=_ScenarioLoader)  # a SafeLoader subclass: no arbitrary objects


def yaml_error(exc: yaml.YAMLError, source: str) -> ConfigError:
    """A parse failure as a user-facing error at its line."""
    mark = getattr(exc, "problem_mark", None)
    if "simple key" in str(getattr(exc, "context", "")) and getattr(exc, "context_mark", None):
        mark = exc.context_mark  # a key without its ':' is found a line late; name the key's line
    where = f"{source}:{mark.line + 1}" if mark else source
    fix = ("keep one of them (merge their fields)" if isinstance(exc, DuplicateKeyError)
           else "fix the YAML syntax at that line (indentation, a missing ':')")
    return ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", where=where, fix=fix)

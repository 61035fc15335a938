"""Name lookup shared by the catalogs: aliases, normalised keys and did-you-mean errors."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from simulator.errors import CatalogError

T = TypeVar("T")
#: The most entries an unknown-name error lists in full (the model catalog has more).
LISTED_IN_ERRORS = 40


class AliasIndex(Generic[T]):
    """Maps every alias of every entry (normalised by `key`) to its canonical name."""

    def __init__(self, kind: str, entries: dict[str, T], aliases: Callable[[T], Iterable[str]],
                 key: Callable[[str], str], *, cutoff: float, fix: str, field: str):
        self.kind = kind
        self.field = field  # the scenario field that names an entry, for error messages
        self.entries = entries
        self.key = key
        self.cutoff = cutoff
        self.fix = fix
        self.index: dict[str, str] = {}
        for name, entry in entries.items():
            for alias in aliases(entry):
                k = key(alias)
                if self.index.get(k, name) != name:
                    raise RuntimeError(f"{kind} alias {alias!r} is ambiguous")
                self.index[k] = name

    def get(self, name: str) -> T:
        canonical = self.index.get(self.key(name))
        if canonical is not None:
            return self.entries[canonical]
        close = difflib.get_close_matches(self.key(name), list(self.index), n=3, cutoff=self.cutoff)
        guesses = list(dict.fromkeys(self.index[k] for k in close))
        # With a guess, the guess is the help; without one, the whole list is, unless it is
        # too long to read in an error (the fix names the command that lists it).
        known = (f"did you mean {' or '.join(repr(g) for g in guesses)}?" if guesses
                 else f"none is close among the catalog's {len(self.entries)} {self.kind}s"
                 if len(self.entries) > LISTED_IN_ERRORS else f"known {self.kind}s: {', '.join(sorted(self.entries))}")
        raise CatalogError(f"unknown {self.kind} {name!r}; {known}", where=self.field, fix=self.fix)

"""The consoles the command lines print to.

rich lays a table out for 80 columns when output is not a terminal (a pipe, a log file,
CI), which folds paths and table cells mid-word; 120 keeps them whole there. A terminal
keeps its own width, and `COLUMNS` (read when printing) still wins.
"""

from __future__ import annotations

import os
import sys
import time

from rich.console import Console, ConsoleDimensions

PIPED_WIDTH = 120


class _PipeWideConsole(Console):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # rich freezes COLUMNS into the width when a console is made; read it when printing,
        # so a console made once per process follows a COLUMNS set later.
        if kwargs.get("width") is None:
            self._width = None

    def _size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)
        if self._width is None and not self.is_terminal and "COLUMNS" not in os.environ:
            return ConsoleDimensions(PIPED_WIDTH, size.height)
        return size

    size = property(_size, Console.size.fset)


def make_console(stderr: bool = False) -> Console:
    return _PipeWideConsole(stderr=stderr)


def widen_piped_help() -> None:
    """typer lays `--help` out for 80 columns in a pipe too, and cuts long words there
    (`dotted.path=valu…`); give it the tables' width unless a terminal or COLUMNS says."""
    try:
        import typer.rich_utils as help_layout
    except ImportError:  # another typer: its own layout stands
        return
    if (getattr(help_layout, "MAX_WIDTH", 0) is None and "COLUMNS" not in os.environ
            and not sys.stdout.isatty()):
        help_layout.MAX_WIDTH = PIPED_WIDTH


#: Seconds between two progress lines where stderr is no terminal (a log file, CI).
PLAIN_PROGRESS_EVERY_S = 30.0


class PlainProgress:
    """Progress as a line every PLAIN_PROGRESS_EVERY_S seconds, for a stderr that is no
    terminal: rich draws no bar there, and a ten-minute run would say nothing until its end."""

    def __init__(self, console: Console, label: str, unit: str):
        self.console, self.label, self.unit = console, label, unit
        self.start = self.last = time.perf_counter()

    def __call__(self, done: int, total: int | None, what: str = "") -> None:
        now = time.perf_counter()
        if now - self.last < PLAIN_PROGRESS_EVERY_S:
            return
        self.last = now
        of = f"/{total:,}" if total else ""
        self.console.print(f"{self.label}: {done:,}{of} {self.unit} after {now - self.start:.0f} s"
                           + (f" ({what})" if what else ""), highlight=False, soft_wrap=True)

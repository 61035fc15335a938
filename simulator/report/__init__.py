"""Per-run report: PNG figures plus one self-contained report.html."""

from simulator.report.writer import write_report

__all__ = ["write_report"]

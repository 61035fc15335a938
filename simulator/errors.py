"""User-facing errors: each carries where the problem is, what is wrong and how to fix it.

The CLI prints these as one message and exits non-zero, without a traceback.
"""

from __future__ import annotations


class ServesimError(Exception):
    """An error caused by user input, printed without a traceback."""

    def __init__(self, message: str, *, where: str | None = None, fix: str | None = None):
        self.message = message
        self.where = where
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.where}: {self.message}" if self.where else self.message
        return f"{head}\n  fix: {self.fix}" if self.fix else head


class ConfigError(ServesimError):
    """The scenario (or an override) is invalid."""


class CatalogError(ServesimError):
    """An unknown GPU or model name, or an unreadable model config."""


class TraceError(ServesimError):
    """A trace file is missing or has a malformed row."""


class ExpertSplitError(ConfigError):
    """vLLM cannot slice these experts over this many GPUs by width (block-quantised
    weights); expert parallelism can place them whole."""


class DoesNotFitError(ServesimError):
    """The model (weights + runtime) does not fit in GPU memory for this parallelism."""


class KVBelowMaxModelLenError(DoesNotFitError):
    """The weights fit, but the KV cache holds fewer tokens than max_model_len (vLLM
    refuses to start); `capacity_tokens` is the longest max_model_len that would start."""

    def __init__(self, message: str, *, capacity_tokens: int, where: str | None = None, fix: str | None = None):
        super().__init__(message, where=where, fix=fix)
        self.capacity_tokens = capacity_tokens


def not_utf8(exc: UnicodeDecodeError) -> str:
    """Why a file's bytes are not text, in the words every reader of user files uses."""
    return f"not UTF-8 text (byte {exc.start} is 0x{exc.object[exc.start]:02x})"


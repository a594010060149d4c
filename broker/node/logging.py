"""structlog set-up: JSON lines when stderr is not a terminal, readable lines when it is."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure(log_format: str | None, log_level: str) -> None:
    fmt = log_format or ("console" if sys.stderr.isatty() else "json")
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[log_level]),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def summarize(message: Any, limit: int = 2000) -> str:
    """A request or response for a DEBUG line: its fields, with byte strings (record batches,
    member metadata) shown by size and long arrays cut, at most `limit` characters."""
    out: list[str] = []
    budget = [limit]

    def emit(text: str) -> bool:
        out.append(text)
        budget[0] -= len(text)
        return budget[0] > 0

    def walk(value: Any) -> bool:
        struct = getattr(value, "_struct", None)
        if struct is not None:
            if not emit(type(value).__name__ + "("):
                return False
            separator = ""
            for f in struct._fields:
                if not hasattr(value, f.name) or (isinstance(version, int) and not f.for_version_q(version)):
                    continue
                if not emit(separator + f.name + "=") or not walk(getattr(value, f.name)):
                    return False
                separator = ", "
            return emit(")")
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple (e.g. protocol/commit_codec.py)
            if not emit(type(value).__name__ + "("):
                return False
            for i, name in enumerate(value._fields):
                if not emit((", " if i else "") + name + "=") or not walk(getattr(value, name)):
                    return False
            return emit(")")
        if isinstance(value, (bytes, bytearray, memoryview)):
            return emit(f"<{len(value)} bytes>")
        if isinstance(value, (list, tuple)):
            if not emit("["):
                return False
            for i, item in enumerate(value):
                if i == 20:
                    return emit(f", ... {len(value)} items]")
                if (i and not emit(", ")) or not walk(item):
                    return False
            return emit("]")
        return emit(repr(value))

    version = getattr(message, "version", None)  # fields absent from this version are not shown
    walk(message)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 3] + "..."

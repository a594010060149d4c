"""What a command gives back: JSON for scripts, aligned tables for people, and an exit code.

With `--output json` everything goes to stdout as one JSON document, errors included: a result
carries its `errors` (a list, empty on success); a command that fails as a whole prints
`{"error": {"message": ..., "exit_code": N}}`. The exit codes are the same in both formats.
Tables go to stdout and error lines to stderr; a table with no rows prints nothing (no header
before an error).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from broker.admin_cli import OK


@dataclass
class Result:
    data: dict[str, Any]  # the --output json document
    text: str  # the table(s) printed by default
    code: int = OK
    errors: list[str] = field(default_factory=list)  # stderr lines in table mode, `errors` in JSON


class CommandError(Exception):
    """A command fails as a whole: message to stderr, this exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value) if value else "-"
    return str(value)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """Columns padded to their widest cell, as Kafka's tools print them ("" without rows)."""
    if not rows:
        return ""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = [" ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [" ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def emit(result: Result, output: str) -> int:
    if output == "json":
        sys.stdout.write(json.dumps({**result.data, "errors": result.errors}, indent=2, sort_keys=False) + "\n")
        return result.code
    if result.text.strip():
        sys.stdout.write(result.text.rstrip("\n") + "\n")
    for error in result.errors:
        sys.stderr.write(f"Error: {error}\n")
    return result.code


def fail(message: str, code: int, output: str) -> int:
    """A command that fails as a whole: a JSON document on stdout, or an error line on stderr."""
    if output == "json":
        sys.stdout.write(json.dumps({"error": {"message": message, "exit_code": code}}, indent=2) + "\n")
    else:
        sys.stderr.write(f"Error: {message}\n")
    return code

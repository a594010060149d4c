"""The error codes a response carries, read from the response object without encoding it.

Kafka counts, per API and error, every error code in a response (`AbstractResponse.errorCounts`:
a Produce answer with three failed partitions counts three). kaflet does the same for the
codes other than NONE. A response object is walked by a function compiled once per (response
class, version) from kafka-python's schema: it visits only the arrays that lead to an
`error_code` field valid in that version, so a Heartbeat answer costs one attribute read and an
OffsetCommit answer one per partition. Handlers that answer with bodies they encoded themselves
(Produce, Fetch, Metadata) put their codes on `RequestContext.errors` instead, only when there
are some, so the successful path costs nothing there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Walker = Callable[[Any], list[int] | None]

# (response class, version) -> walker; read directly by the request hook (requests.py).
WALKERS: dict[tuple[type, int], Walker] = {}


def error_codes(response: Any, version: int) -> list[int] | None:
    """The non-zero error codes of `response` as encoded at `version`, or None if there are none."""
    key = (type(response), version)
    walker = WALKERS.get(key)
    if walker is None:
        walker = WALKERS[key] = compile_walker(type(response), version)
    return walker(response)


def compile_walker(cls: type, version: int) -> Walker:
    """Generate `walk(response)` for `cls` at `version` (see the module docstring)."""
    struct = getattr(cls, "_struct", None)
    lines: list[str] = []
    if struct is not None:
        _emit(struct, "r", version, lines, 1)
    if not lines:
        return _no_errors
    source = "def walk(r):\n    out = None\n" + "\n".join(lines) + "\n    return out\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<error walker {cls.__name__} v{version}>", "exec"), namespace)
    walker: Walker = namespace["walk"]
    return walker


def _no_errors(response: Any) -> None:
    return None


def _emit(struct: Any, var: str, version: int, lines: list[str], depth: int) -> bool:
    """Append the statements reading `var`'s error codes; False if the struct has none."""
    pad = "    " * depth
    found = False
    for f in struct._fields:
        if not f.for_version_q(version):
            continue
        if f.name == "error_code" and not (f.is_struct() or f.is_array()):
            lines.append(f"{pad}e = {var}.error_code")
            lines.append(f"{pad}if e:")
            lines.append(f"{pad}    if out is None:")
            lines.append(f"{pad}        out = [e]")
            lines.append(f"{pad}    else:")
            lines.append(f"{pad}        out.append(e)")
            found = True
        elif f.is_struct_array():
            item = f"x{depth}"
            body: list[str] = []
            if _emit(f, item, version, body, depth + 1):
                lines.append(f"{pad}for {item} in {var}.{f.name} or ():")
                lines.extend(body)
                found = True
        elif f.is_struct():
            child = f"s{depth}"
            body = []
            if _emit(f, child, version, body, depth + 1):
                lines.append(f"{pad}{child} = {var}.{f.name}")
                lines.append(f"{pad}if {child} is not None:")
                lines.extend(body)
                found = True
    return found

"""Which path kaflet runs: the compiled fast path (protocol/_speedups.c) or pure Python.

The extension is built by `pip install` where a C compiler exists (setup.py) and is optional:
without it every caller uses the pure-Python twin of each function, which defines the
behaviour (tests/unit/test_speedups.py checks both agree). KAFLET_PURE_PYTHON=1 forces the
pure path, read once at import; `kaflet --version` and the ready log line name the path in use.
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path
from types import ModuleType

SOURCE = Path(__file__).with_name("_speedups.c")


def built_from(module: ModuleType, source: Path = SOURCE) -> bool:
    """True when `module` was built from `source` as it is now (setup.py stores its CRC-32 in the
    module). An installed wheel carries no C source: nothing to compare, the module is used."""
    try:
        data = source.read_bytes()
    except OSError:
        return True
    return getattr(module, "source_digest", None) == f"{zlib.crc32(data):08x}"


speedups: ModuleType | None = None
if os.environ.get("KAFLET_PURE_PYTHON", "") in ("", "0"):
    try:
        from protocol import _speedups as speedups
    except ImportError:  # not built here (no compiler at install time): pure Python
        speedups = None
    if speedups is not None and not built_from(speedups):
        # A checkout updated without a rebuild: the module may not match its Python callers.
        print(
            "kaflet: protocol/_speedups was built from another protocol/_speedups.c; running pure Python "
            "until it is rebuilt (make, or pip install -e .)",
            file=sys.stderr,
        )
        speedups = None

PATH = "compiled" if speedups is not None else "pure-python"

"""Which path kaflet runs: the compiled fast path (protocol/_speedups.c) or pure Python.

The extension is built by `pip install` where a C compiler exists (setup.py) and is optional:
without it every caller uses the pure-Python twin of each function, which defines the
behaviour (tests/unit/test_speedups.py checks both agree). KAFLET_PURE_PYTHON=1 forces the
pure path, read once at import; `kaflet --version` and the ready log line name the path in use.
"""

from __future__ import annotations

import os
from types import ModuleType

speedups: ModuleType | None = None
if os.environ.get("KAFLET_PURE_PYTHON", "") in ("", "0"):
    try:
        from protocol import _speedups as speedups
    except ImportError:  # not built here (no compiler at install time): pure Python
        speedups = None

PATH = "compiled" if speedups is not None else "pure-python"

"""Command-line tools of the suite that are not Python packages, found where `make test` puts them.

promtool: on PATH where Prometheus is installed, else unpacked by `make promtool` into
`$KAFLET_CACHE/bin` from Debian's prometheus package (downloaded, not installed: installing it
would enable prometheus.service at boot). A test that needs it and cannot find it fails with what
to do, never skips.
"""

from __future__ import annotations

import shutil

from tests.support.jvm import cache_dir


def promtool() -> str:
    found = shutil.which("promtool") or shutil.which("promtool", path=str(cache_dir() / "bin"))
    if found is None:
        raise AssertionError(f"promtool is neither on PATH nor in {cache_dir() / 'bin'}: run `make promtool` (make test does)")
    return found

"""The optional compiled fast path (protocol/_speedups.c): built by `pip install` where a C
compiler and Python's headers exist, skipped with one line where not (kaflet then runs its
pure-Python twins; protocol/compiled.py says which path is in use). Everything else about the
package is in pyproject.toml.

With KAFLET_PURE_PYTHON=1 in the environment nothing is compiled, so `pip wheel` builds the
pure-Python wheel, kaflet-VERSION-py3-none-any.whl, which installs on any Python 3.11+ and
platform; without it the wheel holds the extension and is tagged for the Python and platform that
built it (docs/operations.md).
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """A failed build (no compiler, no headers) leaves kaflet pure Python instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any failure means: no compiled path
            print(f"kaflet: compiled fast path not built ({exc}); using pure Python", file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"kaflet: {ext.name} not built ({exc}); using pure Python", file=sys.stderr)


SOURCE = Path(__file__).parent / "protocol" / "_speedups.c"
# The digest of the C source the module is built from: protocol/compiled.py refuses a module
# built from another version of it (a `git pull` without a rebuild) and runs pure Python instead.
DIGEST = f"{zlib.crc32(SOURCE.read_bytes()):08x}"

PURE = os.environ.get("KAFLET_PURE_PYTHON", "") not in ("", "0")

setup(
    ext_modules=[]
    if PURE
    else [
        Extension(
            "protocol._speedups",
            ["protocol/_speedups.c"],
            extra_compile_args=["-O2"],
            define_macros=[("KAFLET_SOURCE_DIGEST", f'"{DIGEST}"')],
            optional=True,
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)

"""The optional compiled fast path (protocol/_speedups.c, issue 17): built by `pip install` where
a C compiler and Python's headers exist, silently skipped where not (kaflet then runs its
pure-Python twins; protocol/compiled.py says which path is in use). Everything else about the
package is in pyproject.toml."""

from __future__ import annotations

import sys

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


setup(
    ext_modules=[Extension("protocol._speedups", ["protocol/_speedups.c"], extra_compile_args=["-O2"], optional=True)],
    cmdclass={"build_ext": OptionalBuildExt},
)

"""A compiled module built from another version of protocol/_speedups.c (a checkout pulled without
a rebuild) is refused and kaflet runs pure Python, instead of calling C functions whose arguments
changed. protocol/compiled.py compares the digest setup.py stored in the module with the source."""

from __future__ import annotations

import importlib
import importlib.util
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from protocol.compiled import SOURCE, built_from


def _digest(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def test_a_module_built_from_this_source_is_used(tmp_path: Path) -> None:
    source = tmp_path / "_speedups.c"
    source.write_bytes(b"int x;\n")
    assert built_from(SimpleNamespace(source_digest=_digest(b"int x;\n")), source)  # type: ignore[arg-type]


def test_a_module_built_from_another_source_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "_speedups.c"
    source.write_bytes(b"int y;\n")
    assert not built_from(SimpleNamespace(source_digest=_digest(b"int x;\n")), source)  # type: ignore[arg-type]
    assert not built_from(SimpleNamespace(), source)  # type: ignore[arg-type]  (built before digests existed)


def test_without_the_source_the_module_is_used(tmp_path: Path) -> None:
    # an installed wheel carries the module, not the C file
    assert built_from(SimpleNamespace(source_digest="whatever"), tmp_path / "absent.c")  # type: ignore[arg-type]


def test_the_built_module_carries_the_digest_of_its_source() -> None:
    if importlib.util.find_spec("protocol._speedups") is None:
        pytest.skip("the compiled path is not built here (no C compiler at install time)")
    module = importlib.import_module("protocol._speedups")
    assert module.source_digest == _digest(SOURCE.read_bytes())
    assert built_from(module)

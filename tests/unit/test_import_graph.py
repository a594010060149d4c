"""The layout's dependency rules (docs/architecture.md), checked on the import graph of broker/,
protocol/ and storage/ as the source states it (tests/support/import_graph.py): every import
counts, lazy ones inside functions and `if TYPE_CHECKING:` ones included."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import import_graph as g

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph() -> list[g.Edge]:
    return g.edges(ROOT)


def test_protocol_and_storage_import_nothing_above_them(graph: list[g.Edge]) -> None:
    assert g.layering_violations(graph) == []


def test_nothing_below_the_server_imports_it(graph: list[g.Edge]) -> None:
    """Lower layers get narrow interfaces passed in, never `Broker`: only the process and what
    composes brokers (the CLI, embedding, the in-process cluster) import broker/server.py."""
    assert g.upward_imports(graph) == []
    importers = {e.importer for e in graph if e.imported == "broker.server"}
    assert importers and all(g.matches(m, g.COMPOSERS) for m in importers)


def test_no_import_circle_passes_through_the_api_registry(graph: list[g.Edge]) -> None:
    assert g.registry_cycles(graph) == []


def test_brokers_top_holds_only_the_process_modules() -> None:
    assert g.loose_top_level_modules(ROOT) == []


# -- the checker itself can fail ------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in ("broker", "protocol", "storage"):
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").touch()
    return root


def test_the_checker_sees_lazy_type_checking_and_relative_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "broker/server.py": "from broker.network import registry\n",
            "broker/network/__init__.py": "",
            "broker/network/registry.py": "from protocol import codec\n",
            "broker/runtime/__init__.py": "",
            "broker/runtime/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from broker.server import Broker\n",
            "broker/runtime/b.py": "def f():\n    import broker.server\n",
            "broker/runtime/c.py": "from . import a\nfrom .. import server\n",
            "protocol/codec.py": "import os\n",
        },
    )
    found = {(e.importer, e.imported, e.type_checking) for e in g.edges(root)}
    assert ("broker.runtime.a", "broker.server", True) in found
    assert ("broker.runtime.b", "broker.server", False) in found
    assert ("broker.runtime.c", "broker.runtime.a", False) in found
    assert ("broker.runtime.c", "broker.server", False) in found
    assert ("broker.network.registry", "protocol.codec", False) in found
    upward = g.upward_imports(g.edges(root))
    assert [line.split(":")[0] for line in upward] == [
        "broker.runtime.a -> broker.server (line 3, TYPE_CHECKING)",
        "broker.runtime.b -> broker.server (line 2)",
        "broker.runtime.c -> broker.server (line 2)",
    ]


def test_the_checker_finds_a_planted_circle_layering_and_loose_module(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "broker/server.py": "import broker.apis\n",
            "broker/apis/__init__.py": "from broker.apis import fetch\n",
            "broker/apis/fetch.py": "from broker.network.registry import api\n",
            "broker/network/__init__.py": "",
            "broker/network/registry.py": "from broker.network import connection\n",
            "broker/network/connection.py": "from broker.apis import fetch\n",
            "broker/datadir.py": "",
            "storage/log.py": "from broker.network import connection\n",
            "protocol/records.py": "from storage import log\n",
        },
    )
    found = g.edges(root)
    assert g.registry_cycles(found) == [["broker.apis.fetch", "broker.network.connection", "broker.network.registry"]]
    assert len(g.layering_violations(found)) == 2
    assert g.loose_top_level_modules(root) == ["datadir.py"]


def test_the_checker_fails_on_the_real_tree_with_one_planted_upward_import(tmp_path: Path) -> None:
    for package in g.PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    assert g.upward_imports(g.edges(tmp_path)) == []
    context = tmp_path / "broker" / "runtime" / "context.py"
    context.write_text(context.read_text() + "\nif TYPE_CHECKING:\n    from broker.server import Broker\n")
    assert [line.split(" (")[0] for line in g.upward_imports(g.edges(tmp_path))] == ["broker.runtime.context -> broker.server"]

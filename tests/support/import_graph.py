"""The import graph of kaflet's packages, read from the source (ast), and the layout rules it must
keep (docs/architecture.md, "Dependency rules").

Every import counts: at module level, inside a function (imported lazily, but imported all the
same), and under `if TYPE_CHECKING:` (a type a module names is a dependency the reader must
follow, and an import circle of annotations is still a circle). An import names the deepest
module it reaches: `from broker.runtime import errors` is an edge to broker.runtime.errors.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

PACKAGES = ("broker", "protocol", "storage")

# The process and what composes brokers: the only modules that may import broker.server (and
# each other). Everything else in broker/ is below the server and takes narrow interfaces.
COMPOSERS = (
    "broker",  # the package: `from broker import Broker, Config` (lazy)
    "broker.__main__",
    "broker.cli",
    "broker.server",
    "broker.embed",
    "broker.embed.*",  # Broker.in_thread / in_subprocess
    "broker.cluster.cluster",  # a Cluster of Brokers in one process
    "broker.cluster.thread",
    "broker.cluster.handle",
    "broker.cluster.cli",
    "broker.cluster.pytest_plugin",
    "broker.admin_cli",
    "broker.admin_cli.*",
    "broker.security.cli",  # `kaflet certs|users|acls|configs`: commands, like admin_cli (broker.cli's grammar)
    "broker.security.cli.*",
)
# The API registry and the modules that register into it: no import circle may pass through them.
REGISTRY = ("broker.network.registry", "broker.apis", "broker.apis.*")
# What broker/'s top may hold: the process's own modules.
TOP_LEVEL = frozenset({"__init__.py", "__main__.py", "cli.py", "server.py"})


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int
    type_checking: bool

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} (line {self.line}{', TYPE_CHECKING' if self.type_checking else ''})"


def module_names(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of `packages` under `root`."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def edges(root: Path, packages: Iterable[str] = PACKAGES) -> list[Edge]:
    """Every import of one of `packages` by a module of `packages`."""
    modules = module_names(root, packages)

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found: list[Edge] = []
    for importer, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        type_checking = _type_checking_nodes(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's package
                    package = importer.split(".") if is_package else importer.split(".")[:-1]
                    package = package[: len(package) - node.level + 1]
                    base = ".".join([*package, base] if base else package)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            else:
                continue
            for target in targets:
                imported = resolve(target)
                if imported is not None and imported != importer:
                    found.append(Edge(importer, imported, node.lineno, id(node) in type_checking))
    return found


def matches(module: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(module, p) for p in patterns)


def layering_violations(found: Iterable[Edge]) -> list[str]:
    """protocol imports neither storage nor broker; storage does not import broker."""
    out = []
    for e in found:
        top, imported_top = e.importer.split(".")[0], e.imported.split(".")[0]
        if (top == "protocol" and imported_top in ("storage", "broker")) or (top == "storage" and imported_top == "broker"):
            out.append(f"{e}: {top}/ may not import {imported_top}/")
    return out


def upward_imports(found: Iterable[Edge], composers: Iterable[str] = COMPOSERS) -> list[str]:
    """Modules below the server that import it, or anything that composes brokers."""
    composers = tuple(composers)
    return [
        f"{e}: below broker/server.py, it may not import {e.imported}"
        for e in found
        if e.importer.startswith("broker") and not matches(e.importer, composers) and matches(e.imported, composers)
    ]


def cycles(found: Iterable[Edge]) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in found:
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:  # Tarjan's algorithm, without recursion
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def registry_cycles(found: Iterable[Edge], registry: Iterable[str] = REGISTRY) -> list[list[str]]:
    """Import circles through the API registry or a module that registers an API."""
    registry = tuple(registry)
    return [c for c in cycles(found) if any(matches(m, registry) for m in c)]


def loose_top_level_modules(root: Path) -> list[str]:
    """Modules at broker/'s top that are not the process's own."""
    return sorted(p.name for p in (root / "broker").glob("*.py") if p.name not in TOP_LEVEL)

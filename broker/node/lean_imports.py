"""Import only the parts of kafka-python and aiokafka the broker uses.

Both packages' `__init__` modules import their whole client (admin, consumer, producer,
networking): about 0.3 s of start-up that a broker never uses. The broker needs only
`kafka.protocol` (the codec) and `aiokafka.record` (the compiled batch reader); crc32c's
`__init__` looks up its own version through importlib.metadata (which imports the email
package) while the broker needs only its extension. For the `serve` process these packages
are registered without running their `__init__`, so importing a submodule loads just that
submodule and what it imports itself. Processes that use the clients (tests, the admin CLI)
never call this.

kafka-python's message packages (`kafka.protocol.admin`, `.consumer`, `.metadata`,
`.producer`) build every message class of every submodule when imported (each class parses
its JSON schema: ~1 ms apiece), while the broker serves only some of those APIs. In `serve`
they become lazy packages: `from kafka.protocol.admin import X` imports only the submodule
that defines X (found from the submodules' `__all__` lists, read as text), so the classes of
APIs kaflet does not serve (ACLs, quotas, SCRAM users, ...) are never built.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from typing import Any

PACKAGES = ("kafka", "aiokafka", "crc32c")


def skip_client_package_inits() -> None:
    for name in PACKAGES:
        if name in sys.modules:
            continue  # already imported whole: nothing to save, nothing to break
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            continue
        sys.modules[name] = importlib.util.module_from_spec(spec)
    for name in LAZY_MESSAGE_PACKAGES:
        _lazy_package(name)


LAZY_MESSAGE_PACKAGES = ("kafka.protocol.admin", "kafka.protocol.consumer", "kafka.protocol.metadata", "kafka.protocol.producer")
_ALL = re.compile(r"^__all__\s*=\s*\[(.*?)\]", re.S | re.M)
_QUOTED = re.compile(r"['\"](\w+)['\"]")


def _lazy_package(name: str) -> None:
    """Register package `name` so that an attribute imports just the submodule defining it."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return
    where: dict[str, str] = {}  # exported name -> submodule
    for directory in spec.submodule_search_locations:
        for entry in sorted(os.listdir(directory)):
            if not entry.endswith(".py") or entry.startswith("_"):
                continue
            try:
                with open(os.path.join(directory, entry), encoding="utf-8") as f:
                    found = _ALL.search(f.read())
            except OSError:
                continue
            if found is None:
                return  # a layout this shim does not know: leave the package as it is
            for exported in _QUOTED.findall(found.group(1)):
                where.setdefault(exported, entry[:-3])
    module = importlib.util.module_from_spec(spec)

    def __getattr__(attr: str) -> Any:
        sub = where.get(attr)
        if sub is None:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        value = getattr(importlib.import_module(f"{name}.{sub}"), attr)
        setattr(module, attr, value)
        return value

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    module.__all__ = list(where)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)

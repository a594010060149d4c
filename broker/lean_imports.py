"""Import only the parts of kafka-python and aiokafka the broker uses.

Both packages' `__init__` modules import their whole client (admin, consumer, producer,
networking): about 0.3 s of start-up that a broker never uses. The broker needs only
`kafka.protocol` (the codec) and `aiokafka.record` (the compiled batch reader); crc32c's
`__init__` looks up its own version through importlib.metadata (which imports the email
package) while the broker needs only its extension. For the `serve` process these packages
are registered without running their `__init__`, so importing a submodule loads just that
submodule and what it imports itself. Processes that use the clients (tests, the admin CLI)
never call this.
"""

from __future__ import annotations

import importlib.util
import sys

PACKAGES = ("kafka", "aiokafka", "crc32c")


def skip_client_package_inits() -> None:
    for name in PACKAGES:
        if name in sys.modules:
            continue  # already imported whole: nothing to save, nothing to break
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            continue
        sys.modules[name] = importlib.util.module_from_spec(spec)

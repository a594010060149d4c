"""kaflet: a lightweight Kafka-compatible broker whose heart is Kafka's group protocol.

The public names, each importable from `broker` itself:

- `Broker`: a broker on your event loop (`async with Broker() as b`), in a thread
  (`Broker.in_thread()`) or in a child process (`Broker.in_subprocess()`);
- `Config`: every setting of `kaflet serve`, as fields;
- `Cluster`: several brokers in one process (`kaflet serve --brokers N`);
- `ChaosHandle`: a broker's chaos operations from outside its event loop, over its control API
  (`ChaosHandle.over_http("127.0.0.1:9644")`) or on an embedded broker's thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.cluster.cluster import Cluster
    from broker.cluster.handle import ChaosHandle
    from broker.config import Config
    from broker.server import Broker

__all__ = ["Broker", "ChaosHandle", "Cluster", "Config"]

# name -> module, imported on first use, so that `python -m broker` can trim imports before the
# server's modules load.
_LAZY = {
    "Broker": "broker.server",
    "ChaosHandle": "broker.cluster.handle",
    "Cluster": "broker.cluster.cluster",
    "Config": "broker.config",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'broker' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])

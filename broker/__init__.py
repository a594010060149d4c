"""kaflet: a lightweight Kafka-compatible broker whose heart is Kafka's group protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.config import Config
    from broker.server import Broker

__all__ = ["Broker", "Config"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `python -m broker` can trim imports before the server's modules load.
    if name == "Broker":
        from broker.server import Broker

        return Broker
    if name == "Config":
        from broker.config import Config

        return Config
    raise AttributeError(name)

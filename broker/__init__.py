"""kaflet: a lightweight Kafka-compatible broker whose heart is Kafka's group protocol."""

from broker.config import Config
from broker.server import Broker

__all__ = ["Broker", "Config"]

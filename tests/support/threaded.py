"""The suite's background-thread brokers are the public helper's (broker/embed/thread.py)."""

from broker.embed.thread import BrokerThread

__all__ = ["BrokerThread"]

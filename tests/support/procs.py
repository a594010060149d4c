"""The suite's broker processes are the public helper's (broker/embed/process.py)."""

from broker.embed.process import BrokerProcess

__all__ = ["BrokerProcess"]

"""Embedding kaflet from any code: a broker on a background thread, or in a child process.

- `Broker.in_thread()` (BrokerThread): the broker runs on its own event loop in a daemon thread,
  so synchronous clients (confluent-kafka, kafka-python) and other event loops (aiokafka under
  `asyncio.run`) can talk to it from the calling thread. Nothing blocks the broker's loop.
- `Broker.in_subprocess()` (BrokerProcess): `kaflet serve` in a child process, ready once its
  `broker ready` log line appears; stopped by SIGTERM, or killed (crash tests).

`async with Broker() as broker:` remains the way for asyncio code whose clients are async too:
a blocking client called on the broker's own loop would stall it.

Both helpers default to ephemeral ports (listen and metrics) and, without a data dir, to a
temporary one removed at stop, so that they never collide with a running broker.
"""

from broker.embed.process import BrokerProcess
from broker.embed.thread import BrokerThread

__all__ = ["BrokerProcess", "BrokerThread"]

"""An exactly-once consume-transform-produce loop (confluent-kafka) in a process of its own.

`python -m tests.support.eos_loop '<json spec>'`: spec has bootstrap, group, transactional_id,
source, sink, and optionally pause_s (the pause between producing and committing each
transaction, so a test can kill the process inside a transaction). Each transaction carries
what one poll returned: its records, copied to the sink with the same key and value, and the
consumer's positions, sent with send_offsets_to_transaction. Events are JSON lines on stdout:
ready, assigned, produced (inside the transaction), committed, aborted, fatal. SIGTERM ends
the loop after the transaction in progress.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
    sys.stdout.flush()


def main(spec: dict[str, Any]) -> int:
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    consumer = Consumer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "group.id": spec["group"],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "transactional.id": spec["transactional_id"],
            "transaction.timeout.ms": 20000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    emit("ready")

    def on_assign(c: Any, parts: Any) -> None:
        emit("assigned", partitions=[p.partition for p in parts])

    consumer.subscribe([spec["source"]], on_assign=on_assign)
    pause = float(spec.get("pause_s", 0))
    while not stop[0]:
        msgs = consumer.consume(num_messages=int(spec.get("batch", 20)), timeout=0.2)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        try:
            for m in msgs:
                producer.produce(spec["sink"], key=m.key(), value=m.value())
            producer.flush(30)
            emit("produced", count=len(msgs), first=[m.partition() for m in msgs][:1], offsets=[(m.partition(), m.offset()) for m in msgs])
            if pause:
                time.sleep(pause)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            emit("committed", count=len(msgs))
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal():
                emit("fatal", error=str(error))
                return 2
            emit("aborted", error=str(error))
            producer.abort_transaction(30)
            # Rewind to the committed offsets: the records of the aborted transaction come again.
            committed = consumer.committed(consumer.assignment(), 30)
            for tp in committed:
                if tp.offset < 0:
                    tp.offset = OFFSET_BEGINNING
                consumer.seek(tp)
    consumer.close()
    emit("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))

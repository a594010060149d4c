"""The transaction index after a crash: a broker killed with SIGKILL recovers its partition logs
at start-up; the `.txnindex` beside each recovered segment is rebuilt from the log (here it is
even deleted before the restart), so read_committed consumers still drop aborted records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from storage.txn_index import ENTRY
from tests.clients.test_transactions_clients import consume_all
from tests.support.procs import BrokerProcess

TIMEOUT = 30


def test_txn_index_is_rebuilt_after_kill_9(broker_proc: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    data = tmp_path / "data"
    bp = broker_proc(data_dir=data)
    admin = AdminClient({"bootstrap.servers": bp.bootstrap})
    admin.create_topics([NewTopic("rc", 1, 1)])["rc"].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": bp.bootstrap, "transactional.id": "crash-idx"})
    producer.init_transactions(TIMEOUT)
    for i in range(3):
        producer.begin_transaction()
        producer.produce("rc", b"kept-%d" % i)
        producer.commit_transaction(TIMEOUT)
        producer.begin_transaction()
        producer.produce("rc", b"aborted-%d" % i)
        assert producer.flush(TIMEOUT) == 0
        producer.abort_transaction(TIMEOUT)
    indexes = list(data.rglob("rc-0/*.txnindex"))
    assert len(indexes) == 1 and len(indexes[0].read_bytes()) == 3 * ENTRY.size
    before = indexes[0].read_bytes()
    bp.kill()
    indexes[0].unlink()
    bp.restart()
    assert indexes[0].read_bytes() == before  # rebuilt, entry for entry
    values, positions = consume_all(bp.bootstrap, "rc", 1, "read_committed")
    assert values == [b"kept-0", b"kept-1", b"kept-2"] and positions == [12]

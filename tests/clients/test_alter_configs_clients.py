"""Real admin clients change topic configs (issue 11): the librdkafka AdminClient
(confluent-kafka: IncrementalAlterConfigs and AlterConfigs) and KafkaJS (AlterConfigs) make a
topic compacted and change its retention; DescribeConfigs from the same client shows the
change, and the new retention deletes what is older than it at once."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from tests.support.threaded import BrokerThread
from tests.support.waiting import wait_until

HOUR_AGO_MS = int(time.time() * 1000) - 3_600_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    from broker import Config

    with BrokerThread(Config(port=0, metrics=False, data_dir=str(tmp_path / "data"), offsets_partitions=3)) as b:
        yield b


@pytest.fixture(scope="module")
def kafkajs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with KafkaJS installed from npm (`make test` installs node and npm)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed: `make test` (apt-deps) installs nodejs and npm")
    root = tmp_path_factory.mktemp("kafkajs")
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", "kafkajs@2"], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return root


def earliest(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low)
    finally:
        consumer.close()


def produce_old(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=b"v", timestamp=HOUR_AGO_MS)
    assert producer.flush(30) == 0


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")  # the legacy API, on purpose
def test_librdkafka_admin_makes_a_topic_compacted_and_changes_its_retention(broker: BrokerThread) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    produce_old(broker.bootstrap, "orders", 5)
    resource = ConfigResource(
        "topic",
        "orders",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    described = admin.describe_configs([ConfigResource("topic", "orders")])
    configs = next(iter(described.values())).result(30)
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].value == "60000" and configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # The records are an hour old: the new retention removed them at once.
    assert earliest(broker.bootstrap, "orders") == 5
    assert broker.run(lambda b: b.logs.get("orders", 0).config.compact)
    # AlterConfigs (the legacy API) replaces the whole set: compact only, retention back to its default.
    legacy = ConfigResource("topic", "orders", set_config={"cleanup.policy": "compact"})
    for future in admin.alter_configs([legacy]).values():
        future.result(30)
    configs = next(iter(admin.describe_configs([ConfigResource("topic", "orders")]).values())).result(30)
    assert configs["cleanup.policy"].value == "compact" and configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # A refused change carries Kafka's message.
    bad = ConfigResource(
        "topic", "orders", incremental_configs=[ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)]
    )
    with pytest.raises(Exception, match="Not a number of type LONG"):
        next(iter(admin.incremental_alter_configs([bad]).values())).result(30)


KAFKAJS_SCRIPT = r"""
const { Kafka, ConfigResourceTypes, logLevel } = require('kafkajs')
const [bootstrap, topic, oldTs] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'kafkajs-admin', brokers: [bootstrap], logLevel: logLevel.ERROR })
async function main() {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, messages: [0, 1, 2].map(i => ({ key: 'k' + i, value: 'v', timestamp: oldTs })) })
  await producer.disconnect()
  await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
    configEntries: [{ name: 'cleanup.policy', value: 'compact,delete' }, { name: 'retention.ms', value: '120000' }] }] })
  const described = await admin.describeConfigs({ includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['cleanup.policy', 'retention.ms'] }] })
  const offsets = await admin.fetchTopicOffsets(topic)
  const entries = {}
  for (const e of described.resources[0].configEntries) entries[e.configName] = { value: e.configValue, isDefault: e.isDefault }
  console.log(JSON.stringify({ entries, low: offsets[0].low, high: offsets[0].high }))
  await admin.disconnect()
}
main().catch(e => { console.error(e); process.exit(1) })
"""


def test_kafkajs_admin_makes_a_topic_compacted_and_changes_its_retention(broker: BrokerThread, kafkajs: Path) -> None:
    script = kafkajs / "alter.js"
    script.write_text(KAFKAJS_SCRIPT)
    done = subprocess.run(
        ["node", str(script), broker.bootstrap, "payments", str(HOUR_AGO_MS)], capture_output=True, text=True, timeout=120, cwd=kafkajs
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["entries"]["cleanup.policy"] == {"value": "compact,delete", "isDefault": False}
    assert out["entries"]["retention.ms"] == {"value": "120000", "isDefault": False}
    assert (out["low"], out["high"]) == ("3", "3")  # the hour-old records are gone
    wait_until(
        lambda: broker.run(lambda b: b.topics.get("payments").configs) == {"cleanup.policy": "compact,delete", "retention.ms": "120000"}
    )

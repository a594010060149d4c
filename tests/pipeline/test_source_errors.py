"""Bad options fail at planning with an error naming the option; an unreachable broker names its address."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from pipeline.source.options import OptionError, parse_read, parse_write
from tests.pipeline.conftest import create_topic

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9"}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "t"}, False, r"option 'kafka.bootstrap.servers' must be specified"),
        ({**BOOT}, False, r"one of the options 'assign', 'subscribe', 'subscribePattern' must be specified"),
        ({**BOOT, "subscribe": "t", "assign": '{"t":[0]}'}, False, r"only one of the options .* got subscribe, assign"),
        ({**BOOT, "subscribe": " , "}, False, r"option 'subscribe' names no topic"),
        ({**BOOT, "subscribePattern": "("}, False, r"option 'subscribePattern' is not a valid regular expression"),
        ({**BOOT, "assign": "[0, 1]"}, False, r"option 'assign' must be a non-empty JSON object"),
        ({**BOOT, "assign": '{"t": ["0"]}'}, False, r"option 'assign': topic 't' must map to a list of partition numbers"),
        ({**BOOT, "assign": "{nope"}, False, r"option 'assign' is not valid JSON"),
        ({**BOOT, "subscribe": "t", "startingOffsets": "latest"}, False, r"'startingOffsets' cannot be 'latest' for batch"),
        ({**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, r"'startingOffsets' cannot be -1 \(latest\)"),
        ({**BOOT, "subscribe": "t", "endingOffsets": "earliest"}, False, r"'endingOffsets' cannot be 'earliest'"),
        ({**BOOT, "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, False, r"'endingOffsets' cannot be -2"),
        ({**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"0":-3}}'}, False, r"'startingOffsets': t-0 offset -3 is invalid"),
        ({**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"x":1}}'}, False, r"'startingOffsets': partition 'x' of topic 't'"),
        ({**BOOT, "subscribe": "t", "startingOffsets": "soon"}, False, r"option 'startingOffsets' is not valid JSON"),
        ({**BOOT, "subscribe": "t", "endingOffsets": "1"}, True, r"option 'endingOffsets' applies to batch queries only"),
        ({**BOOT, "subscribe": "t", "maxOffsetsPerTrigger": "10"}, False, r"'maxOffsetsPerTrigger' applies to streaming queries only"),
        ({**BOOT, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, r"'maxOffsetsPerTrigger' must be at least 1, got 0"),
        ({**BOOT, "subscribe": "t", "minPartitions": "many"}, False, r"option 'minPartitions' must be an integer, got 'many'"),
        ({**BOOT, "subscribe": "t", "includeHeaders": "yes"}, False, r"option 'includeHeaders' must be true or false"),
        ({**BOOT, "subscribe": "t", "failOnDataLoss": "1"}, False, r"option 'failOnDataLoss' must be true or false"),
        ({**BOOT, "subscribe": "t", "startingTimestamp": "noon"}, False, r"option 'startingTimestamp' must be a timestamp in ms"),
        (
            {**BOOT, "subscribe": "t", "startingOffsetsByTimestamp": '{"t":{"0":-5}}'},
            False,
            r"'startingOffsetsByTimestamp': t-0 timestamp -5",
        ),
        (
            {**BOOT, "subscribe": "t", "startingOffsetsByTimestampStrategy": "oldest"},
            False,
            r"'startingOffsetsByTimestampStrategy' must be",
        ),
        ({**BOOT, "subscribe": "t", "subscibe": "t"}, False, r"unknown option 'subscibe'"),
        ({**BOOT, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, False, r"Kafka option 'auto.offset.reset' is not supported"),
        (
            {**BOOT, "subscribe": "t", "minOffsetsPerTrigger": "5"},
            True,
            r"option 'minOffsetsPerTrigger' is not supported by the kaflet source: Spark's Python data source API takes one read limit",
        ),
        (
            {**BOOT, "subscribe": "t", "maxTriggerDelay": "5m"},
            True,
            r"option 'maxTriggerDelay' is not supported .* goes with 'minOffsetsPerTrigger'",
        ),
        ({**BOOT, "subscribe": "t", "commitOffsetsToGroup": "g"}, False, r"'commitOffsetsToGroup' applies to streaming queries only"),
        ({**BOOT, "subscribe": "t", "commitOffsetsToGroup": " "}, True, r"option 'commitOffsetsToGroup' is empty"),
    ],
)
def test_bad_read_options_name_the_option(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_read(options, streaming)


def test_option_names_are_case_insensitive_as_in_spark() -> None:
    opts = parse_read({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubScribe": "a,b,a", "STARTINGOFFSETS": "latest"}, streaming=True)
    assert opts.subscription.topics == ("a", "b")
    assert opts.starting == "latest"
    assert parse_read({**BOOT, "subscribe": "t"}, streaming=False).starting == "earliest"  # the batch default


def test_bad_write_options_name_the_option() -> None:
    with pytest.raises(OptionError, match=r"option 'kafka.bootstrap.servers' must be specified"):
        parse_write({"topic": "t"}, streaming=False)
    with pytest.raises(OptionError, match=r"option 'topic' is empty"):
        parse_write({**BOOT, "topic": ""}, streaming=False)
    with pytest.raises(OptionError, match=r"Kafka option 'value.serializer' is not supported"):
        parse_write({**BOOT, "kafka.value.serializer": "x"}, streaming=False)


def test_a_bad_option_through_spark_fails_the_query_with_its_message(spark: Any, kaflet: Any) -> None:
    reader = spark.read.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).option("subscribe", "t")
    with pytest.raises(Exception, match=r"option 'minPartitions' must be at least 1, got 0"):
        reader.option("minPartitions", "0").load().collect()
    with pytest.raises(Exception, match=r"unknown option 'statingoffsets'"):
        spark.readStream.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).option("subscribe", "t").option(
            "statingOffsets", "earliest"
        ).load().writeStream.format("noop").start().awaitTermination(30)


def test_a_bad_librdkafka_setting_names_itself(spark: Any, kaflet: Any, topic_name: str) -> None:
    create_topic(kaflet.bootstrap, topic_name, 1)
    reader = spark.read.format("kaflet").option("kafka.bootstrap.servers", kaflet.bootstrap).option("subscribe", topic_name)
    with pytest.raises(Exception, match=r"bad Kafka client option.*no\.such\.setting"):
        reader.option("kafka.no.such.setting", "1").load().collect()


def _dead_address() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def test_an_unreachable_broker_fails_read_and_write_with_its_address(spark: Any) -> None:
    dead = _dead_address()

    def reader() -> Any:
        return spark.read.format("kaflet").option("kafka.bootstrap.servers", dead).option("kafka.default.api.timeout.ms", "1000")

    with pytest.raises(Exception, match=rf"cannot reach Kafka at kafka.bootstrap.servers={dead}"):
        reader().option("subscribe", "t").load().collect()
    with pytest.raises(Exception, match=rf"cannot reach Kafka at kafka.bootstrap.servers={dead}"):
        reader().option("assign", json.dumps({"t": [0]})).load().collect()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match=rf"cannot reach Kafka at kafka.bootstrap.servers={dead}"):
        df.write.format("kaflet").option("kafka.bootstrap.servers", dead).option("kafka.default.api.timeout.ms", "1000").option(
            "topic", "t"
        ).mode("append").save()


def test_group_id_prefix_and_kafka_group_id_name_the_executors_group() -> None:
    from pipeline.source.datasource import executor_group

    assert executor_group(parse_read({**BOOT, "subscribe": "t"}, False)).startswith("spark-kafka-source-")  # the connector's prefix
    assert executor_group(parse_read({**BOOT, "subscribe": "t", "groupIdPrefix": "etl"}, False)).startswith("etl-")
    opts = parse_read({**BOOT, "subscribe": "t", "groupIdPrefix": "etl", "kafka.group.id": "fixed"}, False)
    assert executor_group(opts) == "fixed" and "group.id" not in opts.kafka

"""Java client option names, as jobs written for `format("kafka")` carry them, on the kaflet source:
translated to librdkafka's (and accepted by librdkafka itself), or refused with what to set instead."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from pipeline.source.options import OptionError, parse_read, parse_write

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
JAAS_PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr\\"et";'
JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=bob\n  password=pw;"


def _read(**kafka: str) -> dict[str, str]:
    return parse_read({**BOOT, **{f"kafka.{k}": v for k, v in kafka.items()}}, streaming=False).kafka


def test_sasl_jaas_config_of_plain_and_scram_becomes_username_and_password() -> None:
    conf = _read(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS_PLAIN})
    assert conf == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": 's3cr"et'}
    scram = _read(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": JAAS_SCRAM})
    assert scram["sasl.username"] == "bob" and scram["sasl.password"] == "pw"
    # librdkafka itself takes the translated settings (it checks names and values when the client is made).
    Consumer({"group.id": "g", **conf}).close()
    Consumer({"group.id": "g", **scram}).close()


def test_kerberos_and_oauth_jaas_are_refused_with_librdkafkas_settings() -> None:
    krb = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k" principal="p@R";'
    with pytest.raises(OptionError, match=r"Krb5LoginModule, which librdkafka cannot run.*kafka.sasl.kerberos.keytab"):
        _read(**{"sasl.jaas.config": krb})
    with pytest.raises(OptionError, match=r"must give username and password"):
        _read(**{"sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required username=x;"})


def test_fetch_and_timeout_names_are_translated() -> None:
    conf = _read(**{"fetch.max.wait.ms": "50", "fetch.min.bytes": "1", "request.timeout.ms": "7000", "receive.buffer.bytes": "65536"})
    assert conf == {"fetch.wait.max.ms": "50", "fetch.min.bytes": "1", "socket.timeout.ms": "7000", "socket.receive.buffer.bytes": "65536"}
    Consumer({"group.id": "g", **conf}).close()
    write = parse_write(
        {
            "kafka.bootstrap.servers": "h:1",
            "kafka.delivery.timeout.ms": "5000",
            "kafka.request.timeout.ms": "3000",
            "kafka.max.request.size": "2000000",
        },
        streaming=False,
    ).kafka
    assert write == {"message.timeout.ms": "5000", "request.timeout.ms": "3000", "message.max.bytes": "2000000"}
    Producer(write).flush(0)


def test_java_only_settings_are_refused_naming_what_to_do() -> None:
    with pytest.raises(OptionError, match=r"Kafka option 'max.poll.records' has no librdkafka counterpart"):
        _read(**{"max.poll.records": "500"})
    with pytest.raises(OptionError, match=r"'buffer.memory' .*queue.buffering.max.kbytes"):
        parse_write({"kafka.bootstrap.servers": "h:1", "kafka.buffer.memory": "1"}, streaming=False)


def _keystore(tmp: Path, kind: str) -> Path:
    store = tmp / f"store.{kind}"
    subprocess.run(
        [
            "keytool",
            "-genkeypair",
            "-keystore",
            str(store),
            "-storetype",
            kind,
            "-storepass",
            "changeit",
            "-keypass",
            "changeit",
            "-alias",
            "k",
            "-dname",
            "CN=test",
            "-keyalg",
            "RSA",
            "-keysize",
            "2048",
            "-validity",
            "2",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return store


def test_ssl_stores(tmp_path: Path) -> None:
    p12 = _keystore(tmp_path, "PKCS12")
    conf = _read(
        **{
            "security.protocol": "SSL",
            "ssl.keystore.location": str(p12),
            "ssl.keystore.password": "changeit",
            "ssl.keystore.type": "PKCS12",
        }
    )
    assert conf == {"security.protocol": "SSL", "ssl.keystore.location": str(p12), "ssl.keystore.password": "changeit"}
    Consumer({"group.id": "g", **conf}).close()  # librdkafka opens and decrypts the PKCS#12 store
    ca = tmp_path / "ca.pem"
    subprocess.run(
        ["keytool", "-exportcert", "-rfc", "-keystore", str(p12), "-storepass", "changeit", "-alias", "k", "-file", str(ca)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    pem = _read(**{"ssl.truststore.location": str(ca), "ssl.truststore.type": "PEM", "ssl.endpoint.identification.algorithm": ""})
    assert pem == {"ssl.ca.location": str(ca), "ssl.endpoint.identification.algorithm": "none"}
    Consumer({"group.id": "g", "security.protocol": "SSL", **pem}).close()
    inline = _read(**{"ssl.truststore.certificates": ca.read_text(), "ssl.truststore.type": "PEM"})
    assert inline == {"ssl.ca.pem": ca.read_text()}
    # A binary trust store: librdkafka reads PEM only, so the message says how to export it.
    with pytest.raises(OptionError, match=r"'kafka.ssl.truststore.location' is a PKCS12 store.*keytool -exportcert.*kafka.ssl.ca.location"):
        _read(**{"ssl.truststore.location": str(p12), "ssl.truststore.password": "changeit"})
    jks = _keystore(tmp_path, "JKS")
    with pytest.raises(OptionError, match=r"'kafka.ssl.keystore.location' is a JKS store.*-deststoretype PKCS12"):
        _read(**{"ssl.keystore.location": str(jks), "ssl.keystore.password": "changeit"})

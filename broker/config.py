"""Broker configuration: one table of options, each a CLI flag with a KAFLET_* environment twin."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, fields
from typing import Any

MIB = 1024 * 1024


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {text!r}")


def _fsync(text: str) -> str:
    value = text.strip().lower()
    if value in ("never", "always") or (value.isdigit() and int(value) > 0):
        return value
    raise argparse.ArgumentTypeError("--fsync takes never, always or an interval in milliseconds")


def _opt(default: Any, help: str, type: Any = None, choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "type": type, "choices": choices})


@dataclass
class Config:
    """Every setting of a broker. Field names map to `--field-name` and `KAFLET_FIELD_NAME`."""

    host: str = _opt("127.0.0.1", "listen address; 'localhost' listens on 127.0.0.1 and ::1")
    port: int = _opt(9092, "listen port (0 picks a free one)")
    advertised_host: str | None = _opt(None, "host clients are told to connect to (default: --host)")
    advertised_port: int | None = _opt(None, "port clients are told to connect to (default: the bound port)")
    node_id: int = _opt(1, "this broker's node id")
    data_dir: str = _opt("./data", "directory for topics, logs and metadata")
    offsets_partitions: int = _opt(50, "partitions of __consumer_offsets (fixed per data dir)")
    auto_create_topics: bool = _opt(True, "create unknown topics on Metadata/Produce", _bool)
    default_partitions: int = _opt(1, "partitions of auto-created topics")
    max_request_bytes: int = _opt(100 * MIB, "largest request frame accepted (socket.request.max.bytes)")
    connections_max_idle_ms: int = _opt(600_000, "close connections idle this long")
    log_format: str | None = _opt(None, "json or console (default: console on a terminal)", None, ("json", "console"))
    log_level: str = _opt("info", "debug, info, warning or error", None, ("debug", "info", "warning", "error"))
    fsync: str = _opt("never", "never, always, or an interval in ms between fsyncs", _fsync)
    # Log defaults (topic-level configs override them).
    log_segment_bytes: int = _opt(1024 * MIB, "default segment.bytes")
    log_segment_ms: int = _opt(7 * 24 * 3600 * 1000, "default segment.ms")
    log_retention_ms: int = _opt(7 * 24 * 3600 * 1000, "default retention.ms (-1: forever)")
    log_retention_bytes: int = _opt(-1, "default retention.bytes (-1: unlimited)")
    log_retention_check_interval_ms: int = _opt(300_000, "how often retention runs")
    message_max_bytes: int = _opt(1_048_588, "default max.message.bytes")
    # Group coordinator (names follow Kafka's broker configs).
    group_initial_rebalance_delay_ms: int = _opt(0, "group.initial.rebalance.delay.ms (Kafka: 3000)")
    group_min_session_timeout_ms: int = _opt(6000, "group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _opt(1_800_000, "group.max.session.timeout.ms")
    group_max_size: int = _opt(2_147_483_647, "group.max.size")
    offsets_retention_minutes: int = _opt(10080, "offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = _opt(600_000, "offsets.retention.check.interval.ms")
    offset_metadata_max_bytes: int = _opt(4096, "offset.metadata.max.bytes")
    offsets_topic_segment_bytes: int = _opt(100 * MIB, "offsets.topic.segment.bytes")
    offsets_delete_retention_ms: int = _opt(86_400_000, "delete.retention.ms of __consumer_offsets")
    offsets_compaction_interval_ms: int = _opt(60_000, "how often __consumer_offsets is compacted")
    # Transaction coordinator (names follow Kafka's broker configs).
    transaction_state_partitions: int = _opt(
        50, "partitions of __transaction_state (transaction.state.log.num.partitions; fixed per data dir)"
    )
    transaction_max_timeout_ms: int = _opt(900_000, "transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask for")
    transactional_id_expiration_ms: int = _opt(604_800_000, "transactional.id.expiration.ms: idle transactional ids are forgotten")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _opt(
        10_000, "transaction.abort.timed.out.transaction.cleanup.interval.ms: how often timed-out transactions are aborted"
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _opt(
        3_600_000, "transaction.remove.expired.transaction.cleanup.interval.ms: how often idle transactional ids are expired"
    )
    transaction_state_log_segment_bytes: int = _opt(100 * MIB, "transaction.state.log.segment.bytes")
    # Observability.
    metrics_host: str = _opt("127.0.0.1", "Prometheus endpoint address")
    metrics_port: int = _opt(9644, "Prometheus endpoint port (0 picks a free one; the ready line names it)")
    metrics: bool = _opt(True, "serve /metrics, /healthz and /readyz (--no-metrics turns it off)", _bool)
    group_metrics: bool = _opt(True, "export per-group series (off for very many groups)", _bool)

    @classmethod
    def option_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One flag per field; the environment twin supplies the default."""
        for f in fields(cls):
            flag = "--" + f.name.replace("_", "-")
            env = "KAFLET_" + f.name.upper()
            kind = f.metadata.get("type") or _field_type(f)
            help_text = f"{f.metadata['help']} [env {env}; default {f.default}]"
            if kind is _bool:
                parser.add_argument(flag, dest=f.name, nargs="?", const=True, type=_bool, help=help_text)
                parser.add_argument(
                    "--no-" + f.name.replace("_", "-"), dest=f.name, action="store_const", const=False, help=argparse.SUPPRESS
                )
            else:
                parser.add_argument(flag, dest=f.name, type=kind, choices=f.metadata.get("choices"), help=help_text)
        parser.set_defaults(**{f.name: None for f in fields(cls)})

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace, environ: dict[str, str] | None = None) -> Config:
        """Flags win over KAFLET_* variables, which win over defaults."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = getattr(ns, f.name, None)
            if value is None:
                raw = environ.get("KAFLET_" + f.name.upper())
                if raw is not None and raw != "":
                    kind = f.metadata.get("type") or _field_type(f)
                    try:
                        value = kind(raw)
                    except (ValueError, argparse.ArgumentTypeError) as exc:
                        raise SystemExit(f"KAFLET_{f.name.upper()}={raw!r}: {exc}") from exc
            if value is not None:
                values[f.name] = value
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.offsets_partitions < 1:
            raise ValueError("--offsets-partitions must be at least 1")
        if self.transaction_state_partitions < 1:
            raise ValueError("--transaction-state-partitions must be at least 1")
        if self.transaction_max_timeout_ms < 1:
            raise ValueError("--transaction-max-timeout-ms must be at least 1")
        if self.default_partitions < 1:
            raise ValueError("--default-partitions must be at least 1")
        if self.max_request_bytes < 1024:
            raise ValueError("--max-request-bytes must be at least 1024")
        if not 0 <= self.port <= 65535:
            raise ValueError("--port must be between 0 and 65535")
        if not 0 <= self.metrics_port <= 65535:
            raise ValueError("--metrics-port must be between 0 and 65535")


def _field_type(f: Any) -> Any:
    text = str(f.type)
    if "int" in text:
        return int
    if "bool" in text:
        return _bool
    return str

"""Kafka's JSON message schemas for APIs kafka-python does not define (read by `protocol.kip848`)."""

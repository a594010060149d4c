"""The Kafka wire, pure and stateless: framing, headers, codecs, errors, record batches."""

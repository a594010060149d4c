"""The coordinator runtime (Kafka's coordinator-common): shards over the partitions of an internal
topic, loaded from and written to its log, for every coordinator of the broker."""

"""The `kaflet` Spark data source: reads and writes Kafka topics over the Kafka protocol."""

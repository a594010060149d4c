"""The group analytics on Spark: lag history, rebalance timeline, delivery audit, report.

Each reads the brokers only over the Kafka protocol (through the `kaflet` data source and a
few ListOffsets and Fetch lookups), decodes `__consumer_offsets` with kaflet's record formats
(Kafka's own), and writes Parquet under one output directory. `python -m pipeline --help`.
"""

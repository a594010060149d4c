"""kaflet's benchmarks: each figure measured against kaflet and the librdkafka mock cluster in one run."""

"""Every config of a broker, one module per concern.

- flags.py: `Config`, every setting as a `kaflet serve` flag with its KAFLET_* twin;
- types.py: config values typed as Kafka's ConfigDef types them (parse, validate, render);
- broker_configs.py: the broker configs DescribeConfigs reports, derived from `Config`;
- topic_configs.py: the topic configs (Kafka's LogConfig), validated, stored and described;
- log_config.py: a topic's effective LogConfig for its partition logs;
- dynamic_configs.py: the broker configs AlterConfigs changes at run time;
- group_configs.py: the per-group configs (the GROUP resource of KIP-848).

`from broker.config import Config` (and `from broker import Config`) is the public way in.
"""

from broker.config.flags import KAFKA_DEFAULTS, MIB, SERVE_METRICS_PORT, Config, ConfigError

__all__ = ["KAFKA_DEFAULTS", "MIB", "SERVE_METRICS_PORT", "Config", "ConfigError"]

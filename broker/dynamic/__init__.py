"""Configs changed at run time: broker configs Kafka updates dynamically (broker_configs.py here)."""

"""The disk: partition logs in Kafka's on-disk layout, with no networking.

`LogManager` owns every `PartitionLog` of a data dir; see storage/manager.py and storage/log.py.
"""

from storage.config import LogConfig
from storage.log import AppendResult, PartitionLog
from storage.manager import LogManager

__all__ = ["AppendResult", "LogConfig", "LogManager", "PartitionLog"]

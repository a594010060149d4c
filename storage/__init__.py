"""The disk: partition logs in Kafka's on-disk layout, and the __consumer_offsets record formats.

No networking. `LogManager` owns every `PartitionLog` of a data dir (storage/manager.py,
storage/log.py); storage/offsets_records.py holds the coordinator's record codecs.
"""

from storage.config import LogConfig
from storage.log import AppendResult, PartitionLog
from storage.manager import LogManager

__all__ = ["AppendResult", "LogConfig", "LogManager", "PartitionLog"]

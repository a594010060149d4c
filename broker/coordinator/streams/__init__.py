"""KIP-1071 streams groups, the group coordinator's fourth group type (Kafka 4.4's
org.apache.kafka.coordinator.group.streams): the group and its members (group.py, member.py),
the topology and its internal topics (topology.py, topics.py), the sticky task assignor
(assignor.py, with Java's iteration orders in javaorder.py), task reconciliation (reconcile.py)
and the manager that GroupShard builds (manager.py)."""

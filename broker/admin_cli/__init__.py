"""`kaflet topics ...` and `kaflet groups ...`: an admin CLI that speaks the Kafka protocol.

It uses kafka-python's KafkaAdminClient rather than kaflet's own codec: the admin client
already routes each request where a cluster wants it (group coordinators, partition leaders,
the controller), so the same commands work against a multi-broker Kafka, and it decodes
consumer-protocol subscriptions and assignments. What it does not do, Kafka's
kafka-consumer-groups.sh semantics for lag and resets, is written here (groups.py).

Exit codes (scripts can rely on them):
  0  success
  1  the cluster reported an error for the operation (or for part of it)
  2  usage error (bad arguments)
  3  the cluster could not be reached, or did not answer in time (--timeout)
  4  refused because a group has active members (reset-offsets; groups delete when that is
     the only failure)
"""

OK = 0
FAILED = 1
USAGE = 2
UNREACHABLE = 3
GROUP_ACTIVE = 4

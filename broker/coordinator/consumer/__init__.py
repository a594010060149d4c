"""KIP-848 consumer groups: the second group type of a coordinator shard (spec section 6).

`group` holds the state (rebuilt only by replaying records 3-8), `reconcile` the member state
machine (KR-1..KR-3), `manager` the operations (ConsumerGroupHeartbeat, timers, topic events,
describe, admin) that produce records.
"""

"""The group coordinator: shards of `__consumer_offsets`, classic groups, committed offsets."""

"""One module per API area; importing this package registers every handler."""

from broker.apis import (  # noqa: F401
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    find_coordinator,
    group_admin,
    heartbeat,
    join_group,
    leave_group,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)

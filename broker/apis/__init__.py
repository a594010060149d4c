"""One module per API area; importing this package registers every handler."""

from broker.apis import (  # noqa: F401
    api_versions,
    delete_records,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)

"""What a coordinator sees of the cluster's topics (Kafka's CoordinatorMetadataImage), and what
the runtime needs of the topic catalog to own its internal topic.

`broker.topics.catalog.TopicManager` is both. A coordinator reads topics through
`CoordinatorMetadataImage` (names, ids, partition counts: KIP-848's subscription metadata, the
partitions an assignor hands out, and the racks of each partition's replicas) and learns of changes through the catalog's listeners, which
its service subscribes to (Kafka's `onMetadataUpdate`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from broker.topics.catalog import Topic


class CoordinatorMetadataImage(Protocol):
    """The topics as a coordinator reads them: by name, by id, all of them, and where replicas are."""

    @property
    def topics(self) -> Mapping[str, Topic]: ...

    def get(self, name: str | None) -> Topic | None: ...

    def get_by_id(self, topic_id: uuid.UUID | None) -> Topic | None: ...

    def racks_of(self, topic: str, partition: int) -> frozenset[str]:
        """The racks of the brokers holding a replica of the partition (Kafka's partitionRacks): empty when
        the brokers have no rack. KIP-848 groups hash them into the subscription's metadata (a change of
        placement bumps the group epoch) and hand them to assignors (SubscribedTopicDescriber)."""
        ...


class TopicCatalog(CoordinatorMetadataImage, Protocol):
    """The image, plus what owning an internal topic takes: creating it and hearing of its deletion."""

    @property
    def on_deleted(self) -> list[Callable[[Topic], Any]]: ...

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None, internal: bool = False) -> Topic: ...

"""A Cluster on its own event loop in a background thread (`ClusterThread`, the kaflet_cluster fixture)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.embed.thread import BrokerThread, _new_loop

if TYPE_CHECKING:
    from broker.config import Config


class ClusterThread(BrokerThread):
    """`with ClusterThread(brokers=3) as c:` serves on `c.bootstrap` (every node); `c.run(fn)` calls
    `fn(cluster)` on its loop; `c.chaos` moves leaders and coordinators and breaks nodes."""

    def __init__(self, config: Config | None = None, brokers: int = 3, **overrides: Any) -> None:
        import threading

        from broker.cluster.cluster import Cluster

        self.loop = _new_loop()
        self.broker = Cluster(config, brokers, **overrides)  # type: ignore[assignment]
        self.config = self.broker.config
        self._thread = threading.Thread(target=self.loop.run_forever, name="kaflet-cluster", daemon=True)

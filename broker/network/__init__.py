"""The network edge: what a connection may cost (limits on connections and on request bytes)."""

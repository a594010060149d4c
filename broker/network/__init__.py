"""The network front: connections (framing, dispatch, the one place responses are written), the
API registry, the request context handlers get, what a connection may cost (limits), and the
one place errors are injected (faults)."""

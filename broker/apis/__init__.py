"""One module per API area; importing this package registers every handler."""

from broker.apis import api_versions, metadata  # noqa: F401

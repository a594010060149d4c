"""`kaflet certs`, `kaflet users`, `kaflet acls` and `kaflet configs`: one module each."""

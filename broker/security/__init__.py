"""Security as Kafka does it: listeners and their protocols, TLS, SASL, principals and ACLs.

- listeners.py: `--listeners`, `--advertised-listeners`, `--listener-security-protocol-map`,
  each listener's protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and SASL mechanisms;
- tls.py: server TLS contexts from PEM files, client authentication, the peer's certificate;
- principal.py: KafkaPrincipal, `ssl.principal.mapping.rules`;
- sasl/: the authenticator (SaslHandshake, SaslAuthenticate, raw v0 tokens, KIP-368
  re-authentication) and one module per mechanism (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER);
- scram_store.py: salted SCRAM credentials, durable in the data dir;
- acls.py, authorizer.py, acl_store.py: Kafka's StandardAuthorizer and its durable ACLs;
- authorize.py: the one helper API handlers ask, in the order Kafka checks;
- service.py: what a broker holds (`broker.security`), shared by the nodes of a cluster.

The connection asks its authenticator for the next step and holds a principal; a request's
context carries the principal and the authorizer. Without security configured, none of this
is imported and the request path is unchanged.
"""

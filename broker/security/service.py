"""What a broker holds for security (`broker.security`), shared by every node of a cluster:
the TLS context, the SASL mechanisms with their users and credentials, the authorizer and its
ACLs, and counters of authentication outcomes (no secret ever reaches a log line or a label)."""

from __future__ import annotations

import ssl
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from broker.security.listeners import Listener
from broker.security.principal import ANONYMOUS, KafkaPrincipal, SslPrincipalMapper

if TYPE_CHECKING:
    from broker.config import Config
    from broker.network.connection import KafkaConnection
    from broker.security.acl_store import AclStore
    from broker.security.authorizer import StandardAuthorizer
    from broker.security.scram_store import ScramStore

log = structlog.get_logger("kaflet.security")


class SecurityError(ValueError):
    """A security setting is unusable; the message names the setting."""


class Security:
    def __init__(self, config: Config, listeners: list[Listener]) -> None:
        self.config = config
        self.counters: Counter[str] = Counter()
        self._tls: ssl.SSLContext | None = None
        self._mechanisms: dict[str, Any] = {}
        self.scram: ScramStore | None = None
        self.acls: AclStore | None = None
        self.authorizer: StandardAuthorizer | None = None
        try:
            self.mapper = SslPrincipalMapper(config.ssl_principal_mapping_rules)
        except ValueError as exc:
            raise SecurityError(f"--ssl-principal-mapping-rules: {exc}") from None
        if any(lst.tls for lst in listeners):
            self.tls_context()  # a bad certificate fails at start-up, not at the first client
        if config.authorizer == "standard":
            from broker.security.authorizer import StandardAuthorizer, parse_super_users

            try:
                supers = parse_super_users(config.super_users)
            except ValueError as exc:
                raise SecurityError(f"--super-users: {exc}") from None
            self.authorizer = StandardAuthorizer(supers, config.allow_everyone_if_no_acl_found)
        elif config.authorizer != "none":
            raise SecurityError("--authorizer must be none or standard (Kafka's StandardAuthorizer)")
        self.ensure_mechanisms(listeners)

    def ensure_mechanisms(self, listeners: list[Listener]) -> None:
        """Build the mechanisms the listeners enable (at start, and when sasl.enabled.mechanisms changes)."""
        config = self.config
        mechs = {m for lst in listeners for m in lst.mechanisms}
        if "PLAIN" in mechs and "PLAIN" not in self._mechanisms:
            from broker.security.sasl.plain import Plain, load_users

            try:
                self._mechanisms["PLAIN"] = Plain(load_users(config.sasl_plain_users, config.sasl_plain_users_file))
            except (OSError, ValueError) as exc:
                raise SecurityError(str(exc)) from None
        if "OAUTHBEARER" in mechs and "OAUTHBEARER" not in self._mechanisms:
            self._mechanisms["OAUTHBEARER"] = self._oauthbearer()

    def reconfigure_tls(self, values: dict[str, str]) -> None:
        """Dynamic TLS settings on the live context: new connections get them (Kafka's reconfigurable
        ssl.client.auth, ssl.enabled.protocols and PEM key material)."""
        import ssl as _ssl

        from broker.security.tls import TLS_VERSIONS

        ctx = self.tls_context()
        c = self.config
        client_auth = values.get("ssl.client.auth", c.ssl_client_auth)
        ca = values.get("ssl.truststore.location") or c.ssl_ca
        if "ssl.truststore.location" in values and ca:
            ctx.load_verify_locations(cafile=ca)
        if client_auth != "none" and not ca:
            raise SecurityError(f"ssl.client.auth {client_auth} needs a truststore (--ssl-ca)")
        ctx.verify_mode = {"none": _ssl.CERT_NONE, "requested": _ssl.CERT_OPTIONAL, "required": _ssl.CERT_REQUIRED}[client_auth]
        protocols = [p.strip() for p in values.get("ssl.enabled.protocols", c.ssl_enabled_protocols).split(",") if p.strip()]
        ctx.minimum_version = min(TLS_VERSIONS[p] for p in protocols)
        ctx.maximum_version = max(TLS_VERSIONS[p] for p in protocols)
        chain = values.get("ssl.keystore.certificate.chain") or values.get("ssl.keystore.location")
        if chain:
            try:
                ctx.load_cert_chain(chain)  # a PEM holding the key too
            except _ssl.SSLError:
                ctx.load_cert_chain(chain, c.ssl_key, password=(lambda: c.ssl_key_password) if c.ssl_key_password else None)

    def _oauthbearer(self) -> Any:
        from broker.security.sasl.oauthbearer import OAuthBearer, UnsecuredValidator

        c = self.config
        if c.sasl_oauthbearer_jwks_file:
            from broker.security.sasl.jwks import JwksValidator

            if not c.sasl_oauthbearer_expected_audience and not c.sasl_oauthbearer_expected_issuer:
                log.warning(
                    "OAUTHBEARER tokens are accepted whatever their audience and issuer (set --sasl-oauthbearer-expected-audience and -issuer)"
                )
            try:
                validator: Any = JwksValidator(
                    c.sasl_oauthbearer_jwks_file,
                    c.sasl_oauthbearer_expected_audience,
                    c.sasl_oauthbearer_expected_issuer,
                    c.sasl_oauthbearer_sub_claim_name,
                    c.sasl_oauthbearer_scope_claim_name,
                    c.sasl_oauthbearer_clock_skew_seconds,
                )
            except (OSError, ValueError, ImportError) as exc:
                raise SecurityError(f"--sasl-oauthbearer-jwks-file: {exc}") from None
        else:
            validator = UnsecuredValidator(
                c.sasl_oauthbearer_sub_claim_name, c.sasl_oauthbearer_scope_claim_name, c.sasl_oauthbearer_required_scope or ""
            )
        return OAuthBearer(validator)

    # -- start-up -------------------------------------------------------------------------------

    def load(self, data_dir: Path) -> None:
        """Open the stores of the data dir (before the listeners serve)."""
        from broker.security.scram_store import ScramStore

        self.scram = ScramStore(data_dir)
        self.scram.load()
        for entry in (self.config.scram_users or "").split(","):
            if not entry.strip():
                continue
            user, sep, password = entry.partition(":")
            if not sep or not user.strip():
                raise SecurityError("--scram-users: expected user:password[,user:password...]")
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                current = self.scram.get(user.strip(), mechanism)
                if current is None or not _same_password(mechanism, password, current):
                    self.scram.set_password(user.strip(), mechanism, password)
        if self.authorizer is not None:
            from broker.security.acl_store import AclStore

            self.acls = AclStore(data_dir, self.authorizer)
            self.acls.load()
            log.info("authorizer ready", acls=self.authorizer.count, super_users=sorted(self.authorizer.super_users))

    def tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            from broker.security.tls import TlsError, server_context

            c = self.config
            try:
                self._tls = server_context(c.ssl_cert, c.ssl_key, c.ssl_key_password, c.ssl_ca, c.ssl_client_auth, c.ssl_enabled_protocols)
            except TlsError as exc:
                raise SecurityError(str(exc)) from None
        return self._tls

    def mechanism(self, name: str) -> Any:
        found = self._mechanisms.get(name)
        if found is None and name.startswith("SCRAM-"):
            from broker.security.sasl.scram import Scram

            assert self.scram is not None
            found = self._mechanisms[name] = Scram(name, self.scram)
        return found

    # -- a new connection ------------------------------------------------------------------------

    def accept(self, conn: KafkaConnection, transport: Any, listener: Listener) -> bool:
        """Set the connection's principal (SSL) or authenticator (SASL); False: close it."""
        if listener.sasl:
            from broker.security.sasl.authenticator import SaslAuthenticator

            conn.authenticator = SaslAuthenticator(
                conn, self, listener.mechanisms, self.config.request_read_timeout_ms, self.config.connections_max_reauth_ms
            )
            return True
        if listener.tls:
            from broker.security.tls import subject_dn

            ssl_object = transport.get_extra_info("ssl_object")
            dn = subject_dn(ssl_object.getpeercert()) if ssl_object is not None else None
            if dn is None:
                conn.principal = ANONYMOUS
                return True
            try:
                conn.principal = KafkaPrincipal("User", self.mapper.name(dn))
            except ValueError as exc:
                log.warning("closing connection", peer=conn.peer_text, reason=f"client certificate: {exc}")
                self.counters["ssl_principal_unmapped"] += 1
                return False
        return True


def _same_password(mechanism: str, password: str, credential: Any) -> bool:
    import hmac

    from broker.security.sasl.scram import keys, salted_password

    stored, _server = keys(mechanism, salted_password(mechanism, password, credential.salt, credential.iterations))
    return hmac.compare_digest(stored, credential.stored_key)

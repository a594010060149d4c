"""ACLs as Kafka's StandardAuthorizer (issue 27): its semantics, its durability in the data dir,
Create/Describe/DeleteAcls, and what each API checks (the full scenario is
tests/support/acl_scenario.py, compared with Kafka 4.4 in tests/differential)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest

from broker import Broker, Config
from broker.embed.thread import BrokerThread
from broker.security.acls import Acl, AclFilter
from broker.security.authorizer import StandardAuthorizer
from broker.security.principal import KafkaPrincipal
from protocol.errors import ErrorCode
from tests.support import acl_scenario as s

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
H = "10.0.0.7"


def authorizer(*acls: Acl, supers: tuple[str, ...] = (), allow_if_none: bool = False) -> StandardAuthorizer:
    a = StandardAuthorizer(supers, allow_if_none)
    for x in acls:
        a.add(x)
    return a


def A(
    name: str,
    op: int,
    principal: str = "User:alice",
    pattern: int = s.LITERAL,
    permission: int = s.ALLOW,
    host: str = "*",
    rtype: int = s.TOPIC,
) -> Acl:
    return Acl(rtype, name, pattern, principal, host, op, permission)


def test_literal_prefixed_and_wildcard_patterns() -> None:
    a = authorizer(A("orders", s.READ), A("ord", s.WRITE, pattern=s.PREFIXED), A("*", s.DESCRIBE_CONFIGS, principal="User:*"))
    assert a.authorize(ALICE, H, s.READ, s.TOPIC, "orders")
    assert not a.authorize(ALICE, H, s.READ, s.TOPIC, "orders2")  # literal is exact
    assert a.authorize(ALICE, H, s.WRITE, s.TOPIC, "orders2") and a.authorize(ALICE, H, s.WRITE, s.TOPIC, "ord")
    assert not a.authorize(ALICE, H, s.WRITE, s.TOPIC, "or")
    assert a.authorize(BOB, H, s.DESCRIBE_CONFIGS, s.TOPIC, "anything")  # User:* on the wildcard resource
    assert not a.authorize(BOB, H, s.READ, s.GROUP, "orders")  # another resource type


def test_deny_wins_and_implied_operations() -> None:
    a = authorizer(A("t", s.ALL), A("t", s.WRITE, permission=s.DENY), A("u", s.ALTER_CONFIGS), A("v", s.DELETE))
    assert a.authorize(ALICE, H, s.READ, s.TOPIC, "t") and not a.authorize(ALICE, H, s.WRITE, s.TOPIC, "t")
    assert a.authorize(ALICE, H, s.DESCRIBE_CONFIGS, s.TOPIC, "u")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert a.authorize(ALICE, H, s.DESCRIBE, s.TOPIC, "v")  # DELETE implies DESCRIBE
    b = authorizer(A("t", s.READ), A("t", s.DESCRIBE, permission=s.DENY))
    assert not b.authorize(ALICE, H, s.DESCRIBE, s.TOPIC, "t") and b.authorize(ALICE, H, s.READ, s.TOPIC, "t")
    c = authorizer(A("t", s.DESCRIBE), A("t", s.READ, permission=s.DENY))  # a DENY READ does not deny DESCRIBE
    assert c.authorize(ALICE, H, s.DESCRIBE, s.TOPIC, "t")


def test_hosts_and_cidr() -> None:
    a = authorizer(A("t", s.READ, host="10.0.0.7"), A("u", s.READ, host="10.0.0.0/24"), A("w", s.READ, host="*"))
    assert a.authorize(ALICE, "10.0.0.7", s.READ, s.TOPIC, "t") and not a.authorize(ALICE, "10.0.0.8", s.READ, s.TOPIC, "t")
    assert a.authorize(ALICE, "10.0.0.200", s.READ, s.TOPIC, "u") and not a.authorize(ALICE, "10.0.1.1", s.READ, s.TOPIC, "u")


def test_no_acl_found_super_users_and_acls_for_others() -> None:
    assert not authorizer().authorize(ALICE, H, s.READ, s.TOPIC, "t")
    assert authorizer(allow_if_none=True).authorize(ALICE, H, s.READ, s.TOPIC, "t")
    # A resource with ACLs for someone else is denied even with allow.everyone.if.no.acl.found.
    assert not authorizer(A("t", s.READ, principal="User:bob"), allow_if_none=True).authorize(ALICE, H, s.READ, s.TOPIC, "t")
    assert authorizer(A("t", s.READ, permission=s.DENY), supers=("User:alice",)).authorize(ALICE, H, s.READ, s.TOPIC, "t")


def test_authorize_by_resource_type() -> None:
    # InitProducerId's idempotent-write fallback: WRITE on some topic, not dominated by a deny.
    assert authorizer(A("a", s.WRITE)).authorize_by_resource_type(ALICE, H, s.WRITE, s.TOPIC)
    assert not authorizer(A("a", s.WRITE), A("a", s.WRITE, permission=s.DENY)).authorize_by_resource_type(ALICE, H, s.WRITE, s.TOPIC)
    assert not authorizer(A("abc", s.WRITE), A("a", s.WRITE, pattern=s.PREFIXED, permission=s.DENY)).authorize_by_resource_type(
        ALICE, H, s.WRITE, s.TOPIC
    )
    assert not authorizer(A("a", s.READ)).authorize_by_resource_type(ALICE, H, s.WRITE, s.TOPIC)


def test_allowed_operations_is_what_the_bits_come_from() -> None:
    a = authorizer(A("g", s.READ, rtype=s.GROUP))
    assert a.allowed_operations(ALICE, H, s.GROUP, "g") == {s.READ, s.DESCRIBE}
    assert a.allowed_operations(BOB, H, s.GROUP, "g") == frozenset()


def test_ten_thousand_acls_keep_lookups_cheap() -> None:
    acls = [A(f"topic-{i}", s.READ, principal=f"User:u{i % 100}") for i in range(10_000)] + [
        A(f"pre-{i}-", s.WRITE, pattern=s.PREFIXED) for i in range(50)
    ]
    a = authorizer(*acls)
    assert a.count == 10_050
    assert a.authorize(KafkaPrincipal("User", "u42"), H, s.READ, s.TOPIC, "topic-142")
    assert a.authorize(ALICE, H, s.WRITE, s.TOPIC, "pre-7-x")
    a.remove(acls[142])
    assert not a.authorize(KafkaPrincipal("User", "u42"), H, s.READ, s.TOPIC, "topic-142")


def test_filters_as_kafka() -> None:
    prefixed = A("ord", s.READ, pattern=s.PREFIXED)
    literal = A("orders", s.READ)
    wild = A("*", s.READ)
    match = AclFilter(s.TOPIC, "orders", s.MATCH, None, None, s.ANY, s.ANY)
    assert all(match.matches(x) for x in (prefixed, literal, wild))
    assert not match.matches(A("orders2", s.READ))
    assert AclFilter(s.ANY, None, s.ANY, "User:alice", None, s.READ, s.ANY).matches(literal)
    assert not AclFilter(s.ANY, None, s.LITERAL, None, None, s.ANY, s.ANY).matches(prefixed)


async def test_acls_are_durable(make_config: Callable[..., Config], tmp_path: Path) -> None:
    config = make_config(
        listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_plain_users="admin:admin-secret", authorizer="standard", super_users="User:admin"
    )
    async with Broker(config) as b:
        c = await s.login(b.bootstrap, "admin")
        made = await c.request(CreateAclsRequest[3](creations=s.ACLS))
        assert all(r.error_code == 0 for r in made.results)
        await c.close()
    # A torn tail (a crash mid-write) is cut off at load; the whole records stay.
    with open(Path(config.data_dir) / "acls.log", "ab") as f:
        f.write(b'0badc0de {"type":"AccessCon')
    async with Broker(config) as b:
        c = await s.login(b.bootstrap, "admin")
        described = await c.request(
            DescribeAclsRequest[3](
                resource_type_filter=1,
                resource_name_filter=None,
                pattern_type_filter=1,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            )
        )
        assert sum(len(r.acls) for r in described.resources) == len(s.ACLS)
        assert b.authorizer is not None and b.authorizer.count == len(s.ACLS)
        await c.close()


async def test_acl_apis_without_an_authorizer(broker: Broker, raw: Callable[..., Any]) -> None:
    c = await raw()
    described = await c.request(
        DescribeAclsRequest[3](
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
    )
    assert (described.error_code, described.error_message) == (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    made = await c.request(CreateAclsRequest[3](creations=s.ACLS[:1]))
    assert [(r.error_code, r.error_message) for r in made.results] == [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The ACL scenario's answers from kaflet, once for the module; tests/differential shows Kafka
    4.4 gives the same."""
    users = ",".join(f"{u}:{p}" for u, p in s.USERS.items())
    config = Config(
        port=0, data_dir=str(tmp_path_factory.mktemp("acls") / "data"), metrics=False, offsets_partitions=5,
        transaction_state_partitions=5, listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_plain_users=users,
        authorizer="standard", super_users="User:admin",
    )  # fmt: skip
    with BrokerThread(config) as b:
        return asyncio.run(s.run(b.bootstrap))


T, G, C, X = (
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
)


def test_co_11_find_coordinator_needs_describe_on_each_key(answers: dict[str, Any]) -> None:
    assert dict(answers["alice finds group coordinators"]) == {"g1": 0, "g3": G}
    assert dict(answers["alice finds txn coordinators"]) == {"tx1": 0, "tx2": X}


def test_ge_7_the_group_is_authorized_before_any_coordinator_logic(answers: dict[str, Any]) -> None:
    # g3: alice has no ACL on the group; every partition of her commit, and her fetch, are refused
    assert dict(answers["alice commits g3"]) == {("orders", 0): G}
    assert answers["alice fetches g3"] == [("g3", G)]


def test_of_9_topics_not_described_are_refused_per_partition_or_left_out(answers: dict[str, Any]) -> None:
    assert answers["alice fetches g2"] == [("g2", 0, [("orders", 0), ("secret", T)])]
    assert answers["alice fetches all of g2"] == [("g2", 0, ["orders"])]  # secret's committed offset is not shown


def test_every_api_checks_what_kafka_checks(answers: dict[str, Any]) -> None:
    out = answers
    assert out["create acls"][: len(s.ACLS)] == [(0, "")] * len(s.ACLS)  # Kafka 4.4 sends "" on success
    assert [code for code, _m in out["create acls"][len(s.ACLS) :]] == [ErrorCode.INVALID_REQUEST] * len(s.INVALID)
    assert all(out[f"create unbuildable acl {i}"] == [(ErrorCode.UNKNOWN_SERVER_ERROR, None)] * 2 for i in range(len(s.UNBUILDABLE)))
    assert out["bob describe acls"] == C
    assert [n for n, _c, _o in out["alice sees"]] == ["logs-a", "orders"]  # secret and orders-hidden are left out
    assert {n: o for n, _c, o in out["alice sees"]}["orders"] == sorted([s.READ, s.WRITE, s.DESCRIBE, s.DESCRIBE_CONFIGS])
    assert dict(out["alice names topics"]) == {"secret": T, "orders": 0, "orders-hidden": T, "logs-new": T}
    assert out["alice produces to orders"] == 0 and out["alice produces to secret"] == T and out["bob produces to orders"] == T
    assert dict(out["alice list offsets"]) == {"orders": 0, "secret": T}
    assert dict(out["alice commits g1"]) == {("orders", 0): 0, ("secret", 0): T}
    assert out["alice idempotent producer id"] == 0 and out["bob idempotent producer id"] == C
    assert out["alice transactional producer id tx1"] == 0 and out["alice transactional producer id tx2"] == X
    assert out["alice creates a topic"] == [("alice-new", T, "Authorization failed.")]
    assert out["alice sets max.connections (finding 1)"][0][0] == C
    assert dict(((t, n), c) for t, n, c in out["bob describes configs"]) == {(2, "orders"): 0, (4, ""): C}
    assert out["alice creates acls"] == [C]
    assert out["admin deletes alice's prefixed topic acls"] == [[("logs-", s.DESCRIBE), ("ord", s.READ)]]

"""One ACL scenario for any broker with a SASL_PLAINTEXT listener whose PLAIN users are admin (a
super user), alice and bob, and StandardAuthorizer on: the same requests go to kaflet and to
Kafka 4.4 (tests/differential), and what they answer is reduced to comparable facts (error codes,
messages where clients show them, authorized-operations bits)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest

from tests.support import data as d
from tests.support import groups as g
from tests.support import sasl
from tests.support.raw_client import RawClient
from tests.unit.test_create_topics import create, topic

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
LITERAL, PREFIXED, MATCH, ANY = 3, 4, 2, 1
ALLOW, DENY = 3, 2
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL = 3, 4, 5, 6, 7, 8, 10, 11, 12, 2

_C = CreateAclsRequest.AclCreation
_F = DeleteAclsRequest.DeleteAclsFilter
_IR = IncrementalAlterConfigsRequest.AlterConfigsResource


async def login(bootstrap: str, user: str) -> RawClient:
    c = await RawClient.connect(bootstrap, f"acl-scenario-{user}")
    assert (await sasl.handshake(c, "PLAIN")).error_code == 0
    auth = await sasl.authenticate(c, sasl.plain(user, USERS[user]))
    assert auth.error_code == 0, auth
    return c


def acl(rtype: int, name: str, principal: str, op: int, permission: int = ALLOW, pattern: int = LITERAL, host: str = "*") -> Any:
    return _C(
        resource_type=rtype,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host=host,
        operation=op,
        permission_type=permission,
    )


ACLS = [
    acl(TOPIC, "orders", "User:alice", WRITE),
    acl(TOPIC, "ord", "User:alice", READ, pattern=PREFIXED),
    acl(TOPIC, "logs-", "User:alice", DESCRIBE, pattern=PREFIXED),
    acl(TOPIC, "orders-hidden", "User:alice", DESCRIBE, permission=DENY),
    acl(GROUP, "g1", "User:alice", READ),
    acl(GROUP, "g2", "User:alice", DESCRIBE),
    acl(TXN, "tx1", "User:alice", ALL),
    acl(TOPIC, "*", "User:*", DESCRIBE_CONFIGS),
]
INVALID = [
    acl(CLUSTER, "not-the-cluster", "User:alice", ALTER),
    acl(TOPIC, "", "User:alice", READ),
    acl(TOPIC, "x", "alice", READ),
]
# Entries a binding cannot even be made of: the whole request fails (Kafka: UNKNOWN_SERVER_ERROR).
UNBUILDABLE = [
    acl(TOPIC, "x", "User:alice", READ, pattern=MATCH),
    acl(TOPIC, "x", "User:alice", 1),
    acl(TOPIC, "x", "User:alice", READ, permission=1),
]


def codes(resp: Any, attr: str = "error_code") -> list[int]:
    return [getattr(x, attr) for x in resp]


def bits(value: Any) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, int):
        return None if value == -(1 << 31) else sorted(i for i in range(32) if value >> i & 1)
    return sorted(value)


async def _init_producer_id(client: RawClient, tid: str | None, timeout: float = 20.0) -> int:
    """InitProducerId's code, past the retriable ones a just-started Kafka answers while its
    producer-id blocks and transaction log partitions load (14, 15, 51)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while True:
        pid = await client.request(
            InitProducerIdRequest[4](transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
        )
        if pid.error_code not in (14, 15, 51) or time.monotonic() > deadline:
            return int(pid.error_code)
        await asyncio.sleep(0.2)


async def _until_acls_apply(admin: RawClient, count: int, timeout: float = 20.0) -> None:
    """Until the broker's authorizer holds `count` ACLs: Kafka answers CreateAcls once its
    controller has committed them, and the broker applies them from the metadata log a moment
    later (kaflet applies them before it answers)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while True:
        every = await admin.request(
            DescribeAclsRequest[3](
                resource_type_filter=ANY,
                resource_name_filter=None,
                pattern_type_filter=ANY,
                principal_filter=None,
                host_filter=None,
                operation=ANY,
                permission_type=ANY,
            )
        )
        held = sum(len(r.acls) for r in every.resources)
        if held >= count or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.1)


async def run(bootstrap: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    admin = await login(bootstrap, "admin")
    alice = await login(bootstrap, "alice")
    bob = await login(bootstrap, "bob")
    try:
        created = await create(admin, topic("orders"), topic("orders-hidden"), topic("secret"), topic("logs-a"))
        out["admin creates topics"] = sorted((t.name, t.error_code) for t in created.topics)
        made = await admin.request(CreateAclsRequest[3](creations=ACLS + INVALID))
        out["create acls"] = [(r.error_code, r.error_message) for r in made.results]
        for i, bad in enumerate(UNBUILDABLE):
            made = await admin.request(CreateAclsRequest[3](creations=[ACLS[0], bad]))
            out[f"create unbuildable acl {i}"] = [(r.error_code, r.error_message) for r in made.results]
        await _until_acls_apply(admin, len(ACLS))
        described = await admin.request(
            DescribeAclsRequest[3](
                resource_type_filter=TOPIC,
                resource_name_filter="orders",
                pattern_type_filter=MATCH,
                principal_filter=None,
                host_filter=None,
                operation=ANY,
                permission_type=ANY,
            )
        )
        out["describe acls MATCH orders"] = sorted(
            (r.resource_name, r.pattern_type, a.principal, a.operation, a.permission_type) for r in described.resources for a in r.acls
        )
        denied_describe = await bob.request(
            DescribeAclsRequest[3](
                resource_type_filter=ANY,
                resource_name_filter=None,
                pattern_type_filter=ANY,
                principal_filter=None,
                host_filter=None,
                operation=ANY,
                permission_type=ANY,
            )
        )
        out["bob describe acls"] = denied_describe.error_code

        meta = await alice.request(
            MetadataRequest[12](topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=True)
        )
        out["alice sees"] = sorted(
            (t.name, t.error_code, bits(t.authorized_operations)) for t in meta.topics if not t.name.startswith("__")
        )
        named = await alice.request(
            MetadataRequest[12](
                topics=[
                    MetadataRequest[12].MetadataRequestTopic(topic_id=None, name=n)
                    for n in ("secret", "orders", "orders-hidden", "logs-new")
                ],
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        )
        out["alice names topics"] = sorted((t.name, t.error_code) for t in named.topics)
        cluster = await alice.request(
            MetadataRequest[10](
                topics=[],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=False,
            )
        )
        out["alice cluster ops (metadata)"] = bits(cluster.authorized_operations)
        dc = await admin.request(DescribeClusterRequest[1](include_cluster_authorized_operations=True, endpoint_type=1))
        out["admin cluster ops"] = bits(dc.authorized_operations)

        for who, client in (("alice", alice), ("bob", bob)):
            for name in ("orders", "secret"):
                resp = await client.request(d.produce(name, 0, d.batch(1)))
                out[f"{who} produces to {name}"] = d.produce_result(resp).error_code
        lo = await alice.request(
            ListOffsetsRequest[7](
                replica_id=-1,
                isolation_level=0,
                topics=[
                    d._LT(name=n, partitions=[d._LP(partition_index=0, current_leader_epoch=-1, timestamp=-1)])
                    for n in ("orders", "secret")
                ],
            )
        )
        out["alice list offsets"] = sorted((t.name, t.partitions[0].error_code) for t in lo.topics)
        out["alice commits g1"] = sorted((await g.commit(alice, "g1", {("orders", 0): 1, ("secret", 0): 1})).items())
        out["alice commits g3"] = sorted((await g.commit(alice, "g3", {("orders", 0): 1})).items())
        fetched = await g.fetch(alice, "g2", {"orders": [0], "secret": [0]})
        out["alice fetches g2"] = [
            (x.group_id, x.error_code, sorted((t.name, t.partitions[0].error_code) for t in x.topics)) for x in fetched.groups
        ]
        await g.commit(admin, "g2", {("orders", 0): 1, ("secret", 0): 1})
        fetched = await g.fetch(alice, "g2", None)  # all partitions: those of topics alice may not describe are left out
        out["alice fetches all of g2"] = [(x.group_id, x.error_code, sorted(t.name for t in x.topics)) for x in fetched.groups]
        fetched = await g.fetch(alice, "g3", None)
        out["alice fetches g3"] = [(x.group_id, x.error_code) for x in fetched.groups]
        fc = await g.find_coordinator(alice, ["g1", "g3"])
        out["alice finds group coordinators"] = sorted((c.key, c.error_code) for c in fc.coordinators)
        fc = await g.find_coordinator(alice, ["tx1", "tx2"], key_type=1)
        out["alice finds txn coordinators"] = sorted((c.key, c.error_code) for c in fc.coordinators)
        dg = await alice.request(DescribeGroupsRequest[5](groups=["g1", "g3"], include_authorized_operations=True))
        out["alice describes groups"] = sorted((x.group_id, x.error_code, bits(x.authorized_operations)) for x in dg.groups)
        for who, client in (("alice", alice), ("bob", bob)):
            out[f"{who} idempotent producer id"] = await _init_producer_id(client, None)
        for tid in ("tx1", "tx2"):
            out[f"alice transactional producer id {tid}"] = await _init_producer_id(alice, tid)
        created = await create(alice, topic("alice-new"))
        out["alice creates a topic"] = [(t.name, t.error_code, t.error_message) for t in created.topics]
        alter = await alice.request(
            IncrementalAlterConfigsRequest[1](
                resources=[
                    _IR(
                        resource_type=4,
                        resource_name="",
                        configs=[_IR.AlterableConfig(name="max.connections", config_operation=0, value="0")],
                    )
                ],
                validate_only=False,
            )
        )
        out["alice sets max.connections (finding 1)"] = [(r.error_code, r.error_message) for r in alter.responses]
        dcfg = await bob.request(
            DescribeConfigsRequest[4](
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=["cleanup.policy"])
                    for t, n in ((2, "orders"), (4, ""))
                ],
                include_synonyms=False,
                include_documentation=False,
            )
        )
        out["bob describes configs"] = sorted((r.resource_type, r.resource_name, r.error_code) for r in dcfg.results)
        made = await alice.request(CreateAclsRequest[3](creations=[acl(TOPIC, "x", "User:alice", READ)]))
        out["alice creates acls"] = [r.error_code for r in made.results]
        deleted = await admin.request(
            DeleteAclsRequest[3](
                filters=[
                    _F(
                        resource_type_filter=TOPIC,
                        resource_name_filter=None,
                        pattern_type_filter=PREFIXED,
                        principal_filter="User:alice",
                        host_filter=None,
                        operation=ANY,
                        permission_type=ANY,
                    )
                ]
            )
        )
        out["admin deletes alice's prefixed topic acls"] = [
            sorted((m.resource_name, m.operation) for m in r.matching_acls) for r in deleted.filter_results
        ]
    finally:
        for c in (admin, alice, bob):
            await c.close()
    return out

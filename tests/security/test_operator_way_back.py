"""The operator's way back (issue 27, finding 1): a dynamic value that would refuse every connection
is refused; flags can win over stored dynamic configs; `kaflet configs` reads and deletes them in a
stopped broker's data dir; `kaflet users` and `kaflet acls` seed a data dir or talk to a broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka.protocol.admin import IncrementalAlterConfigsRequest

from broker import Broker, Config
from protocol.errors import ErrorCode
from tests.support import acl_scenario as s
from tests.support.raw_client import RawClient

_IR = IncrementalAlterConfigsRequest.AlterConfigsResource


def alter(name: str, value: str | None, resource: str = "", op: int = 0) -> Any:
    return IncrementalAlterConfigsRequest[1](
        resources=[
            _IR(resource_type=4, resource_name=resource, configs=[_IR.AlterableConfig(name=name, config_operation=op, value=value)])
        ],
        validate_only=False,
    )


def kaflet(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker", *args], capture_output=True, text=True, timeout=60, input=stdin, env={**os.environ, **(env or {})}
    )


async def test_a_lockout_by_dynamic_config_is_refused(make_config: Callable[..., Config]) -> None:
    async with Broker(make_config()) as b:
        c = await RawClient.connect(b.bootstrap)
        for name in ("max.connections", "max.connections.per.ip"):
            for resource in ("", "1"):
                (r,) = (await c.request(alter(name, "0", resource))).responses
                assert r.error_code == ErrorCode.INVALID_CONFIG and "every connection would be refused" in r.error_message
        # A per-ip 0 that lets some host in through the overrides is allowed.
        (r,) = (await c.request(alter("max.connections.per.ip.overrides", "127.0.0.1:100", "1"))).responses
        assert r.error_code == 0
        (r,) = (await c.request(alter("max.connections.per.ip", "0", "1"))).responses
        assert r.error_code == 0
        assert (await RawClient.connect(b.bootstrap)) is not None  # 127.0.0.1 still gets in
        await c.close()


async def test_an_exempt_listener_keeps_the_way_in(make_config: Callable[..., Config]) -> None:
    config = make_config(
        listeners="PLAINTEXT://127.0.0.1:0,OPS://127.0.0.1:0",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,OPS:PLAINTEXT",
        inter_broker_listener_name="OPS",
    )
    async with Broker(config) as b:
        c = await RawClient.connect(b.bootstrap)
        (r,) = (await c.request(alter("max.connections", "1"))).responses  # c itself is the one
        assert r.error_code == 0
        (r,) = (await c.request(alter("max.connections", "0"))).responses
        assert r.error_code == 0  # allowed: OPS stays exempt
        refused = await RawClient.connect(b.bootstrap)
        assert await refused.wait_closed_by_peer()
        ops = await RawClient.connect(f"127.0.0.1:{b.listeners[1].bound_port}")
        (r,) = (await ops.request(alter("max.connections", None, op=1))).responses  # DELETE, through the exempt listener
        assert r.error_code == 0
        await ops.close()
        await c.close()


async def test_flags_override_stored_dynamic_configs_and_kaflet_configs_deletes_them(
    make_config: Callable[..., Config], tmp_path: Path
) -> None:
    config = make_config(
        listeners="PLAINTEXT://127.0.0.1:0,OPS://127.0.0.1:0",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,OPS:PLAINTEXT",
        inter_broker_listener_name="OPS",
    )
    async with Broker(config) as b:
        ops = await RawClient.connect(f"127.0.0.1:{b.listeners[1].bound_port}")
        assert (await ops.request(alter("max.connections", "0"))).responses[0].error_code == 0
        await ops.close()
    data = Path(config.data_dir)
    stored = json.loads((data / "dynamic-broker-configs.json").read_text())
    assert stored["default"] == {"max.connections": "0"}
    # After a restart without the exempt listener the stored 0 would refuse everyone; an explicit
    # flag wins over it with --flags-override-dynamic.
    plain = make_config(max_connections=100, flags_override_dynamic=True, explicit=frozenset({"max_connections"}))
    async with Broker(plain) as b:
        assert b.config.max_connections == 100 and b.limits.max_connections == 100
        c = await RawClient.connect(b.bootstrap)
        assert not await c.wait_closed_by_peer(timeout=0.5)
        await c.close()
    listed = kaflet("configs", "list", "--data-dir", str(data))
    assert listed.returncode == 0 and "max.connections=0" in listed.stdout
    deleted = kaflet("configs", "delete", "max.connections", "--data-dir", str(data))
    assert deleted.returncode == 0 and "deleted max.connections=0" in deleted.stdout
    assert json.loads((data / "dynamic-broker-configs.json").read_text())["default"] == {}
    async with Broker(make_config()) as b:
        assert b.limits.max_connections == 2_147_483_647


async def test_kaflet_configs_refuses_a_running_broker(make_config: Callable[..., Config]) -> None:
    config = make_config()
    async with Broker(config):
        done = kaflet("configs", "list", "--data-dir", config.data_dir)
        assert done.returncode != 0 and "in use by a running broker" in done.stderr


async def test_kaflet_users_and_acls_on_a_data_dir_then_used_by_the_broker(make_config: Callable[..., Config]) -> None:
    config = make_config(
        listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_enabled_mechanisms="SCRAM-SHA-256", authorizer="standard", super_users="User:admin"
    )
    async with Broker(config):
        pass  # makes the data dir
    assert kaflet("users", "add", "admin", "--data-dir", config.data_dir, env={"KAFLET_USER_PASSWORD": "admin-secret"}).returncode == 0
    assert (
        kaflet(
            "users",
            "add",
            "alice",
            "--password-stdin",
            "--mechanism",
            "SCRAM-SHA-256",
            "--data-dir",
            config.data_dir,
            stdin="alice-secret\n",
        ).returncode
        == 0
    )
    listed = kaflet("users", "list", "--output", "json", "--data-dir", config.data_dir)
    assert json.loads(listed.stdout) == {"admin": {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 4096}, "alice": {"SCRAM-SHA-256": 4096}}
    assert "secret" not in (Path(config.data_dir) / "scram-credentials.log").read_text()
    added = kaflet(
        "acls", "add", "--allow-principal", "User:alice", "--operation", "WRITE", "--topic", "orders", "--data-dir", config.data_dir
    )
    assert added.returncode == 0, added.stderr
    from tests.support.sasl_scenario import scram_login

    async with Broker(config) as b:
        assert await scram_login(b.bootstrap, "SCRAM-SHA-256", "alice", "alice-secret") == (0, "")
        assert b.authorizer is not None and b.authorizer.count == 1
        env = {"KAFLET_SASL_PASSWORD": "admin-secret"}
        base = [
            "--bootstrap-server",
            b.bootstrap,
            "--security-protocol",
            "SASL_PLAINTEXT",
            "--sasl-mechanism",
            "SCRAM-SHA-256",
            "--sasl-username",
            "admin",
        ]
        import asyncio

        listed = await asyncio.to_thread(kaflet, "acls", "list", "--output", "json", *base, env=env)
        assert listed.returncode == 0, listed.stderr
        assert [a["name"] for a in json.loads(listed.stdout)] == ["orders"]
        added = await asyncio.to_thread(kaflet, "users", "add", "bob", *base, env={**env, "KAFLET_USER_PASSWORD": "bob-secret"})
        assert added.returncode == 0, added.stderr
        assert await scram_login(b.bootstrap, "SCRAM-SHA-256", "bob", "bob-secret") == (0, "")
    assert s.USERS  # the scenario's users are not these: this broker has its own

"""The narrow interfaces lower layers get instead of `Broker` (docs/architecture.md): a real
broker, and a node of a real cluster, provide every member of each one, and the handlers use
nothing of `ctx.broker` that `BrokerServices` does not declare, so that the protocols say what
each layer really uses and cannot drift from it unnoticed."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from broker import Broker, Config
from broker.cluster.chaos import ChaosTarget
from broker.cluster.cluster import Cluster
from broker.cluster.control import ControlTarget
from broker.config.broker_configs import DescribedBroker
from broker.coordinator.service import TopicEvents
from broker.metrics.source import MetricsSource
from broker.network.connection import ConnectionOwner
from broker.network.context import BrokerServices
from broker.runtime.writer import PartitionWriter
from broker.txn.coordinator import AppendFaults, TransactionParticipant

ROOT = Path(__file__).resolve().parents[2]
NODE_INTERFACES = (BrokerServices, ConnectionOwner, MetricsSource, ChaosTarget, ControlTarget, DescribedBroker)


def members(protocol: type) -> set[str]:
    """The attributes and methods a protocol declares, its bases' included."""
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass in (object, Protocol) or klass.__module__ == "typing":
            continue
        names |= set(vars(klass).get("__annotations__", {}))
        names |= {n for n, v in vars(klass).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    return names


def missing(obj: Any, protocol: type) -> list[str]:
    return sorted(n for n in members(protocol) if not hasattr(obj, n))


async def test_a_broker_provides_every_interface_it_is_given(make_config: Callable[..., Config]) -> None:
    async with Broker(make_config(metrics=True)) as broker:
        for protocol in NODE_INTERFACES:
            assert missing(broker, protocol) == [], protocol.__name__
        assert members(BrokerServices) >= {"coordinator", "txn", "topics", "logs", "partition_check", "config", "cluster"}
        assert missing(broker.topics, TopicEvents) == []
        assert missing(broker.logs, PartitionWriter) == []
        assert missing(broker.faults, AppendFaults) == []
        assert missing(broker.coordinator.runtime, TransactionParticipant) == []


async def test_a_cluster_node_provides_every_interface_a_broker_does(make_config: Callable[..., Config]) -> None:
    async with Cluster(make_config(), brokers=2) as cluster:
        for node in cluster.nodes:
            for protocol in NODE_INTERFACES:
                assert missing(node, protocol) == [], (node.config.node_id, protocol.__name__)


def _uses_of_ctx_broker(tree: ast.AST) -> set[str]:
    """Attributes read of `ctx.broker`, of a name bound to it, or of a parameter named `broker`."""
    used: set[str] = set()
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        names = {a.arg for a in func.args.args if a.arg == "broker"}
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and ast.unparse(node.value) == "ctx.broker":
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(func):
            if isinstance(node, ast.Attribute):
                owner = ast.unparse(node.value)
                if owner == "ctx.broker" or owner in names:
                    used.add(node.attr)
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and len(node.args) >= 2:
                if ast.unparse(node.args[0]) == "ctx.broker" and isinstance(node.args[1], ast.Constant):
                    used.add(node.args[1].value)
    return used


def test_handlers_use_only_what_broker_services_declares() -> None:
    declared = members(BrokerServices)
    undeclared = {}
    for path in sorted((ROOT / "broker" / "apis").glob("*.py")):
        extra = {a for a in _uses_of_ctx_broker(ast.parse(path.read_text())) - declared if not a.startswith("__")}
        if extra:
            undeclared[path.name] = sorted(extra)
    assert undeclared == {}


def test_the_handler_check_sees_each_way_of_reaching_the_node() -> None:
    source = """
def handle(ctx, request):
    broker = ctx.broker
    broker.secret_store.get()
    ctx.broker.other_service
    getattr(ctx.broker, "third", None)
    return helper(broker)

def helper(broker):
    return broker.fourth
"""
    assert _uses_of_ctx_broker(ast.parse(source)) == {"secret_store", "other_service", "third", "fourth"}

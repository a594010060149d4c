"""Start-up work deferred to first use: message classes, the registry's codecs, the collector.

Each is a measured part of `kaflet serve`'s time to the ready line (bench/README.md, start-up).
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import broker.apis  # noqa: F401  (registers every API)
from broker.network.registry import REGISTRY
from broker.server import serve_until_signalled
from protocol.apis import ApiKey, LazyMessageClass, lazy_response, response_class

ROOT = Path(__file__).resolve().parents[2]

# Run as `kaflet serve` imports: the lean client packages, every API module and the server.
_PROBE = """
import sys
from broker.node.lean_imports import skip_client_package_inits
skip_client_package_inits()
import broker.apis, broker.server, broker.coordinator.service, broker.txn.coordinator
built = sorted(m for m in sys.modules if m.startswith(("kafka.protocol.admin.", "kafka.protocol.consumer.",
    "kafka.protocol.metadata.", "kafka.protocol.producer.")) or m == "protocol.kip848")
print(",".join(built))
"""


def test_serving_imports_build_no_message_class() -> None:
    """The message modules (each builds all its classes from JSON schemas) load on first request."""
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""


def test_lazy_response_is_the_class_when_used() -> None:
    lazy = lazy_response(ApiKey.METADATA)
    real = response_class(ApiKey.METADATA)
    assert lazy.resolve() is real
    assert lazy.API_KEY == ApiKey.METADATA  # an all-capitals attribute is the real one
    topic = lazy.MetadataResponseTopic  # a CamelCase one is a nested struct, lazy too
    assert isinstance(topic, LazyMessageClass)
    assert topic.resolve() is real.MetadataResponseTopic
    message = lazy(version=1, brokers=[], controller_id=-1, topics=[])
    assert type(message) is real[1] or isinstance(message, real)
    assert "MetadataResponse.MetadataResponseTopic" in repr(topic)


def test_lazy_response_unknown_struct_raises_on_use() -> None:
    missing = lazy_response(ApiKey.HEARTBEAT).NoSuchStruct
    with pytest.raises(AttributeError):
        missing()


def test_every_registered_api_builds_its_codec_within_the_codec_versions() -> None:
    """Registration no longer builds the classes, so the version check runs on first use: here, for all."""
    for spec in REGISTRY.values():
        assert spec.request_cls.API_KEY == spec.key
        assert spec.response_cls.API_KEY == spec.key
        assert spec.max_version <= spec.request_cls.max_version
        # Building the codec also fixes where the flexible encoding starts: that is pinned per API
        # in tests/unit/test_wire.py (test_each_api_is_flexible_from_its_pinned_version).


def test_serve_turns_the_collector_back_on_once_started() -> None:
    """`kaflet serve` starts with the collector off (broker/__main__.py); ready turns it on, start-up frozen."""

    async def start() -> None:
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)

    async def stop() -> None:
        pass

    gc.disable()
    try:
        asyncio.run(serve_until_signalled(start, stop))
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_command_run_through_main_leaves_the_collector_on() -> None:
    probe = "import gc, sys; sys.argv = ['kaflet', '--version']; import broker.__main__ as m; m.run(); print(gc.isenabled())"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip().endswith("True")

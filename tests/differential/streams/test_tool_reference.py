"""Kafka's own `kafka-streams-groups` tool (org.apache.kafka.tools.streams.StreamsGroupCommand, from
kafka-tools 4.4, run through the Admin client's streams-group calls) against kaflet and against
Kafka 4.4, on the same group: listing, describing (offsets and lag, members, state, verbose),
resetting and deleting offsets, deleting the group, and the errors it reports on the way. Each
command's output must be the same on both brokers, but for the bootstrap address."""

from __future__ import annotations

import asyncio
import subprocess
from asyncio.subprocess import PIPE
from typing import Any

from tests.differential.streams.conftest import Both, Side
from tests.support import groups as classic
from tests.support.jvm import classpath, java_binary
from tests.support.streams_groups import StreamsMember, word_count


class ToolSession:
    """Kafka's StreamsGroupCommand, command after command in one JVM (dev.kaflet.streams.ToolBatch
    of tests/jvm/streams-oracle), against one broker."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.proc: asyncio.subprocess.Process | None = None

    async def run(self, *args: str) -> tuple[int, str]:
        if self.proc is None:
            cmd = [java_binary(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath("streams-oracle")]
            self.proc = await asyncio.create_subprocess_exec(
                *cmd, "dev.kaflet.streams.ToolBatch", stdin=PIPE, stdout=PIPE, stderr=subprocess.DEVNULL
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(("\t".join(["--bootstrap-server", self.bootstrap, *args]) + "\n").encode())
        await self.proc.stdin.drain()
        lines = []
        while True:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), 120)
            if not raw:
                raise AssertionError(f"the tool's JVM ended during {args}: {lines}")
            line = raw.decode().rstrip("\n")
            if line.startswith("@@exit "):
                text = "\n".join(x for x in lines if not x.startswith("SLF4J")).strip().replace(self.bootstrap, "<bootstrap>")
                return int(line.split()[1]), text
            lines.append(line)

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, n in per_partition.items():
        for i in range(n):
            producer.produce(topic, key=f"k{i}", value=f"v{i}", partition=partition)
    assert producer.flush(30) == 0


def test_ks_28_kafka_streams_groups_tool_reports_the_same(both: Both) -> None:
    async def scenario(side: Side) -> list[Any]:
        p = side.prefix
        app = f"{p}-app"
        g = f"{p}-g"
        source = f"{p}-input"
        await side.topics({source: 2, f"{app}-counts-repartition": 2, f"{app}-counts-changelog": 2})
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, produce, side.bootstrap, source, {0: 5, 1: 4})
        c = await side.client("streams-app")
        m = StreamsMember(c, g, "member-1", word_count(p, app), process_id="process-1")
        await m.beat()
        await m.beat()
        committed = await classic.commit(c, g, {(source, 0): 2, (source, 1): 4}, version=9, generation=m.epoch, member_id="member-1")
        assert set(committed.values()) == {0}, committed

        tool = ToolSession(side.bootstrap)

        async def run(*args: str) -> tuple[str, tuple[int, str]]:
            code, text = await tool.run(*args)
            if args[0] == "--list":
                # the reference broker serves the whole test session: only this scenario's groups,
                # and the columns as wide as the longest group id there, so spaces squeezed
                lines = [x for x in text.splitlines() if x.startswith(("GROUP ", p))]
                text = "\n".join(" ".join(line.split()) for line in lines)
            elif args[0] == "--describe" and not {"--members", "--state", "--topology"} & set(args):
                # the offsets table: the tool prints a Java HashMap of partitions, whose order within
                # a bucket (topic names here are random) follows the broker's ListOffsets answers;
                # every row padded but the last one printed, so trailing spaces go before sorting
                header, *rows = [line.rstrip() for line in text.splitlines()] or [""]
                text = "\n".join([header, *sorted(rows)])
            return " ".join(args), (code, text)

        out = []
        for args in (
            ("--list",),
            ("--list", "--state"),
            ("--describe", "--group", g),
            ("--describe", "--group", g, "--members", "--verbose"),
            ("--describe", "--group", g, "--state", "--verbose"),
            ("--describe", "--group", g, "--offsets", "--verbose"),
            ("--describe", "--group", g, "--topology"),
            ("--describe", "--group", f"{p}-unknown"),
            ("--delete", "--group", g),
            ("--reset-offsets", "--group", g, "--all-input-topics", "--to-earliest", "--dry-run"),
        ):
            out.append(await run(*args))
        await m.leave()
        for args in (
            ("--describe", "--group", g, "--members"),
            ("--reset-offsets", "--group", g, "--input-topic", f"{source}:1", "--shift-by", "-1", "--execute"),
            ("--delete-offsets", "--group", g, "--input-topic", source),
            ("--delete", "--group", g),
            ("--list", "--state"),
        ):
            out.append(await run(*args))
        await tool.close()
        return out

    both.same(scenario)

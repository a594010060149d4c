"""Kafka's own kafka-consumer-groups (ConsumerGroupCommand from kafka-tools 4.4) against kaflet
and against Kafka 4.4: the same commands print the same output once normalized (member ids,
the coordinator's port, column widths, the order of member rows; see peers.table).

The tool runs inside the Java client driver's JVM, each call with its own stdout and stderr.
"""

from __future__ import annotations

from typing import Any

from tests.differential.clients.peers import Peers, commit_to_the_end, own_groups, table


def tool(peers: Peers, *args: str) -> dict[str, Any]:
    """The tool's normalized output, equal on both brokers; {"out", "err", "exit"}. A listing
    keeps this module's groups only (other tests' groups live on the shared reference Kafka), and
    `--list` its rows sorted: the Admin client gathers the brokers' ListGroups answers in a
    `HashMap<String, GroupListing>` (KafkaAdminClient.ListGroupsResults) and the tool prints that
    map's order, which follows the number of groups on the broker, not the order it answered."""

    def view(result: Any) -> Any:
        out = {"out": table(result["stdout"]), "err": table(result["stderr"]), "exit": result["exit"]}
        if "--list" in args or "--all-groups" in args:
            out = own_groups(out)
        if "--list" in args:
            rows = out["out"]
            out["out"] = [r for r in rows if r[:1] == ["GROUP"]] + sorted(r for r in rows if r[:1] != ["GROUP"])
        return out

    return peers.same("tool", view=view, args=[*args, "--bootstrap-server", "{bootstrap}"])  # type: ignore[no-any-return]


def test_kafka_consumer_groups_lists_describes_resets_and_deletes(peers: Peers) -> None:
    peers.ok("create_topics", topics={"cg-tool": 3, "cg-tool-848": 2})
    peers.same("produce", topic="cg-tool", records=[[i % 3, None, f"v{i}"] for i in range(9)])
    peers.same("produce", topic="cg-tool-848", records=[[i % 2, None, f"v{i}"] for i in range(4)])
    # A classic group of a static and a dynamic member, and a consumer-protocol group of one.
    peers.ok("member_start", name="st", group="cg-classic", topics=["cg-tool"], client_id="st", instance_id="i-st")
    peers.ok("member_start", name="dy", group="cg-classic", topics=["cg-tool"], client_id="dy")
    peers.ok("member_start", name="nc", group="cg-848", topics=["cg-tool-848"], client_id="nc", protocol="consumer")
    peers.ok("group_wait", names=["st", "dy"], partitions=3, records=9)
    peers.ok("group_wait", names=["nc"], partitions=2, records=4)
    commit_to_the_end(peers, ("st", "dy", "nc"), {f"cg-tool:{p}": 3 for p in range(3)} | {f"cg-tool-848:{p}": 2 for p in range(2)})
    peers.same("produce", topic="cg-tool", records=[[0, None, "lag"]])  # one record of lag on partition 0

    listed = tool(peers, "--list")
    assert {"cg-classic", "cg-848"} <= {row[0] for row in listed["out"]}
    tool(peers, "--list", "--state")
    tool(peers, "--list", "--type")
    offsets = tool(peers, "--describe", "--group", "cg-classic")
    assert offsets["out"][0][:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    assert ["cg-classic", "cg-tool", "0", "3", "4", "1"] in [row[:6] for row in offsets["out"]]
    tool(peers, "--describe", "--group", "cg-classic", "--offsets", "--verbose")
    members = tool(peers, "--describe", "--group", "cg-classic", "--members")
    assert "GROUP-INSTANCE-ID" in members["out"][0]
    tool(peers, "--describe", "--group", "cg-classic", "--members", "--verbose")
    state = tool(peers, "--describe", "--group", "cg-classic", "--state")
    assert state["out"][1][-3:] == ["range", "Stable", "2"]
    tool(peers, "--describe", "--group", "cg-classic", "--state", "--verbose")
    tool(peers, "--describe", "--group", "cg-848")
    # Who holds which partition follows the random member ids: one member here, so no choice.
    tool(peers, "--describe", "--group", "cg-848", "--members", "--verbose")
    state = tool(peers, "--describe", "--group", "cg-848", "--state", "--verbose")
    assert state["out"][1][-5:] == ["uniform", "Stable", "2", "2", "1"]
    tool(peers, "--describe", "--all-groups", "--state")
    missing = tool(peers, "--describe", "--group", "cg-nobody")
    assert missing["out"][0][-5:] == ["org.apache.kafka.common.errors.GroupIdNotFoundException:", "Group", "cg-nobody", "not", "found."]

    # Resetting needs an inactive group: refused now, done once the members are gone.
    refused = tool(peers, "--reset-offsets", "--group", "cg-classic", "--topic", "cg-tool", "--to-earliest", "--execute")
    assert refused["out"][0][0] == "Error:"
    tool(peers, "--delete", "--group", "cg-classic")  # not empty: refused
    for name in ("st", "dy", "nc"):
        peers.ok("member_close", name=name)
    peers.same("admin", call="remove_members", group="cg-classic")  # the static member stays until removed
    reset = tool(peers, "--reset-offsets", "--group", "cg-classic", "--topic", "cg-tool", "--to-earliest", "--execute")
    assert reset["out"] == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], *[["cg-classic", "cg-tool", str(p), "0"] for p in range(3)]]
    tool(peers, "--reset-offsets", "--group", "cg-classic", "--topic", "cg-tool:0", "--to-offset", "2", "--execute")
    tool(peers, "--reset-offsets", "--group", "cg-classic", "--all-topics", "--shift-by", "1", "--dry-run")
    tool(peers, "--reset-offsets", "--group", "cg-848", "--all-topics", "--to-latest", "--execute")
    tool(peers, "--describe", "--group", "cg-classic", "--offsets")
    tool(peers, "--describe", "--group", "cg-848", "--state")
    tool(peers, "--delete-offsets", "--group", "cg-classic", "--topic", "cg-tool")
    deleted = tool(peers, "--delete", "--group", "cg-classic", "--group", "cg-848")
    assert deleted["out"] == [
        ["Deletion", "of", "requested", "consumer", "groups", "('cg-classic',", "'cg-848')", "was", "successful."]
    ] or deleted["out"] == [["Deletion", "of", "requested", "consumer", "groups", "('cg-848',", "'cg-classic')", "was", "successful."]]
    again = tool(peers, "--delete", "--group", "cg-classic")
    assert again["out"][0][0] == "Error:"

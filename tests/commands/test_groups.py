"""``groups``: a confluent-kafka group's members, commits and lag; reset-offsets; delete."""

from __future__ import annotations

import time

from tests.commands.support import confluent_produce, trikafka


def _member(bootstrap: str, group: str, topic: str, read: int):
    """A live confluent-kafka member that read and committed ``read`` records."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "lagging-app"})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 30
    while got < read and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
            if got == read:
                consumer.commit(message, asynchronous=False)
    assert got == read
    return consumer


def test_groups_list_describe_lag_reset_and_delete(kafka_broker):
    b = kafka_broker.bootstrap_servers
    assert trikafka("topics", "create", "jobs", "--partitions", "1", bootstrap=b).code == 0
    confluent_produce(b, "jobs", [(None, b"j%d" % i, 0) for i in range(10)])
    consumer = _member(b, "billing", "jobs", 4)
    try:
        listed = trikafka("groups", "list", "--json", bootstrap=b)
        assert {
            "group": "billing",
            "type": "classic",
            "protocol_type": "consumer",
            "state": "Stable",
        } in listed.json(), listed
        described = trikafka("groups", "describe", "billing", "--json", bootstrap=b)
        [group] = described.json()
        assert group["state"] == "Stable" and group["lag"] == 6
        [member] = group["members"]
        assert member["client_id"] == "lagging-app" and member["partitions"] == [["jobs", 0]]
        [row] = group["offsets"]
        assert (row["committed"], row["end"], row["lag"], row["member_id"]) == (4, 10, 6, member["member_id"])
        human = trikafka("groups", "describe", "billing", bootstrap=b)
        assert "State: Stable" in human.out and "lagging-app" in human.out
        busy = trikafka(
            "groups", "reset-offsets", "billing", "--topic", "jobs", "--to-earliest", "--execute", bootstrap=b
        )
        assert busy.code == 1 and "is Stable" in busy.err, busy
    finally:
        consumer.close()

    dry = trikafka("groups", "reset-offsets", "billing", "--topic", "jobs", "--to-offset", "7", "--json", bootstrap=b)
    assert dry.json() == {
        "group": "billing",
        "executed": False,
        "offsets": [{"topic": "jobs", "partition": 0, "current": 4, "new": 7}],
    }
    assert trikafka("groups", "describe", "billing", "--json", bootstrap=b).json()[0]["offsets"][0]["committed"] == 4
    done = trikafka(
        "groups", "reset-offsets", "billing", "--topic", "jobs", "--to-offset", "7", "--execute", bootstrap=b
    )
    assert done.code == 0 and "offsets reset" in done.out, done
    after = trikafka("groups", "describe", "billing", "--json", bootstrap=b).json()[0]
    assert (after["state"], after["offsets"][0]["committed"], after["lag"]) == ("Empty", 7, 3)
    assert trikafka("consume", "jobs", "--group", "billing", "-e", bootstrap=b).out.splitlines() == ["j7", "j8", "j9"]
    latest = trikafka(
        "groups", "reset-offsets", "billing", "--all-topics", "--to-earliest", "--execute", "--json", bootstrap=b
    )
    assert latest.json()["offsets"] == [{"topic": "jobs", "partition": 0, "current": 10, "new": 0}]

    deleted = trikafka("groups", "delete", "billing", bootstrap=b)
    assert (deleted.code, deleted.out.strip()) == (0, "Deleted group billing."), deleted
    assert "billing" not in [g["group"] for g in trikafka("groups", "list", "--json", bootstrap=b).json()]
    gone = trikafka("groups", "delete", "billing", bootstrap=b)
    assert gone.code == 1 and gone.err.startswith("trikafka: GROUP_ID_NOT_FOUND"), gone
    missing = trikafka("groups", "describe", "nobody", bootstrap=b)
    assert missing.code == 1 and "GROUP_ID_NOT_FOUND" in missing.err, missing


def test_reset_offsets_needs_one_target(kafka_broker):
    b = kafka_broker.bootstrap_servers
    run = trikafka("groups", "reset-offsets", "g", "--topic", "t", bootstrap=b)
    assert run.code == 2 and "exactly one of --to-earliest" in run.err


def test_a_share_group_is_listed_described_and_reset(kafka_broker):
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    b = kafka_broker.bootstrap_servers
    assert trikafka("topics", "create", "queue", "--partitions", "1", bootstrap=b).code == 0
    confluent_produce(b, "queue", [(None, b"q%d" % i, 0) for i in range(5)])
    admin = AdminClient({"bootstrap.servers": b})
    resource = ConfigResource(ConfigResource.Type.GROUP, "workers", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    consumer = ShareConsumer({"bootstrap.servers": b, "group.id": "workers", "client.id": "worker-1",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["queue"])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        got += [m for m in consumer.poll(0.5) if m.error() is None]
    for m in got[:2]:
        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    for m in got[2:]:
        consumer.acknowledge(m, AcknowledgeType.RELEASE)
    consumer.commit_sync(30)
    try:
        listed = trikafka("groups", "list", "--json", bootstrap=b)
        assert {"group": "workers", "type": "share", "protocol_type": "share", "state": "Stable"} in listed.json(), (
            listed
        )
        [group] = trikafka("groups", "describe", "workers", "--json", bootstrap=b).json()
        assert (group["type"], group["state"], group["lag"]) == ("share", "Stable", 3)
        assert [m["client_id"] for m in group["members"]] == ["worker-1"]
        assert group["offsets"] == [{"topic": "queue", "partition": 0, "start_offset": 2, "end": 5, "lag": 3,
                                     "members": ["worker-1"]}]
        assert "Type: share" in trikafka("groups", "describe", "workers", bootstrap=b).out
    finally:
        consumer.close()
    kafka_broker.wait_for_share_group_state("workers", "Empty", members=0)
    done = trikafka("groups", "reset-offsets", "workers", "--topic", "queue", "--to-latest", "--execute", bootstrap=b)
    assert done.code == 0, done
    assert kafka_broker.share_partition("workers", "queue", 0).start_offset == 5

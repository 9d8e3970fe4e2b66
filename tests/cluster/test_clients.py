"""Real clients against a three-broker cluster over TCP, while the test moves things around.

confluent-kafka (librdkafka) is the client: it follows leaders and coordinators through
NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR and Metadata exactly as it does against Kafka.
Every wait is bounded (``Deadline``); no test sleeps.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat.support import TIMEOUT, Deadline
from trikafka.protocol.records import iter_batches
from trikafka.server.replica.cluster_view import GROUP_KEY


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication_factor: int = 3, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=config)]
    )
    futures[name].result(TIMEOUT)


def consume_values(bootstrap: str, topic: str, count: int, partitions: int = 1) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        deadline = Deadline()
        while len(values) < count and deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        # Anything beyond ``count`` would be a duplicate: read on until the log end is seen.
        while deadline:
            message = consumer.poll(0.5)
            if message is None:
                break
            if not message.error():
                values.append(message.value())
        return values
    finally:
        consumer.close()


def leader_epochs(cluster: Any, topic: str) -> list[int]:
    replica = cluster.call(cluster.cluster.logs.leader_log, topic, 0)
    data = cluster.call(lambda: replica.read(0, 2**31 - 1, min_one_batch=True).records)
    return [h.partition_leader_epoch for h in iter_batches(data)]


def test_idempotent_producer_keeps_producing_through_leader_moves(start_cluster):
    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "moving")
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 60000,  # leaders are found through the errors
        }
    )
    failures: list[Any] = []
    delivered: list[bytes] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err)
        else:
            delivered.append(msg.value())

    sent = [b"%04d" % i for i in range(600)]
    for chunk in range(6):
        for value in sent[chunk * 100 : chunk * 100 + 100]:
            producer.produce("moving", value, callback=report)
        # Move the leader once part of the chunk is acknowledged: the rest is queued or in
        # flight to the old leader, which refuses it, and the producer retries it elsewhere.
        deadline = Deadline()
        while len(delivered) < chunk * 100 + 10 and deadline:
            producer.poll(0.1)
        leader = cluster.call(cluster.cluster.leader, "moving", 0)
        cluster.call(cluster.cluster.move_leader, "moving", 0, leader % 3 + 1)
    assert producer.flush(TIMEOUT) == 0
    assert failures == []
    assert consume_values(cluster.bootstrap_servers, "moving", len(sent)) == sent  # none lost, none twice
    epochs = leader_epochs(cluster, "moving")
    assert epochs == sorted(epochs) and len(set(epochs)) >= 3  # batches really went to successive leaders


def test_a_consumer_group_survives_a_coordinator_move_and_a_broker_restart(start_cluster):
    cluster = start_cluster(3)
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "grouped", partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})

    def produce(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce("grouped", b"%d" % i, partition=i % 3)
        assert producer.flush(TIMEOUT) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "survivors",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
        }
    )
    seen: set[bytes] = set()

    def consume_until(total: int) -> None:
        deadline = Deadline()
        while len(seen) < total and deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            assert message.value() not in seen, f"{message.value()} delivered twice"
            seen.add(message.value())
            consumer.commit(message, asynchronous=False)
        assert len(seen) == total

    try:
        consumer.subscribe(["grouped"])
        produce(0, 30)
        consume_until(30)
        owner = cluster.call(cluster.cluster.coordinator, GROUP_KEY, "survivors")
        new_owner = owner % 3 + 1
        cluster.call(cluster.cluster.move_coordinator, "survivors", new_owner, key_type="group")
        produce(30, 30)
        consume_until(60)
        cluster.acall(cluster.cluster.stop_broker, new_owner)  # the coordinator and a leader go
        assert cluster.call(cluster.cluster.coordinator, GROUP_KEY, "survivors") != new_owner
        produce(60, 30)
        consume_until(90)
        cluster.acall(cluster.cluster.start_broker, new_owner)
        produce(90, 30)
        consume_until(120)
        committed = consumer.committed([TopicPartition("grouped", p) for p in range(3)], TIMEOUT)
        assert sorted(tp.offset for tp in committed) == [40, 40, 40]
    finally:
        consumer.close()


def test_acks_all_is_refused_while_the_isr_is_below_min_insync_replicas(start_cluster):
    cluster = start_cluster(3)
    create_topic(cluster.bootstrap_servers, "guarded", **{"min.insync.replicas": "2"})
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0, "enable.idempotence": False}
    )
    results: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        results.append(err)

    producer.produce("guarded", b"before", callback=report)
    assert producer.flush(TIMEOUT) == 0 and results == [None]
    leader = cluster.call(cluster.cluster.leader, "guarded", 0)
    cluster.call(cluster.cluster.shrink_isr, "guarded", 0, to=[leader])
    producer.produce("guarded", b"refused", callback=report)
    assert producer.flush(TIMEOUT) == 0
    assert results[-1] is not None and results[-1].code() == KafkaError.NOT_ENOUGH_REPLICAS
    cluster.call(cluster.cluster.expand_isr, "guarded", 0)
    producer.produce("guarded", b"after", callback=report)
    assert producer.flush(TIMEOUT) == 0 and results[-1] is None
    assert consume_values(cluster.bootstrap_servers, "guarded", 2) == [b"before", b"after"]


def test_transactions_commit_and_abort_across_brokers_and_a_coordinator_move(start_cluster):
    cluster = start_cluster(3)
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "txns", partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "mover"})
    producer.init_transactions(TIMEOUT)

    def transaction(first: int, commit: bool) -> None:
        producer.begin_transaction()
        for i in range(first, first + 9):
            producer.produce("txns", b"%d" % i, partition=i % 3)
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)

    transaction(0, commit=True)
    transaction(100, commit=False)
    owner = cluster.call(cluster.cluster.coordinator, 1, "mover")
    cluster.call(cluster.cluster.move_coordinator, "mover", owner % 3 + 1, key_type="transaction")
    transaction(9, commit=True)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "committed-only",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition("txns", p, 0) for p in range(3)])
        values: set[bytes] = set()
        deadline = Deadline()
        while len(values) < 18 and deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.add(message.value())
        assert values == {b"%d" % i for i in range(18)}  # nothing of the aborted one
    finally:
        consumer.close()


def test_aiokafka_follows_moving_leaders_and_a_moving_group_coordinator(start_cluster):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    cluster = start_cluster(3)
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "aio", partitions=3)

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for i in range(300):
                await producer.send("aio", b"%d" % i, partition=i % 3)
                if i % 50 == 49:  # every partition's leader moves, a batch is on its way
                    for partition in range(3):
                        leader = cluster.call(cluster.cluster.leader, "aio", partition)
                        cluster.call(cluster.cluster.move_leader, "aio", partition, leader % 3 + 1)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            "aio", bootstrap_servers=bootstrap, group_id="aio-group", auto_offset_reset="earliest"
        )
        await consumer.start()
        seen: list[bytes] = []
        try:
            async for message in consumer:
                seen.append(message.value)
                if len(seen) == 150:
                    owner = cluster.call(cluster.cluster.coordinator, GROUP_KEY, "aio-group")
                    cluster.call(cluster.cluster.move_coordinator, "aio-group", owner % 3 + 1, key_type="group")
                    await consumer.commit()
                if len(seen) == 300:
                    break
            await consumer.commit()
        finally:
            await consumer.stop()
        return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert sorted(seen) == sorted(b"%d" % i for i in range(300))  # each once

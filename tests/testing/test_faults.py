"""Injected faults, the recorder and awaitable state, deterministically: the in-memory
broker of the ``trikafka_broker`` fixture, the project's client, and trio's MockClock — so
"5 s of latency" is asserted as exactly 5 s of virtual time."""

from __future__ import annotations

import datetime
import logging

import pytest
import trio
import trio.testing

from trikafka.client.connection import ConnectionClosed
from trikafka.errors import ErrorCode
from trikafka.protocol.entities import build
from trikafka.protocol.records import build_batch
from trikafka.protocol.registry import ApiRegistry

REGISTRY = ApiRegistry()


def request(api_key: int, version: int, **fields):
    return build(REGISTRY.get(api_key, version).request_type, **fields)


def metadata(*topics: str, version: int = 12):
    return request(
        3,
        version,
        topics=[{"name": t, "topic_id": None} for t in topics],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )


def create_topics(*names: str, partitions: int = 1):
    return request(
        19,
        7,
        topics=[
            {"name": n, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
            for n in names
        ],
        timeout=1000,
        validate_only=False,
    )


def produce(topic: str, partition: int, *values: bytes):
    batch = build_batch([(None, v, [], 1_700_000_000_000) for v in values])
    return request(
        0,
        9,
        transactional_id=None,
        acks=-1,
        timeout=1000,
        topic_data=[{"name": topic, "topic_id": None, "partition_data": [{"index": partition, "records": batch}]}],
    )


async def test_latency_is_virtual_time_and_only_for_its_api(trikafka_broker, autojump_clock):
    trikafka_broker.faults.add_latency(5.0, api="Metadata")
    async with trikafka_broker.client() as client:
        start = trio.current_time()
        await client.request(create_topics("fast"))
        assert trio.current_time() == start
        await client.request(metadata("fast"))
        assert trio.current_time() - start == pytest.approx(5.0)
    assert trikafka_broker.broker.path.metrics.injected_faults[("Metadata", "latency")] == 1


async def test_error_for_one_topic_only_and_only_count_times(trikafka_broker, autojump_clock):
    fault = trikafka_broker.faults.inject_error("CreateTopics", "POLICY_VIOLATION", topic="refused", count=1)
    async with trikafka_broker.client() as client:
        other = await client.request(create_topics("other"))
        assert other.topics[0].error_code == ErrorCode.none
        refused = await client.request(create_topics("refused"))
        assert [(t.name, t.error_code) for t in refused.topics] == [("refused", ErrorCode.policy_violation)]
        again = await client.request(create_topics("refused"))  # count=1: spent
        assert again.topics[0].error_code == ErrorCode.none
    assert fault.applied == 1
    assert fault not in trikafka_broker.faults.faults


async def test_produce_error_names_every_partition_and_is_not_applied(trikafka_broker, autojump_clock):
    trikafka_broker.faults.inject_error("Produce", ErrorCode.not_leader_or_follower, topic="t", partition=1)
    async with trikafka_broker.client() as client:
        await client.request(create_topics("t", partitions=2))
        ok = await client.request(produce("t", 0, b"a"))
        assert ok.responses[0].partition_responses[0].error_code == ErrorCode.none
        failed = await client.request(produce("t", 1, b"b"))
        answer = failed.responses[0].partition_responses[0]
        assert (answer.index, answer.error_code) == (1, ErrorCode.not_leader_or_follower)
    assert trikafka_broker.partition_log("t", 1).high_watermark.value == 0


@pytest.mark.parametrize("after", [False, True])
async def test_drop_before_or_after_the_broker_applies(trikafka_broker, autojump_clock, after):
    trikafka_broker.faults.drop_connection("CreateTopics", after=after, count=1)
    async with trikafka_broker.client() as client:
        with pytest.raises(ConnectionClosed):
            await client.request(create_topics("maybe"))
    async with trikafka_broker.client() as client:
        listed = await client.request(metadata("maybe"))
        exists = listed.topics[0].error_code == ErrorCode.none
    assert exists is after


async def test_held_responses_wait_for_release(trikafka_broker, autojump_clock):
    hold = trikafka_broker.faults.hold_responses("Metadata")
    answered = []
    async with trikafka_broker.client() as client:
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                answered.append(await client.request(metadata()))

            nursery.start_soon(ask)
            await trio.sleep(60)
            assert answered == [] and len(hold.held) == 1
            assert trikafka_broker.faults.release(hold) == 1
        assert len(answered) == 1
        await client.request(metadata())  # released: no longer held


async def test_throttle_sets_throttle_time_and_mutes_the_connection(trikafka_broker, autojump_clock):
    trikafka_broker.faults.throttle("Metadata", 2500, count=1)
    async with trikafka_broker.client() as client:
        start = trio.current_time()
        first = await client.request(metadata())
        assert first.throttle_time == datetime.timedelta(milliseconds=2500)
        assert trio.current_time() == start  # sent at once (KIP-219) ...
        second = await client.request(metadata())
        assert trio.current_time() - start == pytest.approx(2.5)  # ... then the connection waits
        assert second.throttle_time == datetime.timedelta(0)


async def test_injected_faults_are_logged_as_injected(trikafka_broker, autojump_clock, caplog):
    trikafka_broker.faults.inject_error("Metadata", "REQUEST_TIMED_OUT", client_id="victim")
    with caplog.at_level(logging.WARNING, logger="trikafka.faults"):
        async with trikafka_broker.client(client_id="bystander") as client:
            await client.request(metadata())
        async with trikafka_broker.client(client_id="victim") as client:
            await client.request(metadata())
    injected = [r for r in caplog.records if r.getMessage().startswith("injected")]
    assert len(injected) == 1
    assert "REQUEST_TIMED_OUT" in injected[0].getMessage() and "victim" in injected[0].getMessage()


async def test_recorder_keeps_requests_in_order_with_their_keys(trikafka_broker, autojump_clock):
    async with trikafka_broker.client(client_id="app") as client:
        await client.request(create_topics("a", "b", partitions=2))
        await client.request(produce("b", 1, b"x"))
    sent = trikafka_broker.recorded(client_id="app")
    assert [r.api for r in sent] == ["CreateTopics", "Produce"]
    assert sent[0].topics == ("a", "b")
    assert sent[1].partitions == (("b", 1),)
    assert sent[1].version == 9


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda f: f.inject_error("Produse", "NOT_LEADER_OR_FOLLOWER"), "unknown api 'Produse'"),
        (lambda f: f.inject_error("Produce", "NOT_A_LEADER"), "unknown error code 'NOT_A_LEADER'"),
        (lambda f: f.inject_error("Produce", 6, topik="t"), "unknown filter 'topik'"),
        (lambda f: f.inject_error("Produce", 6, partition=0), "needs its topic"),
        (lambda f: f.inject_error("Produce", 6, count=0), "count must be"),
        (lambda f: f.add_latency(-1), "latency must be"),
    ],
)
async def test_bad_faults_are_refused_clearly(trikafka_broker, call, message):
    with pytest.raises(ValueError, match=message):
        call(trikafka_broker.faults)
    assert trikafka_broker.faults.faults == []


async def test_wait_for_high_watermark_waits_for_the_topic_and_the_records(trikafka_broker, autojump_clock):
    async with trio.open_nursery() as nursery:
        reached = []

        async def wait() -> None:
            reached.append(await trikafka_broker.wait_for_high_watermark("late", 0, at_least=3))

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        async with trikafka_broker.client() as client:
            await client.request(create_topics("late"))
            await client.request(produce("late", 0, b"1", b"2"))
            await trio.testing.wait_all_tasks_blocked()
            assert reached == []
            await client.request(produce("late", 0, b"3"))
    assert reached == [3]


async def test_wait_for_a_state_name_kafka_does_not_have_is_refused(trikafka_broker):
    with pytest.raises(ValueError, match="not one of Kafka's: Empty, PreparingRebalance"):
        await trikafka_broker.wait_for_group_state("g", "Rebalancing")
    with pytest.raises(ValueError, match="CompleteCommit"):
        await trikafka_broker.wait_for_transaction_state("t", "Committed")


async def test_faults_switch_themselves_off_when_spent(trikafka_broker, autojump_clock):
    faults = trikafka_broker.faults
    faults.recorder.stop()
    assert not faults.active  # the request path is back to one attribute check
    faults.throttle("Metadata", 100, count=1)
    assert faults.active
    async with trikafka_broker.client() as client:
        await client.request(metadata())  # the throttle is spent; the connection is muted
        assert faults.active
        await client.request(metadata())  # the mute is served
    assert not faults.active


async def test_an_error_sequence_answers_one_step_per_request_with_its_round_trip_time(trikafka_broker, autojump_clock):
    """librdkafka's mock push_request_errors: codes, each with an optional round-trip time,
    consumed one per matching request; requests that do not match take no step."""
    fault = trikafka_broker.push_request_errors(
        "CreateTopics", ["POLICY_VIOLATION", ("NONE", 2.0), ("INVALID_REPLICATION_FACTOR", 0.5)], topic="seq"
    )
    async with trikafka_broker.client() as client:
        answers = []
        for name in ("seq", "other", "seq", "seq", "seq"):
            start = trio.current_time()
            answer = await client.request(create_topics(name))
            answers.append((name, answer.topics[0].error_code, trio.current_time() - start))
    assert answers == [
        ("seq", ErrorCode.policy_violation, 0.0),
        ("other", ErrorCode.none, 0.0),  # not matching: no step taken
        ("seq", ErrorCode.none, pytest.approx(2.0)),  # handled, 2 s later: created
        ("seq", ErrorCode.invalid_replication_factor, pytest.approx(0.5)),
        ("seq", ErrorCode.topic_already_exists, 0.0),  # the sequence is spent
    ]
    assert fault.applied == 3 and trikafka_broker.active_faults() == []


@pytest.mark.parametrize(
    ("errors", "message"),
    [([], "at least one error"), (["NOT_A_CODE"], "unknown error code"), ([("NONE", -1)], "non-negative")],
)
async def test_an_error_sequence_refuses_bad_steps(trikafka_broker, errors, message):
    with pytest.raises(ValueError, match=message):
        trikafka_broker.push_request_errors("Produce", errors)
    assert trikafka_broker.active_faults() == []


def _high_watermark_at_least(n: int):
    def condition(state) -> bool:
        log = state.partition_log("gate", 0)
        return log is not None and log.high_watermark.value >= n

    return condition


async def test_hold_until_parks_requests_until_the_broker_state_holds(trikafka_broker, autojump_clock):
    """kfake's SleepControl: a Metadata request waits, holding no handler, until a record is
    on gate-0; other APIs and other connections go on meanwhile."""
    fault = trikafka_broker.hold_until(_high_watermark_at_least(1), api="Metadata")
    answered: list[float] = []
    async with trikafka_broker.client() as parked, trikafka_broker.client() as writer:
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                await parked.request(metadata("gate"))
                answered.append(trio.current_time())

            nursery.start_soon(ask)
            await trio.sleep(60)
            assert answered == [] and fault.applied == 1
            await writer.request(create_topics("gate"))
            await trio.sleep(60)
            assert answered == []  # created, but no record yet
            written = trio.current_time()
            await writer.request(produce("gate", 0, b"x"))
        assert answered == [written]  # handled as soon as the record was on the log
    assert fault in trikafka_broker.active_faults()  # the default count: until removed
    async with trikafka_broker.client() as client:
        await client.request(metadata("gate"))  # the condition holds: not parked


async def test_removing_a_hold_until_lets_its_requests_go(trikafka_broker, autojump_clock):
    fault = trikafka_broker.hold_until(lambda state: False, api="Metadata", count=1)
    async with trikafka_broker.client() as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.request, metadata())
            await trio.sleep(30)
            assert fault.applied == 1 and fault.spent
            trikafka_broker.remove_fault(fault)
        assert trikafka_broker.active_faults() == []


async def test_rebootstrap_required_only_where_the_version_carries_it(trikafka_broker, autojump_clock):
    """KIP-1102: Metadata v13 has a top-level error code for REBOOTSTRAP_REQUIRED; an older
    version cannot say it, so the fault passes it by and waits for one that can."""
    fault = trikafka_broker.inject_error("Metadata", "REBOOTSTRAP_REQUIRED", count=1)
    async with trikafka_broker.client() as client:
        old = await client.request(metadata(version=12))
        assert fault.applied == 0 and old.brokers  # answered as usual
        new = await client.request(metadata(version=13))
        assert new.error_code == ErrorCode.rebootstrap_required
    assert fault.applied == 1

"""Topics, Produce, Fetch, ListOffsets and DeleteRecords through the project's client.

Each data-path API is exercised at every advertised version, because fields move between
versions (topic names become topic ids in Produce v13 and Fetch v13).
"""

from __future__ import annotations

import dataclasses

import pytest
import trio
from crc32c import crc32c

from trikafka.errors import ErrorCode
from trikafka.protocol.entities import build
from trikafka.protocol.records import build_batch, iter_batches, iter_records
from trikafka.protocol.registry import IMPLEMENTED_APIS, ApiRegistry
from trikafka.testing import open_test_broker

REGISTRY = ApiRegistry()


def versions(api_key: int) -> range:
    lo, hi = IMPLEMENTED_APIS[api_key]
    return range(lo, hi + 1)


def request(api_key: int, version: int, **fields):
    return build(REGISTRY.get(api_key, version).request_type, **fields)


async def create_topic(client, name: str, partitions: int = 1, configs=None, version: int = 7):
    response = await client.request(
        request(
            19,
            version,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            timeout=1000,
            validate_only=False,
        )
    )
    return response.topics[0]


async def metadata(client, names, version: int = 12, auto_create: bool = False):
    return await client.request(
        request(
            3,
            version,
            topics=None if names is None else [{"name": n, "topic_id": None} for n in names],
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
            include_cluster_authorized_operations=False,
        )
    )


async def produce(client, version, topic, topic_id, partition, batch, acks=-1):
    return await client.request(
        request(
            0,
            version,
            transactional_id=None,
            acks=acks,
            timeout=1000,
            topic_data=[
                {"name": topic, "topic_id": topic_id, "partition_data": [{"index": partition, "records": batch}]}
            ],
        )
    )


def fetch_request(
    version,
    topic,
    topic_id,
    partition,
    offset,
    *,
    max_wait=0,
    min_bytes=1,
    max_bytes=10_000_000,
    partition_max_bytes=1_000_000,
):
    return request(
        1,
        version,
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def records_of(data: bytes) -> list[tuple]:
    out = []
    for header in iter_batches(data):
        for record in iter_records(data, header):
            out.append((record.offset, record.key, record.value))
    return out


async def test_create_describe_delete_topic(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "orders", 3, {"retention.ms": "60000"})
        assert created.error_code == ErrorCode.none
        assert created.num_partitions == 3
        configs = {c.name: (c.value, c.config_source) for c in created.configs}
        assert configs["retention.ms"] == ("60000", 1)  # TOPIC_CONFIG
        assert configs["segment.bytes"] == ("1073741824", 5)  # DEFAULT_CONFIG
        again = await create_topic(client, "orders")
        assert again.error_code == ErrorCode.topic_already_exists
        md = await metadata(client, ["orders"])
        (topic,) = md.topics
        assert topic.error_code == ErrorCode.none and topic.topic_id == created.topic_id
        assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
        assert all(p.leader_id == 1 and p.isr_nodes == (1,) for p in topic.partitions)
        for version in versions(20):
            name = f"doomed-{version}"
            made = await create_topic(client, name)
            by_id = version >= 6
            response = await client.request(
                request(
                    20,
                    version,
                    topic_names=[name],
                    topics=[{"name": None if by_id else name, "topic_id": made.topic_id if by_id else None}],
                    timeout=1000,
                )
            )
            (result,) = response.responses
            assert result.error_code == ErrorCode.none, version
        md = await metadata(client, None)
        assert [t.name for t in md.topics] == ["orders"]


@pytest.mark.parametrize(
    "name, code",
    [
        ("", ErrorCode.invalid_topic_exception),
        ("..", ErrorCode.invalid_topic_exception),
        ("bad name", ErrorCode.invalid_topic_exception),
        ("x" * 250, ErrorCode.invalid_topic_exception),
        ("a.b", ErrorCode.invalid_topic_exception),  # collides with a_b
    ],
)
async def test_invalid_topic_names(autojump_clock, name, code):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "a_b")
        result = await create_topic(client, name)
        assert result.error_code == code
        assert result.error_message


async def test_create_topic_validation(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        for version in versions(19):
            response = await client.request(
                request(
                    19,
                    version,
                    topics=[
                        {"name": "rf3", "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []},
                        {
                            "name": "bad-config",
                            "num_partitions": 1,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [{"name": "retention.ms", "value": "soon"}],
                        },
                        {
                            "name": "unknown-config",
                            "num_partitions": 1,
                            "replication_factor": -1,
                            "assignments": [],
                            "configs": [{"name": "retention.msec", "value": "1"}],
                        },
                        {
                            "name": "zero",
                            "num_partitions": 0,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        },
                        {
                            "name": f"checked-{version}",
                            "num_partitions": 2,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        },
                    ],
                    timeout=1000,
                    validate_only=True,
                )
            )
            codes = [t.error_code for t in response.topics]
            assert codes == [
                ErrorCode.invalid_replication_factor,
                ErrorCode.invalid_config,
                ErrorCode.invalid_config,
                ErrorCode.invalid_partitions,
                ErrorCode.none,
            ], version
            assert "retention.ms" in response.topics[1].error_message
            assert "soon" in response.topics[1].error_message
        md = await metadata(client, None)
        assert md.topics == ()  # validate_only created nothing


async def test_auto_create_through_metadata(autojump_clock):
    async with open_test_broker(num_partitions=2) as tb, tb.client() as client:
        md = await metadata(client, ["fresh"], auto_create=False)
        assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        md = await metadata(client, ["fresh"], auto_create=True)
        assert md.topics[0].error_code == ErrorCode.none
        assert len(md.topics[0].partitions) == 2
    async with open_test_broker(auto_create_topics_enable=False) as tb, tb.client() as client:
        md = await metadata(client, ["fresh"], auto_create=True)
        assert md.topics[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_produce_and_fetch_at_every_version(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "data")
        topic_id = created.topic_id
        expected = []
        for version in versions(0):
            batch = build_batch([(f"k{version}".encode(), f"v{version}".encode(), [("h", b"1")], 1_700_000_000_000)])
            response = await produce(client, version, "data", topic_id, 0, batch)
            (partition,) = response.responses[0].partition_responses
            assert partition.error_code == ErrorCode.none, version
            assert partition.base_offset == len(expected)
            expected.append((len(expected), f"k{version}".encode(), f"v{version}".encode()))
        for version in versions(1):
            response = await client.request(fetch_request(version, "data", topic_id, 0, 0))
            (partition,) = response.responses[0].partitions
            assert partition.error_code == ErrorCode.none, version
            assert partition.high_watermark == len(expected)
            assert records_of(partition.records) == expected, version


async def test_produce_errors_are_per_partition(autojump_clock):
    async with open_test_broker(message_max_bytes=2000) as tb, tb.client() as client:
        created = await create_topic(client, "small", 2)
        ok = build_batch([(b"k", b"v", [], 1)])
        big = build_batch([(b"k", b"v" * 3000, [], 1)])
        response = await client.request(
            request(0, 9, transactional_id=None, acks=1, timeout=1000, topic_data=[
                {"name": "small", "partition_data": [
                    {"index": 0, "records": ok}, {"index": 1, "records": big}, {"index": 7, "records": ok}]},
                {"name": "missing", "partition_data": [{"index": 0, "records": ok}]},
            ])
        )
        codes = [[p.error_code for p in t.partition_responses] for t in response.responses]
        assert codes == [
            [ErrorCode.none, ErrorCode.message_too_large, ErrorCode.unknown_topic_or_partition],
            [ErrorCode.unknown_topic_or_partition],
        ]
        corrupt = bytearray(ok)
        corrupt[-1] ^= 0xFF
        response = await produce(client, 9, "small", created.topic_id, 0, bytes(corrupt), acks=1)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
        # An intact batch (CRC right) whose second record claims offset delta 2: the records
        # are walked once, before the log, and the batch is refused whole.
        two = bytearray(build_batch([(b"k", b"v", [], 1), (b"k", b"v", [], 1)]))
        assert two[73] == 0x02  # record 1's offset delta, zig-zag 1
        two[73] = 0x04
        two[17:21] = crc32c(bytes(two[21:])).to_bytes(4, "big")
        response = await produce(client, 9, "small", created.topic_id, 0, bytes(two), acks=1)
        partition = response.responses[0].partition_responses[0]
        assert (partition.error_code, partition.error_message) == (
            ErrorCode.invalid_record,
            "record 1 of batch at offset 0 has offset delta 2",
        )
        response = await produce(client, 9, "small", created.topic_id, 0, ok, acks=1)
        assert response.responses[0].partition_responses[0].base_offset == 1  # nothing appended
        response = await produce(client, 9, "small", created.topic_id, 0, ok, acks=2)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks


async def test_acks_zero_gets_no_response_and_unmutes(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "fire")
        body = request(0, 9, transactional_id=None, acks=0, timeout=1000, topic_data=[
            {"name": "fire", "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v", [], 1)])}]}])
        for _ in range(3):
            await client.send_no_response(body)
        # The next request on the same connection is answered: the connection unmuted.
        response = await client.request(fetch_request(12, "fire", created.topic_id, 0, 0))
        assert response.responses[0].partitions[0].high_watermark == 3


async def test_a_fetch_without_wait_that_finds_nothing_reads_again_after_ready_work_ran(autojump_clock):
    """fetch.max.wait.ms=0 and nothing to read: before answering, the handler lets every task
    ready at that moment run a step and reads again, so a produce that arrived with the fetch
    is in this answer rather than the busy-polling consumer's next round trip."""
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "busy")
        log = tb.broker.replica_manager.get_log("busy", 0)
        read_once = trio.Event()
        read = log.read

        def read_and_tell(*args, **kwargs):
            read_once.set()
            return read(*args, **kwargs)

        async def append_once_read():
            await read_once.wait()  # ready to run from the fetch's first read on
            log.append(build_batch([(b"k", b"now", [], 1)]), leader_epoch=0)

        log.read = read_and_tell
        async with trio.open_nursery() as nursery:
            nursery.start_soon(append_once_read)
            start = trio.current_time()
            response = await client.request(fetch_request(12, "busy", created.topic_id, 0, 0, max_wait=0))
        assert trio.current_time() == start  # no wait: max_wait is 0
        assert records_of(response.responses[0].partitions[0].records) == [(0, b"k", b"now")]


async def test_fetch_long_poll_waits_for_max_wait_in_virtual_time(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "quiet")
        start = trio.current_time()
        response = await client.request(
            fetch_request(12, "quiet", created.topic_id, 0, 0, max_wait=500, min_bytes=1)
        )
        assert trio.current_time() - start == pytest.approx(0.5)
        assert response.responses[0].partitions[0].records in (b"", None)


async def test_fetch_long_poll_returns_when_data_arrives(autojump_clock):
    async with open_test_broker() as tb, tb.client() as fetcher, tb.client() as producer:
        created = await create_topic(fetcher, "events")
        start = trio.current_time()
        result = {}

        async def poll():
            result["response"] = await fetcher.request(
                fetch_request(12, "events", created.topic_id, 0, 0, max_wait=30_000, min_bytes=1)
            )
            result["at"] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(2)
            assert tb.broker.path.purgatory.statistics().delayed == 1
            await produce(producer, 9, "events", created.topic_id, 0, build_batch([(b"k", b"hello", [], 1)]))
        assert result["at"] - start == pytest.approx(2.0)
        (partition,) = result["response"].responses[0].partitions
        assert records_of(partition.records) == [(0, b"k", b"hello")]


async def test_a_long_poll_over_several_partitions_wakes_on_any_of_them(autojump_clock):
    """One waiter watches every partition's end (EndOffset watchers): data on the third
    wakes the fetch at once, and nothing is left watching once it is answered."""
    async with open_test_broker() as tb, tb.client() as fetcher, tb.client() as producer:
        created = await create_topic(fetcher, "several", partitions=3)
        one = fetch_request(12, "several", created.topic_id, 0, 0, max_wait=30_000, min_bytes=1)
        partition = one.topics[0].partitions[0]
        wide = dataclasses.replace(
            one,
            topics=(
                dataclasses.replace(
                    one.topics[0],
                    partitions=tuple(dataclasses.replace(partition, partition=i) for i in range(3)),
                ),
            ),
        )
        logs = [tb.broker.replica_manager.get_log("several", i) for i in range(3)]
        result = {}
        start = trio.current_time()

        async def poll():
            result["response"] = await fetcher.request(wide)
            result["at"] = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(2)
            assert tb.broker.path.purgatory.statistics().delayed == 1
            assert all(len(log.high_watermark.watchers) == 1 for log in logs)
            await produce(producer, 9, "several", created.topic_id, 2, build_batch([(b"k", b"third", [], 1)]))
        assert result["at"] - start == pytest.approx(2.0)  # woken by the produce, not max_wait
        by_partition = {p.partition_index: p for p in result["response"].responses[0].partitions}
        assert records_of(by_partition[2].records) == [(0, b"k", b"third")]
        assert all(not log.high_watermark.watchers for log in logs)


async def test_fetch_sizes_follow_kip_74(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "sizes")
        for i in range(3):
            await produce(client, 9, "sizes", created.topic_id, 0, build_batch([(b"k", bytes([i]) * 1000, [], 1)]))
        # partition_max_bytes smaller than one batch still returns exactly one whole batch.
        response = await client.request(fetch_request(12, "sizes", created.topic_id, 0, 0, partition_max_bytes=10))
        assert [r[0] for r in records_of(response.responses[0].partitions[0].records)] == [0]
        # Enough for two batches returns two; fetching mid-log starts at the batch holding it.
        response = await client.request(fetch_request(12, "sizes", created.topic_id, 0, 1, partition_max_bytes=2200))
        assert [r[0] for r in records_of(response.responses[0].partitions[0].records)] == [1, 2]
        response = await client.request(fetch_request(12, "sizes", created.topic_id, 0, 9))
        assert response.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range


async def test_list_offsets_and_delete_records(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "timeline")
        for i, ts in enumerate([1000, 5000, 3000]):
            await produce(client, 9, "timeline", created.topic_id, 0, build_batch([(b"k", bytes([i]), [], ts)]))

        async def list_offsets(version, timestamp):
            response = await client.request(
                request(
                    2,
                    version,
                    replica_id=-1,
                    isolation_level=0,
                    timeout=1000,
                    topics=[
                        {
                            "name": "timeline",
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "current_leader_epoch": -1,
                                    "timestamp": timestamp,
                                    "max_num_offsets": 1,
                                }
                            ],
                        }
                    ],
                )
            )
            p = response.topics[0].partitions[0]
            return p.error_code, p.offset, p.timestamp

        for version in versions(2):
            assert (await list_offsets(version, -2))[:2] == (ErrorCode.none, 0)
            assert (await list_offsets(version, -1))[:2] == (ErrorCode.none, 3)
            assert await list_offsets(version, 2000) == (ErrorCode.none, 1, 5000)
            assert await list_offsets(version, 9000) == (ErrorCode.none, -1, -1)
        assert await list_offsets(7, -3) == (ErrorCode.none, 1, 5000)
        for version in versions(21):
            response = await client.request(request(21, version, timeout=1000, topics=[
                {"name": "timeline", "partitions": [{"partition_index": 0, "offset": version}]}]))
            p = response.topics[0].partitions[0]
            assert (p.error_code, p.low_watermark) == (ErrorCode.none, version)
        assert (await list_offsets(9, -2))[:2] == (ErrorCode.none, 2)
        response = await client.request(fetch_request(12, "timeline", created.topic_id, 0, 0))
        assert response.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
        response = await client.request(request(21, 2, timeout=1000, topics=[
            {"name": "timeline", "partitions": [{"partition_index": 0, "offset": 99}]}]))
        assert response.topics[0].partitions[0].error_code == ErrorCode.offset_out_of_range


async def test_create_partitions(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        await create_topic(client, "grow", 1)
        for version in versions(37):
            response = await client.request(request(37, version, topics=[
                {"name": "grow", "count": 2 + version, "assignments": None}], timeout=1000, validate_only=False))
            assert response.results[0].error_code == ErrorCode.none
        response = await client.request(request(37, 3, topics=[
            {"name": "grow", "count": 2, "assignments": None}], timeout=1000, validate_only=False))
        assert response.results[0].error_code == ErrorCode.invalid_partitions
        md = await metadata(client, ["grow"])
        assert len(md.topics[0].partitions) == 5


async def test_idempotent_producer_retries_are_not_duplicated(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "exactly-once")
        for version in versions(22):
            response = await client.request(request(22, version, transactional_id=None, transaction_timeout=60000,
                                                    producer_id=-1, producer_epoch=-1, keep_prepared_txn=False))
            assert response.error_code == ErrorCode.none and response.producer_epoch == 0
        pid = response.producer_id
        bumped = await client.request(request(22, 4, transactional_id=None, transaction_timeout=60000,
                                              producer_id=pid, producer_epoch=0))
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, 1)
        transactional = await client.request(request(22, 4, transactional_id="tx", transaction_timeout=60000,
                                                     producer_id=-1, producer_epoch=-1))
        assert transactional.error_code == ErrorCode.none  # tests/server/test_transactions.py
        assert transactional.producer_id != pid

        def batch(seq, epoch=0):
            return build_batch([(b"k", bytes([seq]), [], 1), (b"k", b"x", [], 1)],
                               producer_id=pid, producer_epoch=epoch, base_sequence=seq)

        async def send(b):
            r = await produce(client, 9, "exactly-once", created.topic_id, 0, b)
            p = r.responses[0].partition_responses[0]
            return p.error_code, p.base_offset

        assert await send(batch(0)) == (ErrorCode.none, 0)
        assert await send(batch(2)) == (ErrorCode.none, 2)
        assert await send(batch(2)) == (ErrorCode.none, 2)  # a retry: same offset, not appended
        assert (await send(batch(7)))[0] == ErrorCode.out_of_order_sequence_number
        assert await send(batch(0, epoch=1)) == (ErrorCode.none, 4)
        assert (await send(batch(4, epoch=0)))[0] == ErrorCode.invalid_producer_epoch
        response = await client.request(fetch_request(12, "exactly-once", created.topic_id, 0, 0))
        assert response.responses[0].partitions[0].high_watermark == 6


async def test_produce_between_first_read_and_purgatory_wakes_the_fetch(autojump_clock):
    """The race the benchmark found: data that lands after the handler's read but before the
    delayed fetch starts waiting must answer the fetch at once, not after max_wait."""
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "race")
        purgatory = tb.broker.path.purgatory
        real_delay = purgatory.delay
        handed_over = []
        delayed = trio.Event()

        def hold(fn, *args, name):
            handed_over.append((fn, args, name))
            delayed.set()

        purgatory.delay = hold
        result = {}

        async def poll():
            result["response"] = await client.request(
                fetch_request(12, "race", created.topic_id, 0, 0, max_wait=30_000, min_bytes=1)
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await delayed.wait()
            purgatory.delay = real_delay
            replicas = tb.broker.replica_manager
            await replicas.append_records(replicas.topics.get("race"), 0, build_batch([(b"k", b"late", [], 1)]), 1)
            start = trio.current_time()
            fn, args, name = handed_over[0]
            real_delay(fn, *args, name=name)
        assert trio.current_time() - start == 0  # answered at once
        (partition,) = result["response"].responses[0].partitions
        assert records_of(partition.records) == [(0, b"k", b"late")]


async def test_topic_deleted_during_a_long_poll(autojump_clock, caplog):
    async with open_test_broker() as tb, tb.client() as fetcher, tb.client() as admin:
        created = await create_topic(admin, "short-lived")
        result = {}

        async def poll():
            result["response"] = await fetcher.request(
                fetch_request(12, "short-lived", created.topic_id, 0, 0, max_wait=5_000, min_bytes=1)
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(1)
            response = await admin.request(
                request(20, 6, topics=[{"name": None, "topic_id": created.topic_id}], timeout=1000)
            )
            assert response.responses[0].error_code == ErrorCode.none
        (partition,) = result["response"].responses[0].partitions
        assert partition.error_code == ErrorCode.unknown_topic_or_partition
        assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_metadata_answers_follow_topic_changes(autojump_clock):
    """The same question, asked again after each change, sees the change (answers are cached)."""

    async def grow(client, name, count):
        response = await client.request(request(37, 3, topics=[
            {"name": name, "count": count, "assignments": None}], timeout=1000, validate_only=False))
        assert response.results[0].error_code == ErrorCode.none

    async def delete(client, name):
        response = await client.request(request(20, 5, topic_names=[name], topics=[], timeout=1000))
        assert response.responses[0].error_code == ErrorCode.none

    def shape(md):
        return [(t.name, t.error_code, t.topic_id, len(t.partitions)) for t in md.topics]

    async with open_test_broker() as tb, tb.client() as client:
        for names in (["t"], None):
            assert shape(await metadata(client, names)) == (
                [("t", ErrorCode.unknown_topic_or_partition, None, 0)] if names else []
            )
            first = await create_topic(client, "t", 1)
            assert shape(await metadata(client, names)) == [("t", ErrorCode.none, first.topic_id, 1)]
            assert shape(await metadata(client, names)) == [("t", ErrorCode.none, first.topic_id, 1)]
            await grow(client, "t", 3)
            assert shape(await metadata(client, names)) == [("t", ErrorCode.none, first.topic_id, 3)]
            await delete(client, "t")
            second = await create_topic(client, "t", 2)
            assert second.topic_id != first.topic_id
            assert shape(await metadata(client, names)) == [("t", ErrorCode.none, second.topic_id, 2)]
            await delete(client, "t")
            md = await metadata(client, names, auto_create=True)
            if names:  # auto-created again: a new id
                assert md.topics[0].error_code == ErrorCode.none
                assert md.topics[0].topic_id not in (first.topic_id, second.topic_id)
                await delete(client, "t")
            else:
                assert shape(md) == []


@pytest.mark.parametrize("storage", ["memory", "file"])
async def test_large_batches_are_appended_from_frame_views_through_one_copy(autojump_clock, tmp_path, storage):
    """Batches of 8 KiB or more arrive as views of the request frame and are copied once
    into the buffer the log patches and keeps or writes; every batch reads back as produced
    after later requests reused the frame buffers."""
    from trikafka.protocol.guard import LIFT_RECORDS_MIN

    overrides = {"log_dirs": str(tmp_path)} if storage == "file" else {}
    async with open_test_broker(**overrides) as tb, tb.client() as client:
        created = await create_topic(client, "big", partitions=2)
        expected: dict[int, list[tuple]] = {0: [], 1: []}
        for round_ in range(4):
            for partition in (0, 1):
                # Odd rounds: frames over 64 KiB, received into the reused large-frame buffer.
                value = bytes([65 + round_ + partition]) * (3000 if round_ % 2 == 0 else 20_000)
                batch = build_batch([(f"k{round_}-{i}".encode(), value, [], 1) for i in range(4)])
                assert len(batch) >= LIFT_RECORDS_MIN
                response = await produce(client, 9, "big", created.topic_id, partition, batch)
                (answer,) = response.responses[0].partition_responses
                assert answer.error_code == ErrorCode.none
                base = len(expected[partition])
                expected[partition] += [(base + i, f"k{round_}-{i}".encode(), value) for i in range(4)]
        for partition in (0, 1):
            response = await client.request(fetch_request(12, "big", created.topic_id, partition, 0))
            (got,) = response.responses[0].partitions
            assert records_of(got.records) == expected[partition]
            for header in iter_batches(got.records):  # CRCs hold: patched, not corrupted
                assert header.record_count == 4


async def test_recorded_produce_bodies_keep_their_records_after_the_frame_buffer_is_reused(autojump_clock):
    """The recorder keeps decoded bodies past the response; lifted records are views of a
    frame buffer the next large request overwrites, so a recorded body must own its bytes."""
    async with open_test_broker() as tb, tb.client() as client:
        created = await create_topic(client, "rec", partitions=1)
        tb.faults.recorder.start()
        sent = []
        for fill in (b"A", b"B", b"C"):
            batch = build_batch([(b"k", fill * 20_000, [], 1) for _ in range(4)])  # > 64 KiB frames
            sent.append(batch)
            response = await produce(client, 9, "rec", created.topic_id, 0, batch)
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        recorded = tb.faults.recorder.requests("Produce")
        got = [bytes(r.body.topic_data[0].partition_data[0].records) for r in recorded]
        assert got == sent

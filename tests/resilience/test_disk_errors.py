"""A disk that fills, fails or turns read-only under a running broker.

The fault layer is :class:`DiskFaults`, a :class:`~trikafka.log.storage.FileIO` under real
file logs in a real directory: while a fault is set, a write first goes half through (as a
full disk does) and then fails with the chosen errno; fsync fails likewise. (A 1 MiB tmpfs
would need root to mount; the fault layer runs anywhere and reaches EIO and EROFS too.)

What must hold (issue 15): the failed append leaves the log exactly as before — file size,
log end offset, indexes, max timestamp, producer state; the client gets
KAFKA_STORAGE_ERROR; appends resume when the disk does; the stop is clean; nothing
acknowledged is lost across a restart.
"""

from __future__ import annotations

import errno
import logging
import os

import pytest
import trio

from trikafka.errors import ErrorCode
from trikafka.log import LogConfig, LogManager
from trikafka.log.checkpoints import BULK_SYNC_SEGMENTS
from trikafka.log.storage import FileIO, KafkaStorageError
from trikafka.protocol.records import build_batch, iter_batches
from trikafka.testing import open_test_broker

from ..server.test_topics_and_data import create_topic, produce, request

ERRNOS = [errno.ENOSPC, errno.EIO, errno.EROFS]


class DiskFaults(FileIO):
    """Raise ``fault`` (an errno) on writes and fsyncs while it is set; half a write first."""

    def __init__(self) -> None:
        self.fault: int | None = None
        self.failed_writes = 0
        self.gathered_writes = 0  # pwritev calls
        self.syncfs_calls = 0
        self.syncfs_fault: int | None = None  # only syncfs fails (writes go through)
        self._half_written = False

    def _raise(self) -> None:
        assert self.fault is not None
        raise OSError(self.fault, os.strerror(self.fault))

    def pwrite(self, fd: int, data, position: int) -> int:
        if self.fault is None:
            return super().pwrite(fd, data, position)
        if len(data) > 1 and not self._half_written:
            self._half_written = True
            return super().pwrite(fd, memoryview(data)[: len(data) // 2], position)
        self._half_written = False
        self.failed_writes += 1
        self._raise()

    def pwritev(self, fd: int, parts, position: int) -> int:
        """As ``pwrite``: half of the parts' bytes go out first, then the fault."""
        self.gathered_writes += 1
        if self.fault is None:
            return super().pwritev(fd, parts, position)
        total = sum(len(part) for part in parts)
        if total > 1 and not self._half_written:
            self._half_written = True
            return super().pwrite(fd, b"".join(parts)[: total // 2], position)
        self._half_written = False
        self.failed_writes += 1
        self._raise()

    def fsync(self, fd: int) -> None:
        if self.fault is not None:
            self._raise()
        super().fsync(fd)

    def syncfs(self, fd: int) -> None:
        self.syncfs_calls += 1
        if self.syncfs_fault is not None:
            raise OSError(self.syncfs_fault, os.strerror(self.syncfs_fault))
        super().syncfs(fd)


def batch(i: int, producer_id: int = -1, sequence: int = -1) -> bytearray:
    return bytearray(
        build_batch(
            [(b"k%d" % i, b"v" * 200, [], 1_700_000_000_000 + i)],
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=sequence,
        )
    )


def offsets_in(log) -> list[int]:
    """Every batch's base offset, read back segment by segment."""
    found: list[int] = []
    while (not found or found[-1] + 1 < log.log_end_offset):
        data = log.read(found[-1] + 1 if found else 0, 10**6).records
        found += [h.base_offset for h in iter_batches(data)]
    return found


def snapshot(log) -> tuple:
    return (
        log.log_end_offset,
        log.high_watermark.value,
        log.max_timestamp,
        [(s.base_offset, s.size, s.next_offset) for s in log.segments],
        [s.offset_index.entries() for s in log.segments],
        [s.time_index.entries() for s in log.segments],
        [os.path.getsize(s.store.paths[".log"]) for s in log.segments],
    )


@pytest.mark.parametrize("fault", ERRNOS, ids=errno.errorcode.get)
def test_a_failed_append_leaves_the_log_as_it_was(tmp_path, fault, caplog):
    faults = DiskFaults()
    manager = LogManager([tmp_path], LogConfig(index_interval_bytes=100, segment_bytes=2000), io=faults)
    log = manager.get_or_create_log("t", 0)
    for i in range(5):
        log.append(batch(i), leader_epoch=0)
    before = snapshot(log)

    faults.fault = fault
    for i in range(5, 20):  # enough to cross index intervals and a segment roll
        with pytest.raises(KafkaStorageError) as failed:
            log.append(batch(i), leader_epoch=0)
        assert failed.value.error_code == ErrorCode.kafka_storage_error
        assert os.strerror(fault) in str(failed.value)
        assert snapshot(log) == before
    assert faults.failed_writes == 15

    faults.fault = None
    for i in range(5, 7):
        log.append(batch(i), leader_epoch=0)  # the active segment is now nearly full
    before = snapshot(log)
    faults.fault = fault
    with pytest.raises(KafkaStorageError):
        log.append(batch(7), leader_epoch=0)  # rolls a new segment, then cannot write
    after = snapshot(log)
    # Exactly as before, but for the max-timestamp entry a roll gives the old segment's
    # time index (Kafka's rule; it only restates what the segment holds).
    assert after[:5] + after[6:] == before[:5] + before[6:]
    assert os.listdir(tmp_path / "t-0") == ["00000000000000000000.log"]  # the roll undone

    faults.fault = None  # space is back: the very next append goes through
    for i in range(7, 20):
        assert log.append(batch(i), leader_epoch=0).first_offset == i
    assert offsets_in(log) == list(range(20))
    manager.close()

    with caplog.at_level(logging.WARNING):
        again = LogManager([tmp_path], LogConfig(index_interval_bytes=100, segment_bytes=2000))
    assert not caplog.records  # nothing to recover: the file held no half batch
    assert again.get_log("t", 0).log_end_offset == 20
    again.close()


def large(i: int) -> memoryview:
    """Two batches of 5 KiB records as a Produce request holds them: a read-only view, which
    the file log writes in parts (header copies and the records where they are)."""
    data = b"".join(
        build_batch([(b"k%d" % i, b"v" * 5_000, [], 1_700_000_000_000 + i)]) for _ in range(2)
    )
    return memoryview(data).toreadonly()


@pytest.mark.parametrize("fault", ERRNOS, ids=errno.errorcode.get)
def test_a_failed_append_in_parts_leaves_the_log_as_it_was(tmp_path, fault, caplog):
    faults = DiskFaults()
    manager = LogManager([tmp_path], LogConfig(index_interval_bytes=100), io=faults)
    log = manager.get_or_create_log("t", 0)
    for i in range(3):
        log.append(large(i), leader_epoch=0)
    before = snapshot(log)

    faults.fault = fault
    for i in range(3, 6):  # half of the parts' bytes written, then the fault: cut off again
        with pytest.raises(KafkaStorageError) as failed:
            log.append(large(i), leader_epoch=0)
        assert os.strerror(fault) in str(failed.value)
        assert snapshot(log) == before
    assert faults.failed_writes == 3
    assert faults.gathered_writes == 3 + 3 * 2  # every append in parts

    faults.fault = None
    assert log.append(large(3), leader_epoch=0).first_offset == 6
    assert offsets_in(log) == list(range(8))
    manager.close()

    with caplog.at_level(logging.WARNING):
        again = LogManager([tmp_path], LogConfig(index_interval_bytes=100))
    assert not caplog.records  # the file held no half batch
    assert again.get_log("t", 0).log_end_offset == 8
    again.close()


def test_a_failed_fsync_is_retried_and_the_stop_is_clean(tmp_path, caplog):
    faults = DiskFaults()
    manager = LogManager([tmp_path], io=faults)
    log = manager.get_or_create_log("t", 0)
    log.append(batch(0), leader_epoch=0)
    faults.fault = errno.EIO
    with pytest.raises(KafkaStorageError, match="Input/output error"):
        log.flush()
    assert log.recovery_point == 0  # not past what was not made durable
    faults.fault = None
    log.flush()
    assert log.recovery_point == 1


async def test_a_bulk_flush_is_one_syncfs_per_dir_and_fails_whole(tmp_path):
    """After recovering many partitions every segment is dirty; a stop fsynced them one by
    one (4,500 fsyncs for 1,500 partitions, over 20 s here). Past BULK_SYNC_SEGMENTS the
    flush is one syncfs per log dir, and a failing one leaves every log dirty."""
    faults = DiskFaults()
    manager = LogManager([tmp_path], io=faults)
    logs = [manager.get_or_create_log("t", p) for p in range(BULK_SYNC_SEGMENTS)]
    for log in logs:
        log.append(batch(0), leader_epoch=0)
    faults.fault = errno.EIO  # the index writes before the sync fail: nothing marked clean
    with pytest.raises(KafkaStorageError, match="Input/output error"):
        await manager.flush_logs(logs)
    assert {log.recovery_point for log in logs} == {0}
    faults.fault, faults.syncfs_fault = None, errno.EIO  # now the syncfs itself fails
    with pytest.raises(KafkaStorageError, match="Input/output error"):
        await manager.flush_logs(logs)
    assert {log.recovery_point for log in logs} == {0}
    faults.syncfs_fault = None
    await manager.flush_logs(logs)
    assert {log.recovery_point for log in logs} == {1}
    assert faults.syncfs_calls == 2  # one per attempt, for the one log dir
    manager.close()


async def test_the_broker_answers_storage_error_and_resumes(tmp_path, autojump_clock, caplog):
    faults = DiskFaults()
    async with open_test_broker(log_dirs=str(tmp_path)) as tb:
        tb.broker.log_manager.io = faults  # the topic's logs are created below, through it
        async with tb.client() as client:
            await create_topic(client, "disk")
            ok = await produce(client, 9, "disk", None, 0, batch(0, producer_id=7, sequence=0))
            assert ok.responses[0].partition_responses[0].error_code == ErrorCode.none

            faults.fault = errno.ENOSPC
            for _ in range(3):  # the producer's retries, while the disk is full
                failed = await produce(client, 9, "disk", None, 0, batch(1, producer_id=7, sequence=1))
                part = failed.responses[0].partition_responses[0]
                assert part.error_code == ErrorCode.kafka_storage_error

            faults.fault = None
            retried = await produce(client, 9, "disk", None, 0, batch(1, producer_id=7, sequence=1))
            part = retried.responses[0].partition_responses[0]
            # Producer state did not move on the failed tries: the retry is appended, once.
            assert (part.error_code, part.base_offset) == (ErrorCode.none, 1)
            again = await produce(client, 9, "disk", None, 0, batch(1, producer_id=7, sequence=1))
            assert again.responses[0].partition_responses[0].base_offset == 1  # a duplicate
        assert tb.broker.log_manager.get_log("disk", 0).log_end_offset == 2
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_stop_on_a_failing_disk_is_clean(tmp_path, autojump_clock, caplog):
    faults = DiskFaults()
    async with open_test_broker(log_dirs=str(tmp_path)) as tb:
        tb.broker.log_manager.io = faults
        async with tb.client() as client:
            await create_topic(client, "disk")
            await produce(client, 9, "disk", None, 0, batch(0))
        faults.fault = errno.EIO  # the final flush fails
    assert "Stopping with a failing disk" in caplog.text
    assert not [r for r in caplog.records if r.exc_info]
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # the next start recovers


async def test_a_coordinator_timer_survives_a_failing_disk(tmp_path, autojump_clock, caplog):
    """A session timeout rewrites the group in __consumer_offsets from a timer task: on a
    failing disk that write fails, is logged once, and the broker keeps serving."""
    faults = DiskFaults()
    async with open_test_broker(log_dirs=str(tmp_path), group_initial_rebalance_delay_ms=0) as tb:
        tb.broker.log_manager.io = faults
        async with tb.client() as client:
            joined = await client.request(_join("g"))
            assert joined.error_code == ErrorCode.none
            synced = await client.request(
                request(14, 3, group_id="g", generation_id=joined.generation_id, member_id=joined.member_id,
                        group_instance_id=None, assignments=[{"member_id": joined.member_id, "assignment": b""}])
            )
            assert synced.error_code == ErrorCode.none
            faults.fault = errno.ENOSPC
            await trio.sleep(30)  # past the 10 s session timeout: the member expires
            assert "group coordinator: " in caplog.text and "No space left on device" in caplog.text
            faults.fault = None
            versions = await client.request(request(18, 3, client_software_name="t", client_software_version="1"))
            assert versions.error_code == ErrorCode.none
            described = await client.request(request(15, 0, groups=["g"]))
            assert described.groups[0].error_code == ErrorCode.none
    assert not [r for r in caplog.records if r.exc_info]


def _join(group: str):
    return request(
        11, 3, group_id=group, session_timeout=10_000, rebalance_timeout=10_000, member_id="",
        protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}],
    )

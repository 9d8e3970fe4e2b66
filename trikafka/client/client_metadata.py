"""The client core's metadata half (Java's ``Metadata`` updates): a base of ``KafkaClient``.

A background task (:meth:`MetadataRefresh.run_metadata_refresh`) refreshes when
:meth:`ClusterMetadata.next_refresh` says so; callers ask for a refresh and wait for one
(:meth:`refresh_metadata`), or for a topic (:meth:`wait_for_topic`). Failed refreshes back off
(``retry.backoff.ms``) and are logged once per outage — never while the client closes, when a
failure is the expected end of the connections, not news.

Kept apart from :mod:`trikafka.client.client` so each class stays one responsibility; it uses
the core's ``send``, ``least_loaded_node``, ``retry_sleep``, ``cluster``, ``config``,
``seen`` and ``closed``.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from trikafka.client.cluster import ClusterMetadata
from trikafka.client.config import ClientConfig
from trikafka.client.deadlines import Sightings, seconds, timeout_error
from trikafka.client.errors import KafkaConnectionError, KafkaError, UnknownTopicOrPartitionError, error_for
from trikafka.errors import ErrorCode
from trikafka.protocol.registry import ApiKey

__all__ = ["MetadataRefresh"]

log = logging.getLogger("trikafka.client.client")


class MetadataRefresh:
    cluster: ClusterMetadata
    config: ClientConfig
    seen: Sightings
    closed: bool
    allow_auto_topic_creation: bool
    metadata_error: KafkaError | None

    def _init_metadata(self) -> None:
        self._metadata_wakeup = trio.Event()
        self._metadata_updated = trio.Event()
        self.metadata_error = None

    async def send(self, node_id: int, api_key: int, **fields: Any) -> Any:
        raise NotImplementedError

    def least_loaded_node(self) -> int:
        raise NotImplementedError

    async def retry_sleep(self, attempt: int) -> None:
        raise NotImplementedError

    async def run_metadata_refresh(self) -> None:
        """Refresh metadata whenever it is due; failed refreshes back off (retry.backoff.ms)."""
        attempt = 0
        while True:
            due = self.cluster.next_refresh(trio.current_time())
            with trio.move_on_at(due):
                await self._metadata_wakeup.wait()
            self._metadata_wakeup = trio.Event()
            if self.cluster.next_refresh(trio.current_time()) > trio.current_time():
                continue
            try:
                await self._refresh_once()
                attempt = 0
                self.metadata_error = None
            except KafkaError as exc:
                if self.closed:
                    return  # the client is closing: its connections went first, as they should
                self.seen.saw(f"metadata refresh failed: {exc}")
                if not exc.retriable:
                    # Java's Metadata keeps a fatal error (a refused SASL login, an
                    # unsupported version) for the callers waiting on metadata to throw.
                    self.metadata_error = exc
                    self._metadata_updated.set()
                    self._metadata_updated = trio.Event()
                if attempt == 0 and not isinstance(exc, KafkaConnectionError):
                    # One line per outage, not per retry; a connection that failed was
                    # logged once per address already (deadlines.Sightings).
                    log.warning("metadata refresh failed (%s); retrying with backoff", exc)
                else:
                    log.debug("metadata refresh failed (%s); retry %d", exc, attempt + 1)
                await self.retry_sleep(attempt)
                attempt += 1

    async def _refresh_once(self) -> None:
        node_id = self.least_loaded_node()
        answer = await self.send(
            node_id,
            ApiKey.METADATA,
            topics=None
            if (topics := self.cluster.request_topics()) is None
            else [{"name": t, "topic_id": None} for t in topics],
            allow_auto_topic_creation=self.allow_auto_topic_creation,
        )
        self.cluster.update(answer, trio.current_time())
        self._metadata_updated.set()
        self._metadata_updated = trio.Event()

    def request_metadata_update(self) -> None:
        """Mark metadata stale and wake the refresher (after NOT_LEADER_OR_FOLLOWER & co)."""
        self.cluster.request_update()
        self._metadata_wakeup.set()

    async def refresh_metadata(self) -> None:
        """Ask for a refresh now and wait until one has completed (unbounded: callers bound it)."""
        version = self.cluster.version
        self.request_metadata_update()
        while self.cluster.version == version:
            await self._metadata_updated.wait()
            error = self.metadata_error
            if error is not None and self.cluster.version == version:
                raise KafkaError(error.error_code, str(error).partition(": ")[2], retriable=False)

    async def wait_for_topic(self, topic: str, limit_s: float | None = None) -> int:
        """The topic's partition count, refreshing metadata until it is known.

        UNKNOWN_TOPIC_OR_PARTITION is retried (the broker may be auto-creating it) until
        ``limit_s`` (default ``max.block.ms`` / ``default.api.timeout.ms``); then, or on a
        non-retriable topic error, the error is raised: UNKNOWN_TOPIC_OR_PARTITION when a
        broker kept saying so, a connection error naming the addresses when none answered.
        """
        key = "max.block.ms" if "max.block.ms" in self.config.values else "default.api.timeout.ms"
        if limit_s is None:
            limit_s = self.config[key] / 1000
        self.cluster.add_interest([topic])
        with trio.move_on_after(limit_s):
            while True:
                count = self.cluster.partition_count(topic)
                if count is not None and len(self.cluster.available_partitions(topic)) == count:
                    return count
                error = self.cluster.topic_error(topic)
                if error is not None and not error.retriable:
                    raise error_for(error, f"topic {topic!r}")
                if error == ErrorCode.unknown_topic_or_partition:  # what a bounded caller reports
                    self.seen.saw_error(
                        f"Metadata of topic {topic!r}", UnknownTopicOrPartitionError(f"topic {topic!r}")
                    )
                await self.refresh_metadata()
        what = f"metadata of topic {topic!r}"
        error = self.cluster.topic_error(topic)
        if error == ErrorCode.unknown_topic_or_partition:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} does not exist: the cluster answered UNKNOWN_TOPIC_OR_PARTITION for "
                f"{seconds(limit_s)} ({key})"
            )
        raise timeout_error(self, what, key, limit_s)

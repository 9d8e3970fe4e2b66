"""ShareFetch (78) and ShareAcknowledge (79), v1–v2 (KIP-932, KIP-1222's RENEW).

Theory of operation. A ShareFetch first settles its share session (``coordinator/share/
sessions.py``: epoch 0 opens one with the request's partitions, a later epoch adds what the
request names and drops its forgotten partitions), then applies the acknowledgements it
carries (each partition answers for its own in ``acknowledge_error_code``) — only then does
what the member holds on a forgotten partition go back — then acquires records for the
member on every partition of the session this broker leads (``server/share_reader.py``), up
to ``max_records`` in all and ``max_bytes``. A share partition not yet initialized (never
read by the group) is initialized by the fetch only while it has acquired nothing else, as
Kafka answers with the first partition whose state is loaded: a fetch over several new ones
answers one. When nothing was acquired
and ``max_wait`` is above zero the request waits in the purgatory, level-triggered, for any of
its partitions' ends (high watermark, or LSO under read_committed) to grow or for records to be
released (:attr:`ShareCoordinator.released`), then acquires again; ``max_wait`` on trio's clock
bounds it, and it answers with nothing then. ``min_bytes`` is met by any acquired record.

ShareAcknowledge applies acknowledgements in the session (epoch > 0) or closes it (epoch -1,
after applying them: what the member still holds is released). Epoch 0 is
INVALID_SHARE_SESSION_EPOCH there. ACLs as Kafka: READ on the group (the whole request), READ
on each topic (TOPIC_AUTHORIZATION_FAILED for that partition). A partition this broker does
not lead answers NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
import trio

from trikafka.coordinator.share.partition import AckType
from trikafka.coordinator.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.features import require_share_groups
from trikafka.server.kafka_apis import Answer, ApiFamily, handles
from trikafka.server.replica.cluster_view import cluster_view, leader_endpoints
from trikafka.server.share_reader import initial_offset, read_and_acquire

__all__ = ["ShareFetchApis"]

log = logging.getLogger("trikafka.server")

TopicPartition = tuple[str, int]


class ShareFetchApis(ApiFamily):
    # --- shared by both APIs --------------------------------------------------------------

    def _check(self, request: Request) -> None:
        body = request.body
        if not body.group_id or not body.member_id:
            raise KafkaProtocolError("GroupId and MemberId are required.", ErrorCode.invalid_request)
        self.require(request, AclOperation.READ, ResourceType.GROUP, body.group_id)

    def _partition_error(
        self, request: Request, name: str | None, partition: int
    ) -> tuple[ErrorCode, dict[Any, Any] | None]:
        if name is None:
            return ErrorCode.unknown_topic_id, None
        info = self.replicas.topics.get(name)
        if info is None or not 0 <= partition < info.partitions:
            return ErrorCode.unknown_topic_or_partition, None
        if not self.authorize(request, AclOperation.READ, ResourceType.TOPIC, name):
            return ErrorCode.topic_authorization_failed, None
        lead = cluster_view(self.context).leadership(name, partition)
        leader = {"leader_id": lead.leader, "leader_epoch": lead.leader_epoch}
        if lead.leader != self.context.config.node_id:
            return ErrorCode.not_leader_or_follower, leader
        return ErrorCode.none, leader

    def _acknowledge(self, request: Request, group_id: str, member_id: str, topics: Any,
                     results: dict[TopicPartition, dict[str, Any]], field: str) -> None:
        """Apply every acknowledgement batch of ``topics``; each partition's outcome goes to
        ``results[tp][field]``."""
        shares = self.context.shares
        limits = shares.limits(group_id)
        now = trio.current_time()
        for topic in topics:
            info = self.replicas.topic_by_id(topic.topic_id)
            for p in topic.partitions:
                if not p.acknowledgement_batches:
                    continue
                name = info.name if info is not None else None
                result = results.setdefault((name or str(topic.topic_id), p.partition_index),
                                            _partition(topic.topic_id, p.partition_index))
                code, leader = self._partition_error(request, name, p.partition_index)
                if leader is not None:
                    result["current_leader"] = leader
                if code != ErrorCode.none or name is None:  # NONE only for a known topic
                    result[field] = code
                    if name is not None:
                        self.context.metrics.record_share_ack(name, True)
                    continue
                sp = shares.share_partition(group_id, name, p.partition_index, str(topic.topic_id))
                try:
                    for batch in p.acknowledgement_batches:
                        if AckType.RENEW in batch.acknowledge_types and request.api_version < 2:
                            raise KafkaProtocolError("RENEW needs version 2", ErrorCode.invalid_request)
                        sp.acknowledge(member_id, batch.first_offset, batch.last_offset,
                                       tuple(batch.acknowledge_types), now, limits)
                except KafkaProtocolError as exc:
                    result[field] = exc.error_code
                    result[field.replace("code", "message")] = str(exc)
                shares.changed(sp)
                self.context.metrics.record_share_ack(name, result[field] != ErrorCode.none)

    def _respond(self, request: Request, results: dict[TopicPartition, dict[str, Any]], **top: Any) -> Answer:
        topics: dict[Any, dict[str, Any]] = {}
        leaders = []
        for result in results.values():
            topic_id = result.pop("topic_id")
            topics.setdefault(topic_id, {"topic_id": topic_id, "partitions": []})["partitions"].append(result)
            if result.get("error_code") == ErrorCode.not_leader_or_follower:
                leaders.append(result["current_leader"]["leader_id"])
        endpoints = leader_endpoints(cluster_view(self.context), leaders, request.listener_name) if leaders else []
        return Answer(throttle_time=0, error_code=ErrorCode.none, error_message=None,
                      responses=list(topics.values()), node_endpoints=endpoints, **top)

    # --- ShareFetch ---------------------------------------------------------------------------

    def _session(self, request: Request) -> tuple[ShareSession, list[TopicPartition], list[TopicPartition]]:
        """Settle the share session; (the session, the unknown topic-partitions named, the
        partitions it forgot: what the member holds there goes back once the request's own
        acknowledgements — often for those very partitions — are applied)."""
        body = request.body
        shares = self.context.shares
        named: list[TopicPartition] = []
        unknown: list[TopicPartition] = []
        for topic in body.topics:
            info = self.replicas.topic_by_id(topic.topic_id)
            for p in topic.partitions:
                (named if info is not None else unknown).append(
                    (info.name if info is not None else str(topic.topic_id), p.partition_index))
        epoch = body.share_session_epoch
        if epoch == INITIAL_EPOCH:
            if any(p.acknowledgement_batches for t in body.topics for p in t.partitions):
                raise KafkaProtocolError("Acknowledgements are not allowed when opening a share session.",
                                         ErrorCode.invalid_request)
            session, old = shares.sessions.open(body.group_id, body.member_id, named, self.context.config.node_id)
            if old is not None:
                shares.release_session(old)
            return session, unknown, []
        session = shares.sessions.get(body.group_id, body.member_id, epoch, self.context.config.node_id)
        if epoch == FINAL_EPOCH:
            return session, unknown, []
        forgotten: set[tuple[str, int]] = set()
        for topic in body.forgotten_topics_data or ():
            info = self.replicas.topic_by_id(topic.topic_id)
            if info is not None:
                forgotten.update((info.name, p) for p in topic.partitions)
        for tp in named:
            if tp not in session.partitions:
                session.partitions.append(tp)
        dropped = [tp for tp in session.partitions if tp in forgotten]
        session.partitions = [tp for tp in session.partitions if tp not in forgotten]
        session.next_epoch()
        return session, unknown, dropped

    def _acquire(
        self, request: Request, session: ShareSession, results: dict[TopicPartition, dict[str, Any]]
    ) -> tuple[int, bool]:
        """Acquire records on the session's partitions into ``results``; (records, errors)."""
        body = request.body
        shares = self.context.shares
        configs = shares.configs(body.group_id)
        limits = shares.limits(body.group_id)
        committed = configs["share.isolation.level"] == "read_committed"
        budget_records = body.max_records  # 0: acknowledgements only, nothing acquired
        budget_bytes = body.max_bytes
        total, errors = 0, False
        for name, partition in session.partitions:
            info = self.replicas.topics.get(name)
            key = (name, partition)
            code, leader = self._partition_error(request, name, partition)
            if code != ErrorCode.none or info is None:  # NONE only for a known topic
                result = results.setdefault(key, _partition(info.topic_id if info else None, partition))
                result["error_code"] = code
                if leader is not None:
                    result["current_leader"] = leader
                errors = True
                continue
            if budget_records <= 0 or budget_bytes <= 0:
                continue
            existing = shares.partitions.get((body.group_id, name, partition))
            if total and (existing is None or not existing.loaded):
                continue  # loaded by a later fetch: Kafka answers with the partitions ready first
            started = trio.current_time()
            partition_log = self.replicas.get_log(name, partition)
            sp = shares.share_partition(body.group_id, name, partition, str(info.topic_id))
            if not sp.initialized:
                sp.initialize(initial_offset(partition_log, configs["share.auto.offset.reset"], self.context.now_ms()))
            if not sp.loaded:
                sp.loaded = True
                self.context.metrics.share_partition_load_ms.record((trio.current_time() - started) * 1000)
            read = read_and_acquire(sp, partition_log, body.member_id, max_records=budget_records,
                                    max_bytes=budget_bytes, now=started, limits=limits,
                                    committed=committed)
            self.context.metrics.record_share_partition_fetch(
                (body.group_id, name, partition), started, trio.current_time(),
                [last - first + 1 for first, last, _ in read.acquired],
            )
            shares.changed(sp)
            if not read.acquired:
                continue
            result = results.setdefault(key, _partition(info.topic_id, partition))
            result["current_leader"] = leader
            result["records"] = read.records
            result["acquired_records"] = [
                {"first_offset": f, "last_offset": last, "delivery_count": count} for f, last, count in read.acquired
            ]
            total += read.count
            budget_records -= read.count
            budget_bytes -= len(read.records)
            self.context.metrics.record_fetch(name, len(read.records))
        return total, errors

    @handles(ApiKey.SHARE_FETCH)
    async def handle_share_fetch_request(self, request: Request) -> Any:
        body = request.body
        require_share_groups(self.context.features)
        self._check(request)
        session, unknown, dropped = self._session(request)
        results: dict[TopicPartition, dict[str, Any]] = {}
        for tp in unknown:
            results[tp] = _partition(None, tp[1])
            results[tp]["error_code"] = ErrorCode.unknown_topic_id
        self._acknowledge(request, body.group_id, body.member_id, body.topics, results, "acknowledge_error_code")
        if dropped:  # what the member still holds on a partition it forgot goes back
            self.context.shares.release_session(attrs.evolve(session, partitions=dropped))
        lock_ms = self.context.shares.configs(body.group_id)["share.record.lock.duration.ms"]
        if body.share_session_epoch == FINAL_EPOCH:
            self.context.shares.sessions.close(body.group_id, body.member_id, session.node_id)
            self.context.shares.release_session(session)
            return self._respond(request, results, acquisition_lock_timeout=lock_ms)
        total, errors = self._acquire(request, session, results)
        for tp in session.partitions:  # Kafka's BrokerTopicMetrics: each partition fetched, once
            failed = results.get(tp, {}).get("error_code", ErrorCode.none) != ErrorCode.none
            self.context.metrics.record_share_fetch(tp[0], failed)
        max_wait = body.max_wait.total_seconds()
        if total or errors or max_wait <= 0 or body.max_records == 0 or not session.partitions:
            self._fetched(request, session, results)
            return self._respond(request, results, acquisition_lock_timeout=lock_ms)
        self.context.purgatory.delay(self._delayed_share_fetch, request, session, results,
                                     trio.current_time() + max_wait, lock_ms,
                                     name=f"DelayedShareFetch:{request.connection_id}")
        return None

    async def _delayed_share_fetch(
        self,
        request: Request,
        session: ShareSession,
        results: dict[TopicPartition, dict[str, Any]],
        deadline: float,
        lock_ms: int,
    ) -> None:
        try:
            with self.context.purgatory.wait_until(deadline):
                while True:  # acquire, then wait with no checkpoint between: nothing is missed
                    total, errors = self._acquire(request, session, results)
                    if total or errors:
                        break
                    await self._wait_for_news(request, session)
            self._fetched(request, session, results)
            response: Any = self._respond(request, results, acquisition_lock_timeout=lock_ms)
        except Exception:
            log.exception("delayed share fetch for %s failed", request.connection_id)
            response = Answer(throttle_time=0, error_code=ErrorCode.unknown_server_error, error_message=None,
                              acquisition_lock_timeout=lock_ms, responses=[], node_endpoints=[])
        self.context.respond(request, response)

    def _fetched(self, request: Request, session: ShareSession, results: dict[TopicPartition, dict[str, Any]]) -> None:
        """Kafka's ShareGroupMetrics for an answered ShareFetch: the share of its partitions
        that returned records, and the time from its arrival to their acquisition."""
        with_records = sum(1 for tp in session.partitions if results.get(tp, {}).get("acquired_records"))
        acquire_ms = (trio.current_time() - request.start_time) * 1000
        self.context.metrics.record_share_fetch_done(request.body.group_id, len(session.partitions),
                                                     with_records, acquire_ms)

    async def _wait_for_news(self, request: Request, session: ShareSession) -> None:
        """Until a partition of the session may have something to acquire: its end grew, or
        records were released. One event, woken by watchers (as DelayedFetch)."""
        committed = self.context.shares.configs(request.body.group_id)["share.isolation.level"] == "read_committed"
        ends = [self.context.shares.released]
        for name, partition in session.partitions:
            if name in self.replicas.topics and self._partition_error(request, name, partition)[0] == ErrorCode.none:
                partition_log = self.replicas.get_log(name, partition)
                ends.append(partition_log.last_stable_offset if committed else partition_log.high_watermark)
        seen = [(end, end.value) for end in ends]
        woken = [trio.Event()]

        def wake() -> None:
            woken[0].set()

        for end in ends:
            end.watchers.add(wake)
        try:
            while not any(end.value != value for end, value in seen):
                await woken[0].wait()
                woken[0] = trio.Event()
        finally:
            for end in ends:
                end.watchers.discard(wake)

    # --- ShareAcknowledge -------------------------------------------------------------------

    @handles(ApiKey.SHARE_ACKNOWLEDGE)
    async def handle_share_acknowledge_request(self, request: Request) -> Any:
        body = request.body
        require_share_groups(self.context.features)
        self._check(request)
        if body.share_session_epoch == INITIAL_EPOCH:
            raise KafkaProtocolError("ShareAcknowledge cannot open a share session.",
                                     ErrorCode.invalid_share_session_epoch)
        session = self.context.shares.sessions.get(body.group_id, body.member_id, body.share_session_epoch,
                                           self.context.config.node_id)
        results: dict[TopicPartition, dict[str, Any]] = {}
        self._acknowledge(request, body.group_id, body.member_id, body.topics, results, "error_code")
        for result in results.values():
            for key in ("acknowledge_error_code", "acknowledge_error_message", "records", "acquired_records"):
                result.pop(key, None)
        if body.share_session_epoch == FINAL_EPOCH:
            self.context.shares.sessions.close(body.group_id, body.member_id, session.node_id)
            self.context.shares.release_session(session)
        else:
            session.next_epoch()
        if _has_lock_timeout(request):  # ShareAcknowledge v2 (KIP-1222) says it too
            lock_ms = self.context.shares.configs(body.group_id)["share.record.lock.duration.ms"]
            return self._respond(request, results, acquisition_lock_timeout=lock_ms)
        return self._respond(request, results)

    def error_response(self, request: Request, code: ErrorCode) -> Any:
        top: dict[str, Any] = {"acquisition_lock_timeout": 0} if _has_lock_timeout(request) else {}
        return Answer(throttle_time=0, error_code=code, error_message=None, responses=[], node_endpoints=[], **top)


def _has_lock_timeout(request: Request) -> bool:
    return request.api_key == ApiKey.SHARE_FETCH or request.api_version >= 2


def _partition(topic_id: Any, partition: int) -> dict[str, Any]:
    return {"topic_id": topic_id, "partition_index": partition, "error_code": ErrorCode.none, "error_message": None,
            "acknowledge_error_code": ErrorCode.none, "acknowledge_error_message": None,
            "current_leader": {"leader_id": -1, "leader_epoch": -1}, "records": b"", "acquired_records": []}

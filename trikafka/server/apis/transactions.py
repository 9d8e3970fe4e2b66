"""The transaction APIs: translation between kio entities and the TransactionCoordinator.

AddPartitionsToTxn v0–v5 (v0–v3 the client form; v4+ KIP-890's broker-to-broker batch of
transactions, each either added or, with ``verify_only``, only checked; it needs
CLUSTER_ACTION, as in Kafka), AddOffsetsToTxn v0–v4, EndTxn v0–v5 (v5: transaction version 2,
the epoch bumps as the transaction ends and the answer carries the producer id and epoch to
use next — see ``coordinator/transactions/transaction_v2.py``), TxnOffsetCommit v0–v5 (v5: the group joins
the transaction implicitly, no AddOffsetsToTxn), DescribeTransactions v0 and ListTransactions
v0–v1.
InitProducerId lives with the idempotent producers (``producers.py``) and calls the same
coordinator for a transactional id.

Version rules (KIP-588): PRODUCER_FENCED is new in AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn v2 (InitProducerId v4); older versions get INVALID_PRODUCER_EPOCH instead, which
their clients treat the same way.
"""

from __future__ import annotations

import datetime
from typing import Any

from trikafka.coordinator.transactions.transaction_coordinator import TransactionCoordinator
from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import Answer, ApiFamily, handles

__all__ = ["TransactionApis", "fenced_for"]



def fenced_for(code: ErrorCode, version: int, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED as the request's version knows it."""
    if code == ErrorCode.producer_fenced and version < first_version:
        return ErrorCode.invalid_producer_epoch
    return code


class TransactionApis(ApiFamily):
    @property
    def coordinator(self) -> TransactionCoordinator:
        return self.context.transactions

    def _may_write(self, request: Request, transactional_id: str) -> bool:
        return self.authorize(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)

    # --- AddPartitionsToTxn ------------------------------------------------------------

    @handles(ApiKey.ADD_PARTITIONS_TO_TXN)
    async def handle_add_partitions_to_txn_request(self, request: Request) -> Any:
        body = request.body
        if request.api_version >= 4:
            return self._add_partitions_batch(request, body)
        topics = body.v3_and_below_topics
        if not self._may_write(request, body.v3_and_below_transactional_id):
            return self._add_partitions_response(request, {
                (t.name, p): ErrorCode.transactional_id_authorization_failed for t in topics for p in t.partitions
            })
        codes = self._add_partitions(
            request, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch, topics, verify_only=False,
        )
        codes = {tp: fenced_for(code, request.api_version, 2) for tp, code in codes.items()}
        return self._add_partitions_response(request, codes)

    def _add_partitions_batch(self, request: Request, body: Any) -> Any:
        """v4+: one result per transaction (brokers verifying a Produce send these)."""
        if not self.authorize(request, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            return Answer(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=[])
        results = []
        for txn in body.transactions:
            codes = self._add_partitions(
                request, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                verify_only=txn.verify_only,
            )
            results.append({"transactional_id": txn.transactional_id, "topic_results": _by_topic(codes)})
        return Answer(throttle_time=0, error_code=ErrorCode.none, results_by_transaction=results)

    def _add_partitions(
        self, request: Request, transactional_id: str, producer_id: int, epoch: int, topics: Any, *, verify_only: bool
    ) -> dict[tuple[str, int], ErrorCode]:
        codes: dict[tuple[str, int], ErrorCode] = {}
        wanted = []
        for topic in topics:
            info = self.replicas.topics.get(topic.name)
            writable = self.authorize(request, AclOperation.WRITE, ResourceType.TOPIC, topic.name)
            for partition in topic.partitions:
                if not writable:
                    codes[(topic.name, partition)] = ErrorCode.topic_authorization_failed
                elif info is None or not 0 <= partition < info.partitions:
                    codes[(topic.name, partition)] = ErrorCode.unknown_topic_or_partition
                elif info.is_internal:
                    codes[(topic.name, partition)] = ErrorCode.topic_authorization_failed
                else:
                    wanted.append((topic.name, partition))
        if codes:  # Kafka: one bad partition fails the request; the others were not attempted
            for tp in wanted:
                codes[tp] = ErrorCode.operation_not_attempted
        elif verify_only:
            codes = self.coordinator.verify_partitions(transactional_id, producer_id, epoch, wanted)
        else:
            codes = dict.fromkeys(wanted, self.coordinator.add_partitions(transactional_id, producer_id, epoch, wanted))
        return codes

    def _add_partitions_response(self, request: Request, codes: dict[tuple[str, int], ErrorCode]) -> Any:
        return Answer(throttle_time=0, results_by_topic_v3_and_below=_by_topic(codes))

    # --- AddOffsetsToTxn / EndTxn ------------------------------------------------------

    @handles(ApiKey.ADD_OFFSETS_TO_TXN)
    async def handle_add_offsets_to_txn_request(self, request: Request) -> Any:
        body = request.body
        if not self._may_write(request, body.transactional_id):
            code = ErrorCode.transactional_id_authorization_failed
        elif not self.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
            code = ErrorCode.group_authorization_failed
        else:
            code = self.coordinator.add_offsets(
                body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
            )
        return build(
            request.spec.response_type, throttle_time=0, error_code=fenced_for(code, request.api_version, 2)
        )

    @handles(ApiKey.END_TXN)
    async def handle_end_txn_request(self, request: Request) -> Any:
        body = request.body
        producer_id, epoch = -1, -1
        if not self._may_write(request, body.transactional_id):
            code = ErrorCode.transactional_id_authorization_failed
        else:
            code, producer_id, epoch = await self.coordinator.end_txn(
                body.transactional_id, body.producer_id, body.producer_epoch, body.committed,
                bump_epoch=request.api_version >= 5,
            )
        return Answer(
            throttle_time=0,
            error_code=fenced_for(code, request.api_version, 2),
            producer_id=producer_id,
            producer_epoch=epoch,
        )

    # --- TxnOffsetCommit ---------------------------------------------------------------

    @handles(ApiKey.TXN_OFFSET_COMMIT)
    async def handle_txn_offset_commit_request(self, request: Request) -> Any:
        body = request.body
        offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
        codes: dict[tuple[str, int], ErrorCode] = {}
        whole = None  # the request's error, for every partition (Kafka's getErrorResponse)
        if not self._may_write(request, body.transactional_id):
            whole = ErrorCode.transactional_id_authorization_failed
        elif not self.authorize(request, AclOperation.READ, ResourceType.GROUP, body.group_id):
            whole = ErrorCode.group_authorization_failed
        for topic in body.topics:
            info = self.replicas.topics.get(topic.name)
            readable = whole is None and self.authorize(request, AclOperation.READ, ResourceType.TOPIC, topic.name)
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if whole is not None:
                    codes[tp] = whole
                    continue
                if not readable:
                    codes[tp] = ErrorCode.topic_authorization_failed
                    continue
                if info is None or not 0 <= p.partition_index < info.partitions:
                    codes[tp] = ErrorCode.unknown_topic_or_partition
                    continue
                offsets[tp] = (p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
        groups = self.context.groups
        member_error = None
        if not offsets:
            pass  # nothing to commit (unknown or refused partitions only)
        elif groups is not None and groups.loading:
            member_error = ErrorCode.coordinator_load_in_progress
        elif groups is not None:
            member_error = groups.check_transactional_member(
                body.group_id,
                getattr(body, "generation_id", -1),
                getattr(body, "member_id", ""),
                getattr(body, "group_instance_id", None),
            )
        if member_error is None and request.api_version >= 5 and offsets:
            # Transaction version 2: the group joins the transaction here (no AddOffsetsToTxn).
            code = self.coordinator.add_offsets(
                body.transactional_id, body.producer_id, body.producer_epoch, body.group_id
            )
            if code != ErrorCode.none:
                member_error = ErrorCode.invalid_producer_epoch if code == ErrorCode.producer_fenced else code
        if member_error is not None:
            codes.update(dict.fromkeys(offsets, member_error))
        elif offsets:
            codes.update(
                self.coordinator.txn_offset_commit(
                    body.transactional_id, body.group_id, body.producer_id, body.producer_epoch, offsets
                )
            )
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic in body.topics:
            for p in topic.partitions:
                by_topic.setdefault(topic.name, []).append(
                    {"partition_index": p.partition_index, "error_code": codes[(topic.name, p.partition_index)]}
                )
        return Answer(
            throttle_time=0,
            topics=[{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        )

    # --- DescribeTransactions / ListTransactions ---------------------------------------

    @handles(ApiKey.DESCRIBE_TRANSACTIONS)
    async def handle_describe_transactions_request(self, request: Request) -> Any:
        states = []
        for transactional_id in request.body.transactional_ids:
            state: dict[str, Any] = {
                "error_code": ErrorCode.none,
                "transactional_id": transactional_id,
                "transaction_state": "",
                "transaction_timeout": 0,
                "transaction_start_time": _datetime(-1),
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
            txn = None if self.coordinator.loading else self.coordinator.describe(transactional_id)
            if not self.authorize(request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
                state["error_code"] = ErrorCode.transactional_id_authorization_failed
            elif self.coordinator.loading:
                state["error_code"] = ErrorCode.coordinator_load_in_progress
            elif not transactional_id:
                state["error_code"] = ErrorCode.invalid_request
            elif txn is None:
                state["error_code"] = ErrorCode.transactional_id_not_found
            else:
                by_topic: dict[str, list[int]] = {}
                for topic, partition in sorted(txn.partitions):
                    if self.authorize(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                        by_topic.setdefault(topic, []).append(partition)
                state.update(
                    transaction_state=txn.state.value,
                    transaction_timeout=txn.timeout_ms,
                    transaction_start_time=_datetime(txn.start_ms),
                    producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch,
                    topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                )
            states.append(state)
        return Answer(throttle_time=0, transaction_states=states)

    @handles(ApiKey.LIST_TRANSACTIONS)
    async def handle_list_transactions_request(self, request: Request) -> Any:
        body = request.body
        known = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead"}
        filters = set(body.state_filters)
        if self.coordinator.loading:
            return build(
                request.spec.response_type, throttle_time=0, error_code=ErrorCode.coordinator_load_in_progress,
                unknown_state_filters=[], transaction_states=[],
            )
        txns = self.coordinator.list_transactions(
            filters & known, set(body.producer_id_filters), getattr(body, "duration_filter", -1)
        )
        if filters and not filters & known:
            txns = []
        return Answer(
            throttle_time=0,
            error_code=ErrorCode.none,
            unknown_state_filters=sorted(filters - known),
            transaction_states=[
                {
                    "transactional_id": t.transactional_id,
                    "producer_id": t.producer_id,
                    "transaction_state": t.state.value,
                }
                for t in txns
                if self.authorize(request, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)
            ],
        )


def _by_topic(codes: dict[tuple[str, int], ErrorCode]) -> list[dict[str, Any]]:
    """AddPartitionsToTxn's per-topic, per-partition results."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (name, partition), code in codes.items():
        by_topic.setdefault(name, []).append({"partition_index": partition, "partition_error_code": code})
    return [{"name": name, "results_by_partition": results} for name, results in by_topic.items()]


def _datetime(ms: int) -> datetime.datetime:
    """Kafka's int64 milliseconds as kio's datetime field. Kafka sends -1 for "no transaction
    started"; kio (and so the project's client) cannot read a negative timestamp, so 0."""
    return datetime.datetime.fromtimestamp(max(ms, 0) / 1000, tz=datetime.UTC)

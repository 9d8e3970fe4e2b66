"""NOT_COORDINATOR: group and transaction requests reach only their coordinator.

Why a gate around the handlers rather than checks inside them. The group and transaction
coordinators' state is one per process (it survives any broker stopping, the way Kafka's
survives in ``__consumer_offsets`` and ``__transaction_state``); what changes between
brokers is only *who may answer*. So each broker's group and transaction handlers are
wrapped once, at wiring time: a request about a group or transactional id this broker does
not coordinate is answered NOT_COORDINATOR, in the shape its API needs, before the
coordinator sees it — exactly what a Kafka broker that is not the coordinator says, after
which clients ask FindCoordinator again. Requests naming several ids answer per id, and
ListGroups / ListTransactions list what this broker coordinates, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import error_response
from trikafka.protocol.registry import ApiKey
from trikafka.server.kafka_apis import Answer
from trikafka.server.replica.cluster_view import GROUP_KEY, TRANSACTION_KEY, ClusterView

__all__ = ["gate_coordinator_apis"]

Handler = Callable[[Request], Awaitable[Any]]
NOT_COORDINATOR = ErrorCode.not_coordinator

# api key -> (key type, the request's one id)
_SINGLE: dict[int, tuple[int, Callable[[Any], str | None]]] = {
    ApiKey.OFFSET_COMMIT: (GROUP_KEY, lambda b: b.group_id),
    ApiKey.JOIN_GROUP: (GROUP_KEY, lambda b: b.group_id),
    ApiKey.HEARTBEAT: (GROUP_KEY, lambda b: b.group_id),
    ApiKey.LEAVE_GROUP: (GROUP_KEY, lambda b: b.group_id),
    ApiKey.SYNC_GROUP: (GROUP_KEY, lambda b: b.group_id),
    ApiKey.OFFSET_DELETE: (GROUP_KEY, lambda b: b.group_id),
    ApiKey.TXN_OFFSET_COMMIT: (GROUP_KEY, lambda b: b.group_id),  # the group's coordinator
    ApiKey.INIT_PRODUCER_ID: (TRANSACTION_KEY, lambda b: b.transactional_id),  # when transactional
    ApiKey.ADD_OFFSETS_TO_TXN: (TRANSACTION_KEY, lambda b: b.transactional_id),
    ApiKey.END_TXN: (TRANSACTION_KEY, lambda b: b.transactional_id),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (GROUP_KEY, lambda b: b.group_id),  # KIP-848
    ApiKey.SHARE_GROUP_HEARTBEAT: (GROUP_KEY, lambda b: b.group_id),  # KIP-932
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (GROUP_KEY, lambda b: b.group_id),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (GROUP_KEY, lambda b: b.group_id),
}


def _partition_errors(topics: Any, name_field: str, partitions_field: str, code: ErrorCode) -> list[dict[str, Any]]:
    return [
        {
            name_field: getattr(t, "name", None) if name_field == "name" else getattr(t, "topic_id", None),
            partitions_field: [{"partition_index": _index(p), "error_code": code} for p in t.partitions],
        }
        for t in topics
    ]


def _index(p: Any) -> int:
    return p if isinstance(p, int) else p.partition_index


def _refusal(request: Request) -> Any:
    """The API's answer when every id in it belongs to another coordinator."""
    body, key = request.body, request.api_key
    if key in (ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT):  # per partition
        by_id = key == ApiKey.OFFSET_COMMIT and request.api_version >= 10
        return Answer(
            throttle_time=0,
            topics=_partition_errors(body.topics, "topic_id" if by_id else "name", "partitions", NOT_COORDINATOR),
        )
    if key == ApiKey.ADD_PARTITIONS_TO_TXN:
        return Answer(
            throttle_time=0,
            results_by_topic_v3_and_below=[
                {
                    "name": t.name,
                    "results_by_partition": [
                        {"partition_index": p, "partition_error_code": NOT_COORDINATOR} for p in t.partitions
                    ],
                }
                for t in body.v3_and_below_topics
            ],
        )
    if key == ApiKey.OFFSET_FETCH:  # before v8
        return Answer(throttle_time=0, topics=[], error_code=NOT_COORDINATOR)
    return error_response(request.spec.response_type, NOT_COORDINATOR)


@attrs.frozen
class _Gate:
    view: ClusterView
    node_id: int

    def owns(self, key_type: int, key: str | None) -> bool:
        return key is None or self.view.coordinator(key_type, key) == self.node_id

    def single(self, handler: Handler, key_type: int, key_of: Callable[[Any], str | None]) -> Handler:
        async def gated(request: Request) -> Any:
            if not self.owns(key_type, key_of(request.body)):
                return _refusal(request)
            return await handler(request)

        return gated

    def offset_fetch(self, handler: Handler) -> Handler:
        async def gated(request: Request) -> Any:
            if request.api_version < 8:
                if not self.owns(GROUP_KEY, request.body.group_id):
                    return _refusal(request)
                return await handler(request)
            answer = await handler(request)
            if not isinstance(answer, Answer):
                return answer
            for group in answer.values["groups"]:
                if not self.owns(GROUP_KEY, group["group_id"]):
                    group.update(topics=[], error_code=NOT_COORDINATOR)
            return answer

        return gated

    def per_id(self, handler: Handler, key_type: int, list_key: str, id_key: str) -> Handler:
        """Describe*: the handler describes every id; those owned elsewhere become errors."""

        async def gated(request: Request) -> Any:
            answer = await handler(request)
            if not isinstance(answer, Answer):
                return answer
            for entry in answer.values[list_key]:
                if not self.owns(key_type, entry[id_key]):
                    entry["error_code"] = NOT_COORDINATOR
            return answer

        return gated

    def delete_groups(self, handler: Handler) -> Handler:
        """Only owned groups are deleted: the rest are filtered out of the request first."""

        async def gated(request: Request) -> Any:
            names = list(request.body.groups_names)
            owned = [g for g in names if self.owns(GROUP_KEY, g)]
            results: dict[str, Any] = {g: NOT_COORDINATOR for g in names if g not in owned}
            if owned:
                inner = attrs.evolve(request, body=_replace(request.body, groups_names=tuple(owned)))
                answer = await handler(inner)
                if not isinstance(answer, Answer):
                    return answer
                results.update({r["group_id"]: r["error_code"] for r in answer.values["results"]})
            return Answer(throttle_time=0, results=[{"group_id": g, "error_code": results[g]} for g in names])

        return gated

    def add_partitions(self, handler: Handler) -> Handler:
        """AddPartitionsToTxn: v0-3 name one transactional id; v4+ batches several, each
        refused on its own when another broker coordinates it."""
        single = self.single(handler, TRANSACTION_KEY, lambda b: b.v3_and_below_transactional_id)

        async def gated(request: Request) -> Any:
            if request.api_version < 4:
                return await single(request)
            transactions = list(request.body.transactions)
            owned = [t for t in transactions if self.owns(TRANSACTION_KEY, t.transactional_id)]
            results: list[Any] = []
            if owned:
                inner = attrs.evolve(request, body=_replace(request.body, transactions=tuple(owned)))
                answer = await handler(inner)
                if not isinstance(answer, Answer):
                    return answer
                results = list(answer.values["results_by_transaction"])
            for txn in transactions:
                if txn not in owned:
                    results.append({"transactional_id": txn.transactional_id, "topic_results": [
                        {"name": t.name, "results_by_partition": [
                            {"partition_index": p, "partition_error_code": NOT_COORDINATOR} for p in t.partitions]}
                        for t in txn.topics]})
            return Answer(throttle_time=0, error_code=ErrorCode.none, results_by_transaction=results)

        return gated

    def listed(self, handler: Handler, key_type: int, list_key: str, id_key: str) -> Handler:
        async def gated(request: Request) -> Any:
            answer = await handler(request)
            if isinstance(answer, Answer):
                answer.values[list_key] = [e for e in answer.values[list_key] if self.owns(key_type, e[id_key])]
            return answer

        return gated


def _replace(body: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(body, **changes)


def gate_coordinator_apis(handlers: dict[int, Handler], view: ClusterView, node_id: int) -> None:
    """Wrap one broker's group and transaction handlers in place (see the module docstring)."""
    gate = _Gate(view, node_id)
    for key, (key_type, key_of) in _SINGLE.items():
        if key in handlers:
            handlers[key] = gate.single(handlers[key], key_type, key_of)
    wrappers = {
        ApiKey.OFFSET_FETCH: gate.offset_fetch,
        ApiKey.ADD_PARTITIONS_TO_TXN: gate.add_partitions,
        ApiKey.DESCRIBE_GROUPS: lambda h: gate.per_id(h, GROUP_KEY, "groups", "group_id"),
        ApiKey.CONSUMER_GROUP_DESCRIBE: lambda h: gate.per_id(h, GROUP_KEY, "groups", "group_id"),
        ApiKey.SHARE_GROUP_DESCRIBE: lambda h: gate.per_id(h, GROUP_KEY, "groups", "group_id"),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: lambda h: gate.per_id(h, GROUP_KEY, "groups", "group_id"),
        ApiKey.DESCRIBE_TRANSACTIONS: lambda h: gate.per_id(
            h, TRANSACTION_KEY, "transaction_states", "transactional_id"
        ),
        ApiKey.DELETE_GROUPS: gate.delete_groups,
        ApiKey.LIST_GROUPS: lambda h: gate.listed(h, GROUP_KEY, "groups", "group_id"),
        ApiKey.LIST_TRANSACTIONS: lambda h: gate.listed(h, TRANSACTION_KEY, "transaction_states", "transactional_id"),
    }
    for key, wrap in wrappers.items():
        if key in handlers:
            handlers[key] = wrap(handlers[key])

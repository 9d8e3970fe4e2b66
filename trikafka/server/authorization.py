"""Asking the authorizer about one request: Kafka's ``AuthHelper``, in one place.

Every handler asks through these functions (as :class:`~trikafka.server.kafka_apis.ApiFamily`
methods): the principal and the client's address come from the :class:`Request`, the ACLs
from the broker's :class:`~trikafka.security.acl_store.AclStore`. Without an authorizer
(``authorizer.class.name`` empty) every question is answered yes, and the
``*_authorized_operations`` bit sets hold every operation the resource supports — Kafka's
answers in both cases.

Resources are always checked by *name*: a request naming a topic by id is resolved to the
topic first, so an id is never a way around a topic's ACLs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.security.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    all_operations,
)

__all__ = [
    "AUTHORIZATION_ERRORS",
    "AclOperation",
    "ResourceType",
    "authorize",
    "authorize_by_resource_type",
    "authorized_operations",
    "filter_authorized",
    "require",
]

#: The error a denied resource gets (Kafka's ``AclEntry.authorizationError``).
AUTHORIZATION_ERRORS = {
    ResourceType.TOPIC: ErrorCode.topic_authorization_failed,
    ResourceType.GROUP: ErrorCode.group_authorization_failed,
    ResourceType.CLUSTER: ErrorCode.cluster_authorization_failed,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
    ResourceType.DELEGATION_TOKEN: ErrorCode.delegation_token_authorization_failed,
}


def authorize(
    acls: Any, request: Request, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
) -> bool:
    if acls is None:
        return True
    result: bool = acls.authorizer.authorize(request.principal, request.client_host, operation, resource_type, name)
    return result


def require(
    acls: Any, request: Request, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME
) -> None:
    """Raise the resource type's *_AUTHORIZATION_FAILED unless allowed: inside
    ``errors_into`` it fails one entry, outside it the whole request."""
    if not authorize(acls, request, operation, resource_type, name):
        raise KafkaProtocolError(
            f"{request.principal} may not {operation.name} {resource_type.name} {name}",
            AUTHORIZATION_ERRORS[resource_type],
        )


def filter_authorized(
    acls: Any, request: Request, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
) -> set[str]:
    """The names among ``names`` the request may ``operation``."""
    return {n for n in names if authorize(acls, request, operation, resource_type, n)}


def authorize_by_resource_type(
    acls: Any, request: Request, operation: AclOperation, resource_type: ResourceType
) -> bool:
    if acls is None:
        return True
    allowed: bool = acls.authorizer.authorize_by_resource_type(
        request.principal, request.client_host, operation, resource_type
    )
    return allowed


def authorized_operations(
    acls: Any, request: Request, resource_type: ResourceType, name: str = CLUSTER_NAME
) -> int:
    if acls is None:
        return all_operations(resource_type)
    result: int = acls.authorizer.authorized_operations(request.principal, request.client_host, resource_type, name)
    return result

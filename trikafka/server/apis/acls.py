"""CreateAcls, DescribeAcls, DeleteAcls: Kafka's ``AclApis`` over the broker's AclStore.

Order of checks, as in Kafka: first the caller's right (DESCRIBE on the cluster to describe,
ALTER to create or delete: CLUSTER_AUTHORIZATION_FAILED), then whether there is an authorizer
at all (SECURITY_DISABLED), then each ACL or filter on its own (INVALID_REQUEST with Kafka's
message for a pattern that cannot be stored). A request carrying an UNKNOWN (or unheard-of)
resource type, pattern type, operation or permission is one Kafka's parser refuses (and closes
the connection for); here the whole request is answered INVALID_REQUEST naming the field, and
the connection stays — every request gets an answer. Creating an ACL that exists succeeds and changes nothing;
each change is written to the data directory before the answer goes out.
"""

from __future__ import annotations

import logging
from typing import Any

from trikafka.errors import ErrorCode, KafkaProtocolError
from trikafka.network.request_channel import Request
from trikafka.protocol.registry import ApiKey
from trikafka.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    invalid_new_acl,
)
from trikafka.server.kafka_apis import Answer, ApiFamily, handles

__all__ = ["AclApis"]

log = logging.getLogger("trikafka.server")

NO_AUTHORIZER = "No Authorizer is configured on the broker"


CREATION_FIELDS = ("resource_type", "resource_pattern_type", "operation", "permission_type")
FILTER_FIELDS = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")


def _codes(request: Request, item: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The four enum fields of a creation or a filter; the whole request is INVALID_REQUEST
    when one is UNKNOWN or unheard of (Kafka's parser refuses it)."""
    kinds = (ResourceType, PatternType, AclOperation, AclPermissionType)
    values = []
    for field, kind in zip(names, kinds, strict=True):
        code = getattr(item, field)
        if code not in kind._value2member_map_ or code == 0:
            raise KafkaProtocolError(
                f"{request.spec.name} contains an UNKNOWN {field}: {code}", ErrorCode.invalid_request
            )
        values.append(kind(code))
    return tuple(values)


def _filter(request: Request, item: Any) -> AclBindingFilter:
    resource_type, pattern_type, operation, permission = _codes(request, item, FILTER_FIELDS)
    return AclBindingFilter(
        resource_type, item.resource_name_filter, pattern_type, item.principal_filter,
        item.host_filter, operation, permission,
    )


def _described(acl: AclBinding) -> dict[str, Any]:
    return {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
            "permission_type": acl.permission_type}


class AclApis(ApiFamily):
    @handles(ApiKey.DESCRIBE_ACLS)
    async def handle_describe_acls_request(self, request: Request) -> Any:
        self.require_cluster(request, AclOperation.DESCRIBE)
        try:
            acl_filter = _filter(request, request.body)
        except KafkaProtocolError as exc:
            return self.error_response(request, exc.error_code, str(exc))
        acls = self.context.acls
        if acls is None:  # no authorizer
            return Answer(throttle_time=0, error_code=ErrorCode.security_disabled,
                          error_message=NO_AUTHORIZER, resources=[])
        resources: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for acl in acls.authorizer.acls(acl_filter):
            pattern = (acl.resource_type, acl.resource_name, acl.pattern_type)
            resources.setdefault(pattern, []).append(_described(acl))
        return Answer(
            throttle_time=0, error_code=ErrorCode.none, error_message=None,
            resources=[
                {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
                for (rt, name, pt), acls in resources.items()
            ],
        )

    @handles(ApiKey.CREATE_ACLS)
    async def handle_create_acls_request(self, request: Request) -> Any:
        self.require_cluster(request, AclOperation.ALTER)
        creations = []
        try:
            for item in request.body.creations:
                resource_type, pattern_type, operation, permission = _codes(request, item, CREATION_FIELDS)
                creations.append(AclBinding(resource_type, item.resource_name, pattern_type, item.principal,
                                            item.host, operation, permission))
        except KafkaProtocolError as exc:
            return self.error_response(request, exc.error_code, str(exc))
        acls = self.context.acls
        if acls is None:  # no authorizer
            return self.error_response(request, ErrorCode.security_disabled, NO_AUTHORIZER)
        results: list[dict[str, Any]] = []
        valid = []
        for acl in creations:
            problem = invalid_new_acl(acl)
            if problem is None:
                valid.append(acl)
                results.append({"error_code": ErrorCode.none, "error_message": None})
            else:
                results.append({"error_code": ErrorCode.invalid_request, "error_message": problem})
        acls.create(valid)
        if valid:
            log.info("%s created ACLs: %s", request.principal, "; ".join(map(_show, valid)))
        return Answer(throttle_time=0, results=results)

    @handles(ApiKey.DELETE_ACLS)
    async def handle_delete_acls_request(self, request: Request) -> Any:
        self.require_cluster(request, AclOperation.ALTER)
        try:
            filters = [_filter(request, item) for item in request.body.filters]
        except KafkaProtocolError as exc:
            return self.error_response(request, exc.error_code, str(exc))
        acls = self.context.acls
        if acls is None:  # no authorizer
            return self.error_response(request, ErrorCode.security_disabled, NO_AUTHORIZER)
        results = []
        for acl_filter in filters:
            gone = acls.delete(acl_filter)
            if gone:
                log.info("%s deleted ACLs: %s", request.principal, "; ".join(map(_show, gone)))
            results.append({
                "error_code": ErrorCode.none, "error_message": None,
                "matching_acls": [
                    {"error_code": ErrorCode.none, "error_message": None,
                     "resource_type": a.resource_type, "resource_name": a.resource_name,
                     "pattern_type": a.pattern_type, **_described(a)}
                    for a in gone
                ],
            })
        return Answer(throttle_time=0, filter_results=results)

    def error_response(self, request: Request, code: ErrorCode, message: str | None = None) -> Any:
        """Every creation or filter answered ``code`` (Kafka's getErrorResponse)."""
        error = {"error_code": code, "error_message": message}
        if request.api_key == ApiKey.CREATE_ACLS:
            return Answer(throttle_time=0, results=[dict(error) for _ in request.body.creations])
        if request.api_key == ApiKey.DELETE_ACLS:
            return Answer(throttle_time=0, filter_results=[
                {**error, "matching_acls": []} for _ in request.body.filters
            ])
        return Answer(throttle_time=0, resources=[], **error)


def _show(acl: AclBinding) -> str:
    return (f"{acl.permission_type.name} {acl.principal}@{acl.host} {acl.operation.name} on "
            f"{acl.resource_type.name}:{acl.pattern_type.name}:{acl.resource_name}")

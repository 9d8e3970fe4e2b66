"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

The client salts the password itself and sends SaltedPassword with the salt and iteration
count; the broker keeps only the derived StoredKey and ServerKey
(``trikafka.security.sasl``), in the first data directory so users survive a restart.
Validation and messages follow Kafka's controller: 4096–16384 iterations, known mechanisms,
no user twice in one request, deleting what exists.
"""

from __future__ import annotations

from typing import Any

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request
from trikafka.protocol.entities import build
from trikafka.protocol.registry import ApiKey
from trikafka.security.sasl.scram import credential_from_salted_password
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.kafka_apis import ApiFamily, handles

__all__ = ["ScramApis"]

#: Kafka's ScramMechanism type codes.
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {name: code for code, name in MECHANISM_TYPES.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


class ScramApis(ApiFamily):
    @property
    def store(self) -> Any:
        return self.context.scram_credentials

    @handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    async def handle_describe_user_scram_credentials_request(self, request: Request) -> Any:
        self.require_cluster(request, AclOperation.DESCRIBE)
        known = self.store.users()
        # Kafka's ScramImage.describe: no list, or an empty one, describes every user; a user
        # named twice is answered once, as DUPLICATE_RESOURCE.
        asked = [u.name for u in request.body.users or ()]
        results = []
        for user in dict.fromkeys(asked) if asked else sorted(known):
            if asked.count(user) > 1:
                results.append({"user": user, "error_code": ErrorCode.duplicate_resource,
                                "error_message": "Cannot describe SCRAM credentials for the same user "
                                f"twice in a single request: {user}", "credential_infos": []})
            elif user not in known:
                results.append({"user": user, "error_code": ErrorCode.resource_not_found,
                                "error_message": f"Attempt to describe a user credential that does not exist: {user}",
                                "credential_infos": []})
            else:
                infos = [{"mechanism": TYPE_OF[m], "iterations": i} for m, i in sorted(known[user].items())]
                results.append({"user": user, "error_code": ErrorCode.none, "error_message": None,
                                "credential_infos": infos})
        return build(request.spec.response_type, throttle_time=0, error_code=ErrorCode.none,
                     error_message=None, results=results)

    @handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    async def handle_alter_user_scram_credentials_request(self, request: Request) -> Any:
        body = request.body
        names = [d.name for d in body.deletions] + [u.name for u in body.upsertions]
        if not self.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER):
            return build(request.spec.response_type, throttle_time=0, results=[
                {"user": user, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
                for user in dict.fromkeys(names)
            ])
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        for name in names:
            if names.count(name) > 1:
                results[name] = (ErrorCode.duplicate_resource,
                                 "A user credential cannot be altered twice in the same request")
        changed = False
        for deletion in body.deletions:
            if deletion.name in results:
                continue
            mechanism = MECHANISM_TYPES.get(deletion.mechanism)
            if not deletion.name:
                results[deletion.name] = (ErrorCode.unacceptable_credential, "Username must not be empty")
            elif mechanism is None:
                results[deletion.name] = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
            elif not self.store.delete(deletion.name, mechanism):
                results[deletion.name] = (ErrorCode.resource_not_found,
                                          "Attempt to delete a user credential that does not exist")
            else:
                results[deletion.name] = (ErrorCode.none, None)
                changed = True
        for upsertion in body.upsertions:
            if upsertion.name in results:
                continue
            mechanism = MECHANISM_TYPES.get(upsertion.mechanism)
            if not upsertion.name:
                results[upsertion.name] = (ErrorCode.unacceptable_credential, "Username must not be empty")
            elif mechanism is None:
                results[upsertion.name] = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
            elif upsertion.iterations < MIN_ITERATIONS:
                results[upsertion.name] = (ErrorCode.unacceptable_credential, "Too few iterations")
            elif upsertion.iterations > MAX_ITERATIONS:
                results[upsertion.name] = (ErrorCode.unacceptable_credential, "Too many iterations")
            else:
                credential = credential_from_salted_password(
                    mechanism, bytes(upsertion.salt), bytes(upsertion.salted_password), upsertion.iterations
                )
                self.store.set(upsertion.name, mechanism, credential)
                results[upsertion.name] = (ErrorCode.none, None)
                changed = True
        if changed:
            self.store.save()
        return build(
            request.spec.response_type,
            throttle_time=0,
            results=[{"user": user, "error_code": code, "error_message": message}
                     for user, (code, message) in results.items()],
        )

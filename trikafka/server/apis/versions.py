"""ApiVersions: what this broker speaks, including Kafka's answer to a version it does not.

A client opens with ApiVersions at the newest version it knows. If that is newer than ours,
Kafka (KIP-511) answers with an ApiVersions **v0** response carrying UNSUPPORTED_VERSION and
the range of ApiVersions it does support, so the client can retry at a version both know.

Features (v3+, KIP-584): what this broker implements is advertised as Kafka's feature levels
(``server/features.py``): ``transaction.version`` 2 (KIP-890 part 2: EndTxn v5's epoch bump,
implicit AddPartitionsToTxn on Produce v12+, TxnOffsetCommit v5) — clients that read it (Kafka's
Java producer) use transaction version 2 — ``group.version`` 1 (the KIP-848 consumer protocol)
when ``group.coordinator.rebalance.protocols`` lists ``consumer``, and ``share.version`` 2
(share groups with their dead-letter queue), which UpdateFeatures (:class:`FeatureApis`) may
set to 0 (share groups off), 1 or 2. With ``kafka.version`` the features are that release's
(``server/api_table.py``). As Kafka, v3 answers omit supported features whose minimum is 0
(KAFKA-17011), and a feature at level 0 is not listed as finalized.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from trikafka.errors import ErrorCode
from trikafka.network.request_channel import Request, SendResponse
from trikafka.protocol.entities import build
from trikafka.protocol.headers import (
    encode_response,
    encode_response_body,
    frame_response,
)
from trikafka.protocol.registry import ApiKey
from trikafka.server.authorization import AclOperation, ResourceType
from trikafka.server.features import UpgradeType
from trikafka.server.kafka_apis import ApiContext, ApiFamily, handles

__all__ = ["ApiVersionsApis", "FeatureApis"]

# Kafka's ApiVersionsRequest.isValid(): software name and version, v3+.
log = logging.getLogger("trikafka.server")
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiVersionsApis(ApiFamily):
    def __init__(self, context: ApiContext) -> None:
        super().__init__(context)
        registry = context.registry
        lo, hi = registry.supported[ApiKey.API_VERSIONS]
        self._own_range = [{"api_key": ApiKey.API_VERSIONS, "min_version": lo, "max_version": hi}]
        self._all_ranges = [
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, lo, hi in registry.ranges()
        ]
        # The answer changes only with the features: encode each version's body once per
        # features epoch, when it is first asked for (a client asks for one version; building
        # all five cost a fresh broker's first answer ~10 ms of kio classes and encoders).
        # Encoding the ~30-entry table with kio was half of the broker's CPU under a
        # tiny-request load.
        self._answers: dict[int, tuple[Any, bytes]] = {}
        self._software: dict[tuple[str | None, str | None], bool] = {}
        self._epoch = -1

    def _answer(self, version: int) -> tuple[Any, bytes]:
        """The spec and the encoded body of the answer at ``version`` (a supported one), for
        the features as they are now."""
        features = self.context.features
        if self._epoch != features.epoch:
            self._answers.clear()
            self._epoch = features.epoch
        answer = self._answers.get(version)
        if answer is None:
            spec = self.context.registry.require(ApiKey.API_VERSIONS, version)
            body = build(
                spec.response_type,
                error_code=ErrorCode.none,
                api_keys=self._all_ranges,
                throttle_time=0,
                supported_features=[  # KAFKA-17011: v3 cannot carry a minimum of 0
                    {"name": n, "min_version": low, "max_version": high}
                    for n, (low, high) in features.supported.items() if version >= 4 or low > 0
                ],
                finalized_features_epoch=features.epoch,
                finalized_features=[
                    {"name": n, "max_version_level": v, "min_version_level": v}
                    for n, v in features.finalized().items()
                ],
            )
            answer = self._answers[version] = (spec, encode_response_body(spec, body))
        return answer

    def _valid_software(self, name: str | None, version: str | None) -> bool:
        """Kafka's check of the client's software name and version, remembered per pair
        (clients send the same pair on every connection)."""
        key = (name, version)
        valid = self._software.get(key)
        if valid is None:
            valid = bool(_SOFTWARE.fullmatch(name or "") and _SOFTWARE.fullmatch(version or ""))
            if len(self._software) >= 1024:
                self._software.clear()
            self._software[key] = valid
        return valid

    @handles(ApiKey.API_VERSIONS)
    async def handle_api_versions_request(self, request: Request) -> Any:
        if request.body is None:  # a version we do not support: answer v0, as Kafka does
            v0 = self.context.registry.require(ApiKey.API_VERSIONS, 0)
            body = build(v0.response_type, error_code=ErrorCode.unsupported_version, api_keys=self._own_range)
            return SendResponse(encode_response(v0, request.correlation_id, body))
        header = request.header
        version = header.request_api_version
        if version >= 3:
            body = request.body
            name, software_version = body.client_software_name, body.client_software_version
            if not self._valid_software(name, software_version):
                return build(
                    request.spec.response_type, error_code=ErrorCode.invalid_request, api_keys=[], throttle_time=0
                )
            # Who the client is, for client-metrics subscriptions (KIP-714).
            self.context.client_metrics.note_software(request.connection_id, name, software_version)
        spec, encoded = self._answer(version)
        return SendResponse(frame_response(spec, header.correlation_id, encoded))


class FeatureApis(ApiFamily):
    """UpdateFeatures (57): ``share.version`` up or down (``server/features.py``), as Kafka's
    controller answers ``kafka-features.sh``; CLUSTER ALTER, as Kafka checks."""

    @handles(ApiKey.UPDATE_FEATURES)
    async def handle_update_features_request(self, request: Request) -> Any:
        body, version = request.body, request.api_version
        features = self.context.features
        answer: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None}
        if not self.authorize(request, AclOperation.ALTER, ResourceType.CLUSTER):
            answer["error_code"] = ErrorCode.cluster_authorization_failed
            return self._answer(request, answer, [])
        results, updates = [], {}
        names = [u.feature for u in body.feature_updates]
        for update in body.feature_updates:
            if version == 0:
                upgrade = UpgradeType.SAFE_DOWNGRADE if update.allow_downgrade else UpgradeType.UPGRADE
            else:
                upgrade = update.upgrade_type
            code, message = features.check(update.feature, update.max_version_level, upgrade)
            if names.count(update.feature) > 1:
                code, message = ErrorCode.invalid_request, f"Feature {update.feature} was specified more than once."
            results.append({"feature": update.feature, "error_code": code, "error_message": message})
            updates[update.feature] = update.max_version_level
        failed = [r for r in results if r["error_code"] != ErrorCode.none]
        if failed and version >= 2:  # v2 has no per-feature results: the first error is the answer's
            answer.update(error_code=failed[0]["error_code"], error_message=failed[0]["error_message"])
        if not failed and not getattr(body, "validate_only", False):
            features.apply(updates)
            log.info("finalized features now %s (epoch %d)", dict(features.finalized()), features.epoch)
        return self._answer(request, answer, results)

    def _answer(self, request: Request, answer: dict[str, Any], results: list[dict[str, Any]]) -> Any:
        if request.api_version < 2:
            answer["results"] = results
        return build(request.spec.response_type, **answer)

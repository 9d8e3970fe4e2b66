"""The ``share.version`` feature (KIP-932 on KIP-584/KIP-1022): advertised by ApiVersions as a
Kafka 4.4 cluster's, changed by UpdateFeatures as ``kafka-features.sh`` does, and share groups
off at level 0 — every share API then answers UNSUPPORTED_VERSION, as Kafka's gate does —
over the in-memory transport in virtual time.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.server.test_topics_and_data import request
from tests.share.test_share_wire import heartbeat, setup, share_ack, share_fetch
from trikafka.testing import open_test_broker

UPGRADE, SAFE_DOWNGRADE = 1, 2


def update(feature: str, level: int, upgrade_type: int = UPGRADE, version: int = 1, validate_only: bool = False):
    return request(57, version, timeout=60_000, validate_only=validate_only, feature_updates=[
        {"feature": feature, "max_version_level": level, "upgrade_type": upgrade_type}])


async def features(client):
    answer = await client.request(request(18, 4, client_software_name="t", client_software_version="1"))
    supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
    finalized = {f.name: f.max_version_level for f in answer.finalized_features}
    return supported, finalized, answer.finalized_features_epoch


async def test_share_version_is_advertised_as_kafka_4_4_finalizes_it(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        supported, finalized, _ = await features(client)
        assert supported["share.version"] == (0, 2)
        assert finalized["share.version"] == 2
        assert finalized["transaction.version"] == 2 and finalized["group.version"] == 1


async def test_share_version_0_turns_share_groups_off_and_1_on_again(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        topic_id = await setup(client)
        _, _, epoch = await features(client)
        # A downgrade needs a downgrade type, as Kafka's controller says.
        refused = await client.request(update("share.version", 0))
        assert refused.results[0].error_code == ErrorCode.invalid_update_version
        assert "downgrade" in refused.results[0].error_message
        checked = await client.request(update("share.version", 0, SAFE_DOWNGRADE, validate_only=True))
        assert checked.results[0].error_code == ErrorCode.none
        assert (await features(client))[1]["share.version"] == 2  # validate_only changed nothing
        done = await client.request(update("share.version", 0, SAFE_DOWNGRADE))
        assert done.error_code == ErrorCode.none and done.results[0].error_code == ErrorCode.none
        _, finalized, new_epoch = await features(client)
        assert "share.version" not in finalized and new_epoch > epoch

        off = ErrorCode.unsupported_version
        assert (await client.request(heartbeat("g", epoch=1))).error_code == off
        assert (await client.request(share_fetch("g", topic_id, epoch=0))).error_code == off
        assert (await client.request(share_ack("g", topic_id, epoch=1, acks={}))).error_code == off
        described = await client.request(request(77, 1, group_ids=["g", "h"], include_authorized_operations=False))
        assert [g.error_code for g in described.groups] == [off, off]
        offsets = await client.request(request(90, 1, groups=[{"group_id": "g", "topics": None}]))
        assert offsets.groups[0].error_code == off
        altered = await client.request(request(91, 0, group_id="g", topics=[]))
        assert altered.error_code == off
        deleted = await client.request(request(92, 0, group_id="g", topics=[]))
        assert deleted.error_code == off

        back = await client.request(update("share.version", 1))
        assert back.results[0].error_code == ErrorCode.none
        assert (await features(client))[1]["share.version"] == 1
        joined = await client.request(heartbeat("g2"))
        assert joined.error_code == ErrorCode.none and joined.member_epoch >= 1


async def test_what_update_features_refuses(autojump_clock):
    async with open_test_broker() as tb, tb.client() as client:
        for feature, level, kind in (("share.version", 3, UPGRADE), ("no.such.feature", 1, UPGRADE),
                                     ("transaction.version", 1, SAFE_DOWNGRADE)):
            answer = await client.request(update(feature, level, kind))
            assert answer.results[0].error_code == ErrorCode.invalid_update_version, feature
            assert feature in answer.results[0].error_message
        # v2 has no per-feature results: the error is the answer's.
        answer = await client.request(update("share.version", 7, version=2))
        assert answer.error_code == ErrorCode.invalid_update_version
        # v0 says allow_downgrade instead of an upgrade type.
        v0 = await client.request(request(57, 0, timeout=60_000, feature_updates=[
            {"feature": "share.version", "max_version_level": 1, "allow_downgrade": True}]))
        assert v0.results[0].error_code == ErrorCode.none
        assert (await features(client))[1]["share.version"] == 1
